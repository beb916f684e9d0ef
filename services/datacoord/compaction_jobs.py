"""Compaction jobs and their plans' states, as ManualCompaction / GetCompactionState report.

A job is one trigger (a ``compact()`` call or one automatic round); it holds plans. A plan
is Pending until a data node takes it, Executing while it runs, then Completed, Failed, or
Timeout when no result came within ``timeout_s`` (a result arriving later is ignored: its
files are unreferenced and garbage collection removes them). A job is Executing while any of
its plans is Pending or Executing, Completed after (Milvus's rule: done, successful or not).

Kept in memory only: after a coordinator restart old job ids report UndefiedState, and the
segments of plans that were running are simply planned again. A finished plan keeps only its
segment ids, and only the newest ``keep_jobs`` finished jobs are remembered, so a long-running
coordinator's memory stays flat.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from enum import StrEnum

from vectide.services.common.compaction_plan import (
    STATE_COMPLETED,
    STATE_EXECUTING,
    STATE_UNDEFINED,
    CompactionPlan,
    JobState,
)


class PlanState(StrEnum):
    PENDING = "Pending"
    EXECUTING = "Executing"
    COMPLETED = "Completed"
    FAILED = "Failed"
    TIMEOUT = "Timeout"


_OPEN = (PlanState.PENDING, PlanState.EXECUTING)


@dataclass
class _Task:
    plan: CompactionPlan
    sources: list[int] = field(default_factory=list)
    state: PlanState = PlanState.PENDING
    started_at: float = 0.0
    error: str = ""


@dataclass
class CompactionJobs:
    timeout_s: float = 600.0
    #: finished jobs remembered for GetCompactionState (the oldest are forgotten)
    keep_jobs: int = 1000
    _tasks: dict[int, _Task] = field(default_factory=dict)
    _jobs: dict[int, list[int]] = field(default_factory=dict)

    def add(self, job_id: int, plans: list[CompactionPlan]) -> None:
        self._jobs[job_id] = [p.plan_id for p in plans]
        self._tasks.update({p.plan_id: _Task(p, [s.segment_id for s in p.sources]) for p in plans})
        self._forget_old()

    def _forget_old(self) -> None:
        finished = [j for j, plans in self._jobs.items() if not self._open(plans)]
        for job_id in finished[: max(0, len(finished) - self.keep_jobs)]:  # oldest first
            for plan_id in self._jobs.pop(job_id):
                del self._tasks[plan_id]

    def _open(self, plan_ids: list[int]) -> bool:
        return any(self._tasks[p].state in _OPEN for p in plan_ids)

    def busy_segments(self) -> frozenset[int]:
        """Sources of plans not finished: no other plan may take them."""
        return frozenset(s for t in self._tasks.values() if t.state in _OPEN for s in t.sources)

    def take(self, now: float | None = None) -> CompactionPlan | None:
        """The next pending plan, now Executing (a data node asks)."""
        now = time.time() if now is None else now
        self._expire(now)
        task = next((t for t in self._tasks.values() if t.state == PlanState.PENDING), None)
        if task is None:
            return None
        task.state, task.started_at = PlanState.EXECUTING, now
        return task.plan

    def executing(self, plan_id: int) -> CompactionPlan | None:
        task = self._tasks.get(plan_id)
        return task.plan if task is not None and task.state == PlanState.EXECUTING else None

    def finish(self, plan_id: int, state: PlanState, error: str = "") -> None:
        task = self._tasks[plan_id]
        task.state, task.error = state, error
        task.plan = replace(task.plan, sources=[], deltalogs=[])  # binlog lists: not needed

    def _expire(self, now: float) -> None:
        for plan_id, task in self._tasks.items():
            if task.state == PlanState.EXECUTING and now - task.started_at > self.timeout_s:
                self.finish(plan_id, PlanState.TIMEOUT, "no result in time")

    def state(self, job_id: int) -> JobState:
        plan_ids = self._jobs.get(job_id)
        if plan_ids is None:
            return JobState(STATE_UNDEFINED)
        self._expire(time.time())
        count = [self._tasks[p].state for p in plan_ids].count
        open_ = count(PlanState.PENDING) + count(PlanState.EXECUTING)
        return JobState(
            STATE_EXECUTING if open_ else STATE_COMPLETED,
            executing=open_,
            completed=count(PlanState.COMPLETED),
            failed=count(PlanState.FAILED),
            timeout=count(PlanState.TIMEOUT),
        )

    def merges(self, job_id: int) -> list[tuple[list[int], int]]:
        """(source segment ids, target segment id) of each plan of the job."""
        return [
            (self._tasks[p].sources, self._tasks[p].plan.target_id)
            for p in self._jobs.get(job_id, [])
        ]
