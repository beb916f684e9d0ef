"""The data node's batch logic and datacoord's segment lifecycle, without Spark or S3."""

from dataclasses import replace

import numpy as np
import pytest

from tests.fakes import DictStore
from vectide.services.common import binlog
from vectide.services.common.kv import MemoryKV
from vectide.services.common.msgstream import codec
from vectide.services.common.msgstream.message import (
    DataType,
    DeleteMsg,
    FieldColumn,
    InsertMsg,
    Position,
    TimeTickMsg,
)
from vectide.services.common.segment import BatchReport, Binlog, SegmentState, unpadded_log_id
from vectide.services.datacoord.core import DataCoord, DataCoordConfig
from vectide.services.indexnode.core import segment_vectors
from vectide.streaming.flush import (
    PK_FIELD,
    TS_FIELD,
    BatchStats,
    ParallelPuts,
    Record,
    checkpoints_only,
    merge_rows,
    process_batch,
    report_rows,
)

VCH = "c-dml_0_7v0"


def insert(segment, ids, ts):
    ids = np.asarray(ids, np.int64)
    vec = np.tile(ids[:, None].astype(np.float32), (1, 4))
    return InsertMsg(
        ts,
        ts,
        0,
        7,
        1,
        segment,
        VCH,
        ids,
        np.zeros(len(ids), np.int64),
        np.full(len(ids), ts, np.int64),
        [
            FieldColumn(101, "v", DataType.FLOAT_VECTOR, vec, 4),
            FieldColumn(102, "t", DataType.VARCHAR, [f"r{i}" for i in ids]),
        ],
    )


def records(*msgs):
    return [
        Record("c-dml_0", i, m if isinstance(m, bytes) else codec.encode(m))
        for i, m in enumerate(msgs)
    ]


def test_an_insert_whose_columns_disagree_on_rows_is_skipped_as_poison():
    """The codec refuses it on decoding: persisted columns never misalign."""
    short = insert(5, [3, 4], 11)
    short.fields[1] = FieldColumn(102, "t", DataType.VARCHAR, ["only one"])
    store = DictStore()
    report, stats = process_batch(
        records(insert(5, [1, 2], 10), short, TimeTickMsg(0, 12, 0)), store
    )
    assert (stats.rows, stats.poison) == (2, 1)
    (binlog_part,) = report.binlogs
    assert binlog_part[4].rows == 2 and report.checkpoints["c-dml_0"].ts == 12


def counter(start=1000):
    state = {"n": start}

    def next_value():
        state["n"] += 1
        return state["n"]

    return next_value


def test_batch_writes_columns_deltas_and_checkpoint_deterministically():
    batch = records(
        insert(5, [1, 2], 10),
        b"poison",
        insert(5, [3], 11),
        DeleteMsg(9, 12, 0, 7, -1, VCH, np.array([1]), np.array([12])),
        TimeTickMsg(0, 20, 0),
    )
    store = DictStore()
    report, stats = process_batch(batch, store)
    assert (stats.rows, stats.deletes, stats.poison) == (3, 1, 1)
    [(segment, coll, part, vchannel, log, start)] = report.binlogs
    assert (segment, coll, part, vchannel, log.rows) == (5, 7, 1, VCH, 3)
    assert start == Position("c-dml_0", 0, 0)
    pks = binlog.decode_column(store.get(log.paths[str(PK_FIELD)]), DataType.INT64)
    assert pks.tolist() == [1, 2, 3]
    ts = binlog.decode_column(store.get(log.paths[str(TS_FIELD)]), DataType.INT64)
    assert ts.tolist() == [10, 10, 11]
    vec = binlog.decode_column(store.get(log.paths["101"]), DataType.FLOAT_VECTOR, 4)
    assert vec[:, 0].tolist() == [1.0, 2.0, 3.0]
    assert binlog.decode_column(store.get(log.paths["102"]), DataType.VARCHAR) == ["r1", "r2", "r3"]
    [(_, delta)] = report.deltalogs
    assert binlog.decode_deltas(store.get(delta.path))[0].tolist() == [1]
    assert report.checkpoints == {"c-dml_0": Position("c-dml_0", 5, 20)}
    again = DictStore()
    assert process_batch(batch, again)[0] == report
    assert again.objects == store.objects  # a replay writes the very same objects


