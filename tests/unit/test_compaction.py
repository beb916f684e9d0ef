"""Compaction: the planner, the data node's executor, datacoord's swap and the query node's
swap, on in-memory stand-ins (the integration test runs it on the real parts)."""

from __future__ import annotations

import numpy as np

from tests.fakes import DictStore
from tests.unit.test_datanode_batch import counter
from tests.unit.test_querynode import DIM, collection, insert, pack, query
from vectide.services.common import binlog
from vectide.services.common.compaction_plan import (
    STATE_COMPLETED,
    STATE_EXECUTING,
    STATE_UNDEFINED,
)
from vectide.services.common.kv import MemoryKV
from vectide.services.common.msgstream import codec
from vectide.services.common.msgstream.message import DataType, DeleteMsg, Position, TimeTickMsg
from vectide.services.common.segment import Binlog, Deltalog, LoadPlan, SegmentInfo, SegmentState
from vectide.services.datacoord.compaction import CompactionPolicy, delete_estimate, plan_groups
from vectide.services.datacoord.core import DataCoord, DataCoordConfig
from vectide.services.querynode.core import QueryNode
from vectide.streaming.compaction import CompactionWorker, compact, in_process
from vectide.streaming.flush import PK_FIELD, TS_FIELD, Record, process_batch

VCH = "c-dml_0_7v0"


def segment(segment_id, rows, partition=1, vchannel=VCH, state=SegmentState.FLUSHED, min_ts=10):
    entry = Binlog(f"l{segment_id}", rows, {}, "", min_ts, min_ts + 5)
    return SegmentInfo(
        segment_id, 7, partition, vchannel, state, binlogs={entry.log_id: entry} if rows else {}
    )


def ids(groups):
    return sorted(sorted(s.segment_id for s in g) for g in groups)


# -- the planner -----------------------------------------------------------------------------


def test_small_segments_of_one_shard_merge_up_to_max_rows():
    policy = CompactionPolicy(max_rows=100)
    segments = [segment(1, 30), segment(2, 30), segment(3, 30), segment(4, 30), segment(5, 90)]
    # 5 is not small (>= 50); the small ones pack into 90 + 30 rows: the lone 30 stays
    assert ids(plan_groups(segments, [], policy)) == [[1, 2, 3]]
    # manual: anything may merge up to max_rows; the big one has no partner that fits
    assert ids(plan_groups(segments, [], policy, manual=True)) == [[1, 2, 3]]
    assert ids(plan_groups(segments, [], CompactionPolicy(max_rows=1000))) == [[1, 2, 3, 4, 5]]


def test_segments_of_other_partitions_shards_or_states_never_merge():
    policy = CompactionPolicy(max_rows=100)
    segments = [
        segment(1, 10),
        segment(2, 10, partition=2),
        segment(3, 10, vchannel="c-dml_1_7v1"),
        segment(4, 10, state=SegmentState.SEALED),
        segment(5, 10, state=SegmentState.COMPACTED),
        segment(6, 10, state=SegmentState.INDEXED),
    ]
    assert ids(plan_groups(segments, [], policy)) == [[1, 6]]
    assert ids(plan_groups(segments, [], policy, busy=frozenset({6}))) == []


def test_deletes_trigger_a_rewrite_of_a_segment_on_its_own():
    policy = CompactionPolicy(max_rows=100, delete_ratio=0.2)
    big = segment(1, 90, min_ts=10)
    old_delete = Deltalog(VCH, "d0", "p0", 50, max_ts=5)  # older than every row of it
    few = Deltalog(VCH, "d1", "p1", 10, max_ts=20)
    assert delete_estimate(big, [old_delete, few]) == 10
    assert plan_groups([big], [old_delete, few], policy) == []  # 10 < 0.2 * 90
    assert ids(plan_groups([big], [old_delete, few], policy, manual=True)) == [[1]]
    many = Deltalog(VCH, "d2", "p2", 10, max_ts=30)
    assert ids(plan_groups([big], [few, many], policy)) == [[1]]
    big.deletes_applied_ts = 30  # rewritten with them already: nothing left to purge
    assert plan_groups([big], [few, many], policy, manual=True) == []


# -- executing and swapping ---------------------------------------------------------------


def flush_segment(datacoord, store, segment_id, ids_, ts, offset):
    msg = insert(ids_, ts, np.random.default_rng(ts).standard_normal((len(ids_), DIM)))
    msg.segment_id = segment_id
    records = [
        Record("c-dml_0", offset, codec.encode(msg)),
        Record("c-dml_0", offset + 1, codec.encode(TimeTickMsg(0, ts + 1, 0))),
    ]
    datacoord.save_batch(process_batch(records, store)[0])
    datacoord._segments[segment_id].state = SegmentState.FLUSHED
    return msg


