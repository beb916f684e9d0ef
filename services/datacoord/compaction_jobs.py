"""Compaction jobs and their plans' states, as ManualCompaction / GetCompactionState report.

A job is one trigger (a ``compact()`` call or one automatic round); it holds plans. A plan
is Pending until a data node takes it, Executing while it runs, then Completed, Failed, or
Timeout when no result came within ``timeout_s`` (a result arriving later is ignored: its
files are unreferenced and garbage collection removes them). A job is Executing while any of
its plans is Pending or Executing, Completed after (Milvus's rule: done, successful or not).

Kept in memory only: after a coordinator restart old job ids report UndefiedState, and the
segments of plans that were running are simply planned again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum

from services.datacoord.compaction import CompactionPlan

#: common.proto CompactionState
STATE_UNDEFINED = 0
STATE_EXECUTING = 1
STATE_COMPLETED = 2


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
    state: PlanState = PlanState.PENDING
    started_at: float = 0.0
    error: str = ""


@dataclass
class JobState:
    """GetCompactionState's answer."""

    state: int
    executing: int = 0
    completed: int = 0
    failed: int = 0
    timeout: int = 0


@dataclass
class CompactionJobs:
    timeout_s: float = 600.0
    _tasks: dict[int, _Task] = field(default_factory=dict)
    _jobs: dict[int, list[int]] = field(default_factory=dict)

    def add(self, job_id: int, plans: list[CompactionPlan]) -> None:
        self._jobs[job_id] = [p.plan_id for p in plans]
        self._tasks.update({p.plan_id: _Task(p) for p in plans})

    def busy_segments(self) -> frozenset[int]:
        """Sources of plans not finished: no other plan may take them."""
        return frozenset(
            s.segment_id for t in self._tasks.values() if t.state in _OPEN for s in t.plan.sources
        )

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

    def _expire(self, now: float) -> None:
        for task in self._tasks.values():
            if task.state == PlanState.EXECUTING and now - task.started_at > self.timeout_s:
                task.state = PlanState.TIMEOUT

    def state(self, job_id: int) -> JobState:
        plan_ids = self._jobs.get(job_id)
        if plan_ids is None:
            return JobState(STATE_UNDEFINED)
        self._expire(time.time())
        states = [self._tasks[p].state for p in plan_ids]
        count = states.count
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
            ([s.segment_id for s in self._tasks[p].plan.sources], self._tasks[p].plan.target_id)
            for p in self._jobs.get(job_id, [])
        ]

    def known(self, job_id: int) -> bool:
        return job_id in self._jobs