def test_a_tick_only_range_reports_the_checkpoint_reading_it_would():
    ticks = records(TimeTickMsg(0, 20, 0), TimeTickMsg(0, 30, 0))
    read, _ = process_batch(ticks, DictStore())
    known, stats = checkpoints_only([("c-dml_0", 2, 30)])
    assert known == read
    assert (stats.records, stats.rows) == (0, 0)


def test_segments_seal_on_size_and_flush_once_the_checkpoint_passes():
    clock = counter()
    dc = DataCoord(MemoryKV(), clock, counter(1), DataCoordConfig(segment_max_rows=10))
    first = dc.assign_segment(7, 1, VCH, 8)
    assert dc.assign_segment(7, 1, VCH, 2) == first
    second = dc.assign_segment(7, 1, VCH, 5)  # would exceed 10: the first seals
    assert second != first
    sealed = dc.segment(first)
    assert sealed.state == SegmentState.SEALED
    report, _ = process_batch(
        records(insert(first, range(10), 5), TimeTickMsg(0, sealed.seal_ts - 1, 0)), DictStore()
    )
    assert dc.save_batch(report) == []  # the checkpoint is still below the seal stamp
    report2, _ = process_batch(
        [Record("c-dml_0", 9, codec.encode(TimeTickMsg(0, clock(), 0)))], DictStore()
    )
    assert dc.save_batch(report2) == [first]
    assert dc.segment(first).num_rows == 10
    assert dc.save_batch(report) == []  # replaying an old batch changes nothing
    assert dc.segment(first).num_rows == 10


def test_flush_seals_growing_segments_and_reports_state():
    clock = counter()
    kv = MemoryKV()
    dc = DataCoord(kv, clock, counter(1))
    seg = dc.assign_segment(7, 1, VCH, 3)
    waiting, flush_ts = dc.flush(7)
    assert waiting == [seg] and flush_ts > dc.segment(seg).seal_ts
    assert not dc.flushed(waiting)
    dc.save_batch(process_batch(records(TimeTickMsg(0, flush_ts, 0)), DictStore())[0])
    assert dc.flushed(waiting)
    # with the flush's stamp: every channel of the collection persisted up to it (deletes too)
    assert dc.flushed(waiting, ["c-dml_0"], flush_ts)
    assert not dc.flushed(waiting, ["c-dml_0"], flush_ts + 1)
    assert not dc.flushed(waiting, ["c-dml_0", "c-dml_1"], flush_ts)  # no checkpoint yet
    restarted = DataCoord(kv, clock, counter(50))
    restarted.start()
    assert restarted.segment(seg).state == SegmentState.FLUSHED
    assert restarted.checkpoint("c-dml_0").ts == flush_ts


def test_a_segment_written_over_many_batches_loads_in_insert_order():
    """Parts at offsets 9, 64, 128 and 1000 (as strings, "1000" sorts before "128"): the
    index build reads the segment's vectors, as query nodes read its rows, in channel order."""
    dc = DataCoord(MemoryKV(), counter(), counter(1))
    segment = dc.assign_segment(7, 1, VCH, 10**6)
    store = DictStore()
    for offset in (1000, 9, 128, 64):  # batches saved in any order (tasks, replays)
        msg = codec.encode(insert(segment, [offset], offset))
        dc.save_batch(process_batch([Record("c-dml_0", offset, msg)], store)[0])
    info = dc.segment(segment)
    vectors, _ = segment_vectors(info, 101, 4, store)
    assert vectors[:, 0].tolist() == [9.0, 64.0, 128.0, 1000.0]


def test_a_part_recorded_under_its_unpadded_id_is_not_recorded_again():
    """A batch replayed across the upgrade that padded part ids: known already, not doubled."""
    dc = DataCoord(MemoryKV(), counter(), counter(1))
    segment = dc.assign_segment(7, 1, VCH, 10)
    report, _ = process_batch(records(insert(segment, [1, 2], 5)), DictStore())
    (part,) = report.binlogs
    old_id = unpadded_log_id(part[4].log_id)
    assert old_id == "c-dml_0-0-0"
    legacy = BatchReport([(*part[:4], replace(part[4], log_id=old_id), part[5])], [], {})
    dc.save_batch(legacy)
    dc.save_batch(report)
    assert list(dc.segment(segment).binlogs) == [old_id]
    assert unpadded_log_id("compaction-12") == "compaction-12"