def delete_batch(datacoord, store, ids_, ts, offset):
    ids_ = np.asarray(ids_, np.int64)
    msg = DeleteMsg(ts, ts, 0, 7, -1, VCH, ids_, np.full(len(ids_), ts, np.int64))
    records = [
        Record("c-dml_0", offset, codec.encode(msg)),
        Record("c-dml_0", offset + 1, codec.encode(TimeTickMsg(0, ts + 1, 0))),
    ]
    datacoord.save_batch(process_batch(records, store)[0])


def persisted_pks(store, seg: SegmentInfo) -> list[int]:
    return sorted(
        pk
        for entry in seg.binlogs.values()
        for pk in binlog.decode_column(store.get(entry.paths[str(PK_FIELD)]), DataType.INT64)
    )


def test_merge_drops_deleted_rows_and_swaps_atomically_in_metadata():
    kv, store = MemoryKV(), DictStore()
    datacoord = DataCoord(kv, counter(10_000), counter(), DataCoordConfig(segment_max_rows=1000))
    flush_segment(datacoord, store, 1, [1, 2, 3], 10, 0)
    flush_segment(datacoord, store, 2, [4, 5, 6], 20, 2)
    delete_batch(datacoord, store, [2, 5], 30, 4)
    flush_segment(datacoord, store, 3, [5], 40, 6)  # an upsert's new row, after the delete
    delete_batch(datacoord, store, [6], 50, 8)
    job_id, plans = datacoord.compact(7)
    assert plans == 1 and datacoord.compaction_state(job_id).state == STATE_EXECUTING
    plan = datacoord.next_compaction()
    assert datacoord.next_compaction() is None  # taken: no second data node gets it
    assert CompactionWorker(datacoord, in_process(store)).run_once() == 0  # nothing left to take
    result = compact(plan, store)
    assert datacoord.complete_compaction(plan.plan_id, result)
    state = datacoord.compaction_state(job_id)
    assert (state.state, state.completed, state.executing) == (STATE_COMPLETED, 1, 0)
    [(sources, target)] = datacoord.compaction_plans(job_id)
    assert sorted(sources) == [1, 2, 3]
    new = datacoord.segment(target)
    assert new.state == SegmentState.FLUSHED and new.compacted_from == [1, 2, 3]
    # every delete (the newest at 50, covered by the checkpoint) was applied
    assert persisted_pks(store, new) == [1, 3, 4, 5]
    stamps = binlog.decode_column(
        store.get(next(iter(new.binlogs.values())).paths[str(TS_FIELD)]), DataType.INT64
    )
    assert sorted(stamps.tolist()) == [10, 10, 20, 40]  # insert stamps kept
    assert [r[0] for r in datacoord.segment_rows(7)] == [target]
    assert {datacoord.segment(s).state for s in (1, 2, 3)} == {SegmentState.COMPACTED}
    # the swap survives a restart: one transaction wrote both sides
    again = DataCoord(kv, counter(20_000), counter(5000))
    again.start()
    assert [r[0] for r in again.segment_rows(7)] == [target]
    assert persisted_pks(store, again.segment(target)) == [1, 3, 4, 5]
    assert datacoord.compaction_state(424242).state == STATE_UNDEFINED


def test_a_plan_whose_source_was_dropped_meanwhile_fails_and_changes_nothing():
    datacoord = DataCoord(MemoryKV(), counter(10_000), counter(), DataCoordConfig(1000))
    store = DictStore()
    flush_segment(datacoord, store, 1, [1], 10, 0)
    flush_segment(datacoord, store, 2, [2], 20, 2)
    job_id, _ = datacoord.compact(7)
    plan = datacoord.next_compaction()
    datacoord.drop_collection(7)
    assert not datacoord.complete_compaction(plan.plan_id, compact(plan, store))
    assert datacoord.compaction_state(job_id).failed == 1
    assert datacoord.segment(plan.target_id) is None


def test_an_all_deleted_merge_retires_its_sources_without_a_new_segment():
    datacoord = DataCoord(MemoryKV(), counter(10_000), counter(), DataCoordConfig(1000))
    store = DictStore()
    flush_segment(datacoord, store, 1, [1], 10, 0)
    delete_batch(datacoord, store, [1], 30, 2)
    datacoord.compact(7)
    assert CompactionWorker(datacoord, in_process(store)).run_once() == 1
    assert datacoord.segment_rows(7) == []
    assert datacoord.segment(1).state == SegmentState.COMPACTED


