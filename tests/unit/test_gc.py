"""Garbage collection: the pure plan and the collector's pass, on in-memory stand-ins."""

from __future__ import annotations

import time

from tests.fakes import DictStore
from tests.unit.test_compaction import delete_batch, flush_segment
from tests.unit.test_datanode_batch import counter
from vectide.services.common.kv import MemoryKV
from vectide.services.common.msgstream.message import Position
from vectide.services.common.segment import Binlog, Deltalog, SegmentInfo, SegmentState
from vectide.services.datacoord.core import DataCoord, DataCoordConfig
from vectide.services.datacoord.garbage import needless_deltalogs, plan_gc, segment_objects
from vectide.services.datacoord.gc import GarbageCollector
from vectide.streaming.compaction import CompactionWorker, in_process

VCH = "c-dml_0_7v0"


def seg(segment_id, state=SegmentState.FLUSHED, retired_at=0.0, min_ts=10, applied=0):
    entry = Binlog(
        "l", 1, {"0": f"insert_log/{segment_id}/0", "1": f"insert_log/{segment_id}/1"},
        f"stats_log/{segment_id}", min_ts, min_ts,
    )  # fmt: skip
    return SegmentInfo(
        segment_id, 7, 1, VCH, state, binlogs={"l": entry},
        index_files={"5": f"index_files/5/{segment_id}"}, retired_at=retired_at,
        deletes_applied_ts=applied,
    )  # fmt: skip


def objects_of(*segments, age=10_000.0):
    return [(key, age) for s in segments for key in segment_objects(s)]


def test_retired_segments_go_after_the_delay_unless_a_query_node_holds_them():
    now = 100_000.0
    live, fresh, old, held = (
        seg(1),
        seg(2, SegmentState.COMPACTED, retired_at=now - 10),
        seg(3, SegmentState.DROPPED, retired_at=now - 5000),
        seg(4, SegmentState.COMPACTED, retired_at=now - 5000),
    )
    stray_old, stray_new = ("insert_log/9/0/x", 5000.0), ("insert_log/9/0/y", 1.0)
    objects = [*objects_of(live, fresh, old, held), stray_old, stray_new]
    plan = plan_gc([live, fresh, old, held], {}, objects, {4}, now, delay_s=3600)
    assert plan.segments == [3]
    assert sorted(plan.objects) == sorted([*segment_objects(old), stray_old[0]])
    # once no node holds it, the held one goes too
    assert plan_gc([held], {}, objects_of(held), set(), now, 3600).segments == [4]


def test_retired_deltalogs_go_after_the_delay_live_ones_are_kept():
    now = 100_000.0
    logs = {
        7: {
            "a": Deltalog(VCH, "a", "delta_log/a", 1, 5),
            "b": Deltalog(VCH, "b", "delta_log/b", 1, 5, retired_at=now - 4000),
            "c": Deltalog(VCH, "c", "delta_log/c", 1, 5, retired_at=now - 1),
        }
    }
    objects = [(f"delta_log/{k}", 9999.0) for k in "abc"]
    plan = plan_gc([], logs, objects, set(), now, 3600)
    assert plan.deltalogs == [(7, "b")] and plan.objects == ["delta_log/b"]


def test_a_deltalog_is_needless_once_every_row_it_could_hit_is_rewritten_or_newer():
    delta = Deltalog(VCH, "d", "delta_log/d", 3, max_ts=50)
    logs = {7: {"d": delta}}
    checkpoint = {"c-dml_0": Position("c-dml_0", 10, 60)}
    older_rows = seg(1, min_ts=40)
    assert needless_deltalogs([older_rows], logs, checkpoint, {7}) == []
    rewritten = seg(1, min_ts=40, applied=55)
    newer_rows = seg(2, min_ts=50)  # a delete at 50 hits rows before 50 only
    assert needless_deltalogs([rewritten, newer_rows], logs, checkpoint, {7}) == [(7, delta)]
    # rows older than the delete may still be on their way while the checkpoint trails it
    behind = {"c-dml_0": Position("c-dml_0", 10, 45)}
    assert needless_deltalogs([rewritten], logs, behind, {7}) == []
    assert needless_deltalogs([older_rows], logs, behind, set()) == [(7, delta)]  # dropped


class AgedStore(DictStore):
    """A DictStore whose objects look ``age`` seconds old (``ages``: some other age), with
    S3's delete."""

    age = 0.0
    ages: dict[str, float] = {}

    def list_ages(self, prefix: str = ""):
        return [(key, self.ages.get(key, self.age)) for key in self.list(prefix)]

    def delete(self, key: str) -> None:
        self.objects.pop(key, None)


class Holders:
    def __init__(self) -> None:
        self.held: set[int] | None = set()
        self.released: set[int] = set()

    def held_segments(self):
        return self.held

    def release_segments(self, segment_ids):
        self.released |= segment_ids


def test_collector_removes_compacted_away_files_only_after_the_delay_and_release():
    store, holders = AgedStore(), Holders()
    datacoord = DataCoord(MemoryKV(), counter(10_000), counter(), DataCoordConfig(1000))
    flush_segment(datacoord, store, 1, [1, 2], 10, 0)
    flush_segment(datacoord, store, 2, [3], 20, 2)
    delete_batch(datacoord, store, [2], 30, 4)
    before = set(store.objects)
    datacoord.compact(7)
    CompactionWorker(datacoord, in_process(store)).run_once()
    [merged] = datacoord.segments(7, (SegmentState.FLUSHED,))
    gc = GarbageCollector(datacoord, store, holders, lambda: {(7, 1)}, delay_s=60)
    holders.held = {1, 2}  # a query node still serves the sources
    store.age = 1000.0
    gc.run_once()
    assert before <= set(store.objects), "removed while retired for less than the delay"
    for s in (1, 2):
        datacoord.segment(s).retired_at = time.time() - 120
    gc.run_once()
    assert before <= set(store.objects), "removed while a query node holds them"
    holders.held = {merged.segment_id}
    stats = gc.run_once()
    left = set(store.objects)
    assert stats.segments == 2 and datacoord.segment(1) is None
    assert not any(k.startswith(("insert_log/7/1/1/", "insert_log/7/1/2/")) for k in left)
    assert set(segment_objects(merged)) <= left
    # the deltalog was applied by the merge: retired now, removed after the delay
    assert datacoord.deltalogs(7, VCH) == []
    assert any(k.startswith("delta_log/") for k in left)
    holders.held = None  # a node that cannot answer stops every deletion
    assert gc.run_once().objects == 0


def test_collector_drops_segments_of_dropped_partitions_and_spares_young_objects():
    store, holders = AgedStore(), Holders()
    datacoord = DataCoord(MemoryKV(), counter(10_000), counter(), DataCoordConfig(1000))
    flush_segment(datacoord, store, 1, [1, 2], 10, 0)
    store.put("insert_log/7/1/99/0/unrecorded", b"x")  # written, not reported yet
    store.age, store.ages = 1000.0, {"insert_log/7/1/99/0/unrecorded": 10.0}
    gc = GarbageCollector(datacoord, store, holders, lambda: set(), delay_s=60)
    holders.held = {1}
    gc.run_once()
    assert datacoord.segment(1).state == SegmentState.DROPPED
    assert holders.released == {1}  # nothing replaces it: nodes let go of it
    assert len(store.objects) == 6  # retired just now: kept (4 columns, stats, stray)
    datacoord.segment(1).retired_at = time.time() - 120
    holders.held = set()
    gc.run_once()
    assert datacoord.segment(1) is None
    assert list(store.objects) == ["insert_log/7/1/99/0/unrecorded"]  # too young to judge
