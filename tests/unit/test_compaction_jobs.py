"""Compaction jobs in the metastore: GetCompactionState answers after a coordinator restart,
open plans resume or fail, finished jobs are pruned (records included)."""

from __future__ import annotations

from dataclasses import replace

from tests.fakes import DictStore
from tests.unit.test_compaction import VCH, delete_batch, flush_segment, persisted_pks, segment
from tests.unit.test_datanode_batch import counter
from vectide.services.common.compaction_plan import (
    STATE_COMPLETED,
    STATE_EXECUTING,
    STATE_UNDEFINED,
    CompactionPlan,
)
from vectide.services.common.kv import MemoryKV
from vectide.services.common.segment import SegmentState
from vectide.services.datacoord.compaction_jobs import JOBS_PREFIX, CompactionJobs, PlanState
from vectide.services.datacoord.core import DataCoord, DataCoordConfig
from vectide.streaming.compaction import CompactionWorker, in_process


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def plan(plan_id: int, job_id: int, *sources: int) -> CompactionPlan:
    return CompactionPlan(
        plan_id, job_id, 7, 1, VCH, plan_id + 500, [segment(s, 5) for s in sources], delete_ts=42
    )


def keep_sources(stub: CompactionPlan, source_ids: list[int]) -> CompactionPlan:
    return replace(stub, sources=[segment(s, 5) for s in source_ids])


def test_a_reloaded_coordinator_answers_for_finished_and_open_jobs():
    kv, clock = MemoryKV(), Clock()
    jobs = CompactionJobs(timeout_s=60, kv=kv, clock=clock)
    jobs.add(1, [plan(10, 1, 1, 2)])
    jobs.finish(jobs.take().plan_id, PlanState.COMPLETED)
    jobs.add(2, [plan(20, 2, 3, 4), plan(21, 2, 5)])
    assert jobs.take().plan_id == 20  # Executing when the coordinator dies; 21 still Pending
    jobs.add(3, [])  # a manual compact() with nothing to do

    clock.now += 30
    again = CompactionJobs(timeout_s=60, kv=kv, clock=clock)
    again.load(keep_sources)
    assert (again.state(1).state, again.state(1).completed) == (STATE_COMPLETED, 1)
    assert again.merges(1) == [([1, 2], 510)]
    assert (again.state(2).state, again.state(2).executing) == (STATE_EXECUTING, 2)
    assert again.state(3).state == STATE_COMPLETED
    assert again.busy_segments() == {3, 4, 5}
    resumed = [again.take(), again.take()]  # both Pending again: 20's result was lost
    assert [(p.plan_id, p.delete_ts) for p in resumed] == [(20, 42), (21, 42)]
    assert [s.segment_id for s in resumed[0].sources] == [3, 4]
    again.finish(21, PlanState.COMPLETED)
    clock.now += 61  # nobody reported plan 20 this time
    state = again.state(2)
    assert (state.state, state.completed, state.timeout) == (STATE_COMPLETED, 1, 1)
    assert again.busy_segments() == frozenset()


def test_an_open_plan_whose_sources_are_gone_fails_at_reload_and_frees_nothing_twice():
    kv = MemoryKV()
    jobs = CompactionJobs(kv=kv)
    jobs.add(1, [plan(10, 1, 1, 2)])
    again = CompactionJobs(kv=kv)
    again.load(lambda stub, ids: None)
    state = again.state(1)
    assert (state.state, state.failed) == (STATE_COMPLETED, 1)
    assert again.take() is None
    assert again.busy_segments() == frozenset()
    third = CompactionJobs(kv=kv)  # the failure was recorded: no second rebuild
    third.load(lambda stub, ids: (_ for _ in ()).throw(AssertionError("rebuilt again")))
    assert third.state(1).failed == 1


def test_finished_jobs_leave_the_metastore_after_retention_or_beyond_keep_jobs():
    kv, clock = MemoryKV(), Clock()
    jobs = CompactionJobs(keep_jobs=2, retention_s=100, kv=kv, clock=clock)
    for job_id in (1, 2, 3):
        jobs.add(job_id, [plan(job_id * 10, job_id, job_id)])
        jobs.finish(jobs.take().plan_id, PlanState.COMPLETED)
        clock.now += 10
    assert sorted(kv.list_prefix(JOBS_PREFIX)) == [f"{JOBS_PREFIX}/2", f"{JOBS_PREFIX}/3"]
    assert jobs.state(1).state == STATE_UNDEFINED
    jobs.add(4, [plan(40, 4, 4)])  # open: kept whatever its age
    clock.now += 200
    jobs.add(5, [])
    assert sorted(kv.list_prefix(JOBS_PREFIX)) == [f"{JOBS_PREFIX}/4", f"{JOBS_PREFIX}/5"]
    assert jobs.state(2).state == STATE_UNDEFINED
    reloaded = CompactionJobs(keep_jobs=2, retention_s=100, kv=kv, clock=clock)
    reloaded.load(keep_sources)
    assert reloaded.state(4).state == STATE_EXECUTING
    assert reloaded.state(5).state == STATE_COMPLETED


def test_a_job_planned_before_a_restart_completes_after_it_on_the_reloaded_segments():
    kv, store = MemoryKV(), DictStore()
    ids, stamps = counter(), counter(10_000)
    first = DataCoord(kv, stamps, ids, DataCoordConfig(segment_max_rows=1000))
    for segment_id, pks, ts, offset in ((1, [1, 2, 3], 10, 0), (2, [4, 5, 6], 20, 2)):
        flush_segment(first, store, segment_id, pks, ts, offset)
        first._save(first._segments[segment_id])  # Flushed in the metastore too
    delete_batch(first, store, [2, 5], 30, 4)
    job_id, plans = first.compact(7)
    assert plans == 1 and first.compaction_state(job_id).state == STATE_EXECUTING

    second = DataCoord(kv, stamps, ids, DataCoordConfig(segment_max_rows=1000))
    second.start()
    assert second.compaction_state(job_id).state == STATE_EXECUTING
    assert CompactionWorker(second, in_process(store)).run_once() == 1
    state = second.compaction_state(job_id)
    assert (state.state, state.completed) == (STATE_COMPLETED, 1)
    [merged] = second.segments(7, (SegmentState.FLUSHED,))
    assert persisted_pks(store, merged) == [1, 3, 4, 6]
    assert second.compaction_plans(job_id) == [([1, 2], merged.segment_id)]