@pytest.mark.parametrize("pks", [np.arange(1000), [f"k{i}" for i in range(1000)]])
def test_pk_stats_have_no_false_negatives(pks):
    stats = binlog.PkStats.from_json(binlog.PkStats.of(pks).to_json())
    assert stats.may_contain(pks).all()
    others = (
        np.arange(10_000, 11_000) if isinstance(pks, np.ndarray) else [f"x{i}" for i in range(1000)]
    )
    assert stats.may_contain(others).mean() < 0.05


def test_executor_rows_carry_the_whole_report_back_to_the_driver():
    batch = records(
        insert(5, [1, 2], 10),
        DeleteMsg(9, 12, 0, 7, -1, VCH, np.array([1]), np.array([12])),
        TimeTickMsg(0, 20, 0),
    )
    report, stats = process_batch(batch, DictStore())
    stats.executor = "host:1"
    rows = list(report_rows(report, stats))
    assert all(len(body) < 2000 for _, body in rows)  # descriptions, never data
    merged, total, executors = merge_rows(rows + rows[-1:])
    assert merged == report
    assert (total.rows, total.deletes, executors) == (4, 2, ["host:1", "host:1"])


def test_segment_metadata_stays_small_through_thousands_of_batches():
    """A long ingest at full rate (here 3,000 batches of 4 channels into 2 segments) keeps
    every value in the metastore far below ZooKeeper's 1 MB limit: binlogs are znodes of
    their own, checkpoints are overwritten in place."""
    clock = counter()
    kv = MemoryKV()
    dc = DataCoord(kv, clock, counter(1), DataCoordConfig(segment_max_rows=10**9))
    segments = [dc.assign_segment(7, 1, f"c-dml_{i}_7v0", 1) for i in range(2)]
    channels = [f"c-dml_{i}" for i in range(4)]
    for batch in range(3000):
        binlogs = []
        for c, channel in enumerate(channels):
            log = Binlog(
                f"{channel}-{batch * 10}-{batch * 10 + 9}",
                100,
                {str(f): f"insert_log/7/1/{segments[c % 2]}/{f}/x" for f in (0, 1, 101)},
                "stats_log/x",
                batch,
                batch + 1,
            )
            binlogs.append(
                (segments[c % 2], 7, 1, f"c-dml_{c % 2}_7v0", log, Position(channel, batch, 0))
            )
        checkpoints = {c: Position(c, batch * 10 + 10, clock()) for c in channels}
        dc.save_batch(BatchReport(binlogs, [], checkpoints))
    biggest = max(len(v) for v in kv.list_prefix("datacoord").values())
    assert biggest < 4096
    assert dc.segment(segments[0]).num_rows == 3000 * 2 * 100
    restarted = DataCoord(kv, clock, counter(10**6))
    restarted.start()
    assert restarted.segment(segments[0]).num_rows == 3000 * 2 * 100


def test_parallel_puts_write_everything_before_join_returns_and_raise_failures():
    batch = records(insert(5, [1, 2], 10), TimeTickMsg(0, 20, 0))
    store, direct = DictStore(), DictStore()
    puts = ParallelPuts(store)
    assert process_batch(batch, puts)[0] == process_batch(batch, direct)[0]
    puts.join()
    assert store.objects == direct.objects
    failing = ParallelPuts(DictStore(fail_index_puts=1))
    failing.put("index_files/1/2", b"x")
    with pytest.raises(OSError):
        failing.join()


def test_a_busy_channel_is_split_into_tasks_the_same_way_on_a_replay():
    from vectide.streaming.source import ChannelRange, ChannelStreamReader

    options = {"bootstrap": "unused:1", "channels": "a,b"}
    first = ChannelStreamReader(options).partitions({"a": 10, "b": 5}, {"a": 200, "b": 6})
    assert first == [
        ChannelRange("a", 10, 74),
        ChannelRange("a", 74, 138),
        ChannelRange("a", 138, 200),
        ChannelRange("b", 5, 6),
    ]
    replay = ChannelStreamReader(options).partitions({"a": 10, "b": 5}, {"a": 200, "b": 6})
    assert replay == first  # a restarted driver splits the logged batch alike


def test_the_furthest_checkpoint_of_a_channels_tasks_counts_in_any_order():
    near = report_rows(BatchReport([], [], {"a": Position("a", 64, 100)}), BatchStats())
    far = report_rows(BatchReport([], [], {"a": Position("a", 128, 200)}), BatchStats())
    rows_near, rows_far = list(near), list(far)
    for rows in (rows_near + rows_far, rows_far + rows_near):
        merged, _, _ = merge_rows(rows)
        assert merged.checkpoints == {"a": Position("a", 128, 200)}