def test_query_node_swaps_sources_for_the_merged_segment_without_gap_or_duplicate():
    kv, store = MemoryKV(), DictStore()
    datacoord = DataCoord(kv, counter(10_000), counter(), DataCoordConfig(1000))
    first = flush_segment(datacoord, store, 1, [1, 2, 3], 10, 0)
    second = flush_segment(datacoord, store, 2, [4, 5, 6], 20, 2)
    delete_batch(datacoord, store, [2], 30, 4)
    node = QueryNode(1, binlogs=store)
    plan = LoadPlan(
        [datacoord.segment(1)], datacoord.deltalogs(7, VCH), replay_offset=0
    )  # segment 2 is still growing on the node
    node.watch(collection(), VCH, plan)
    node.apply(VCH, pack(0, 35, second))
    assert query(node, 35) == [1, 3, 4, 5, 6]
    datacoord.compact(7)
    assert CompactionWorker(datacoord, in_process(store)).run_once() == 1
    merged = datacoord.segments(7, (SegmentState.FLUSHED,))[0]
    node.apply(VCH, pack(35, 40, DeleteMsg(36, 36, 0, 7, -1, VCH, np.array([3]), np.array([36]))))
    assert node.load_segment(VCH, merged)
    assert node.sealed_segments(VCH) == [merged.segment_id]
    assert query(node, 40) == [1, 4, 5, 6]  # the delete at 36 moved along to the new copy
    # a replay meeting the sources' inserts again adds nothing; a stale handoff of a
    # source is ignored
    node.apply(VCH, pack(40, 50, first, second))
    assert not node.load_segment(VCH, datacoord.segment(2))
    assert query(node, 50) == [1, 4, 5, 6]
    assert node.held_segments() == [merged.segment_id]
    assert node.release_segments(VCH, [merged.segment_id]) == 1
    assert query(node, 50) == []


def test_a_node_loading_after_the_swap_skips_the_sources_met_in_its_replay():
    store = DictStore()
    datacoord = DataCoord(MemoryKV(), counter(10_000), counter(), DataCoordConfig(1000))
    first = flush_segment(datacoord, store, 1, [1, 2], 10, 0)
    second = flush_segment(datacoord, store, 2, [3], 20, 2)
    datacoord.compact(7)
    CompactionWorker(datacoord, in_process(store)).run_once()
    [merged] = datacoord.segments(7, (SegmentState.FLUSHED,))
    node = QueryNode(1, binlogs=store)
    node.watch(collection(), VCH, LoadPlan([merged], [], replay_offset=0))
    node.apply(VCH, pack(0, 30, first, second))  # an early replay offset: sources again
    assert query(node, 30) == [1, 2, 3]
    assert datacoord.checkpoint("c-dml_0") == Position("c-dml_0", 4, 21)


def test_jobs_forget_the_oldest_finished_ones_and_the_binlog_lists_of_finished_plans():
    from vectide.services.common.compaction_plan import CompactionPlan
    from vectide.services.datacoord.compaction_jobs import CompactionJobs, PlanState

    jobs = CompactionJobs(timeout_s=5, keep_jobs=2)
    for job_id in (1, 2, 3):
        jobs.add(job_id, [CompactionPlan(job_id * 10, job_id, 7, 1, VCH, 99, [segment(job_id, 5)])])
        plan = jobs.take(now=100.0)
        jobs.finish(plan.plan_id, PlanState.COMPLETED)
    jobs.add(4, [CompactionPlan(40, 4, 7, 1, VCH, 98, [segment(4, 5)])])
    assert jobs.state(1).state == STATE_UNDEFINED  # forgotten: only two finished are kept
    assert jobs.merges(3) == [([3], 99)]
    assert jobs._tasks[30].plan.sources == []
    assert jobs.busy_segments() == {4}
    assert jobs.take(now=100.0).plan_id == 40
    assert jobs.take(now=106.0) is None  # the running plan timed out meanwhile
    assert (jobs.state(4).state, jobs.state(4).timeout) == (STATE_COMPLETED, 1)
    assert jobs.busy_segments() == frozenset()


def test_a_lagging_node_swaps_only_once_it_reached_the_deletes_the_merge_applied(monkeypatch):
    import pytest

    from vectide.services.common.errors import MilvusError
    from vectide.services.querynode import core

    monkeypatch.setattr(core, "SWAP_WAIT_S", 0.05)
    store = DictStore()
    datacoord = DataCoord(MemoryKV(), counter(10_000), counter(), DataCoordConfig(1000))
    first = flush_segment(datacoord, store, 1, [1, 2], 10, 0)
    second = flush_segment(datacoord, store, 2, [3], 20, 2)
    delete_batch(datacoord, store, [1], 30, 4)
    datacoord.compact(7)
    CompactionWorker(datacoord, in_process(store)).run_once()
    [merged] = datacoord.segments(7, (SegmentState.FLUSHED,))
    node = QueryNode(1, binlogs=store)
    node.watch(collection(), VCH)
    node.apply(VCH, pack(0, 25, first, second))  # the delete at 30 not seen yet
    with pytest.raises(MilvusError, match="not reached the deletes"):
        node.load_segment(VCH, merged)
    assert query(node, 25) == [1, 2, 3]  # as of 25, row 1 still exists
    node.apply(VCH, pack(25, 31, DeleteMsg(30, 30, 0, 7, -1, VCH, np.array([1]), np.array([30]))))
    assert node.load_segment(VCH, merged)
    assert query(node, 31) == [2, 3]
