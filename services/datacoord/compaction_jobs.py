"""Compaction jobs and their plans' states, as ManualCompaction / GetCompactionState report.

A job is one trigger (a ``compact()`` call or one automatic round); it holds plans. A plan
is Pending until a data node takes it, Executing while it runs, then Completed, Failed, or
Timeout when no result came within ``timeout_s`` (a result arriving later is ignored: its
files are unreferenced and garbage collection removes them). A job is Executing while any of
its plans is Pending or Executing, Completed after (Milvus's rule: done, successful or not).

Every job is a small record in the metastore (``datacoord/compaction_jobs/{job id}``: its
times and, per plan, the segment ids, target, delete stamp, state and error; never binlog
lists), rewritten when a plan changes state, so a restarted coordinator still answers for
the jobs of the last hour. It reloads them with :meth:`CompactionJobs.load`: finished plans
as they were, open ones rebuilt from the segment records by the coordinator and Pending
again: the data node takes them anew. One it was executing when the coordinator died runs
twice (its first report either failed, the coordinator being down, or arrives for a plan no
longer Executing and is ignored); both runs write the same files with the same rows, the
plan being the same (target id, delete stamp). A plan whose sources are gone is Failed and
frees them for the next plan. Finished
jobs are forgotten (record included) after ``retention_s`` or beyond the newest
``keep_jobs``, so neither memory nor the metastore grows with the coordinator's age.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from vectide.services.common.compaction_plan import (
    STATE_COMPLETED,
    STATE_EXECUTING,
    STATE_UNDEFINED,
    CompactionPlan,
    JobState,
)
from vectide.services.common.kv.base import MetaKV

log = logging.getLogger(__name__)

JOBS_PREFIX = "datacoord/compaction_jobs"


class PlanState(StrEnum):
    PENDING = "Pending"
    EXECUTING = "Executing"
    COMPLETED = "Completed"
    FAILED = "Failed"
    TIMEOUT = "Timeout"


_OPEN = (PlanState.PENDING, PlanState.EXECUTING)

#: rebuilds an open plan after a restart from its record (sources as segment ids only);
#: None when its sources are no longer there to merge
Rebuild = Callable[[CompactionPlan, list[int]], CompactionPlan | None]


@dataclass
class _Task:
    plan: CompactionPlan
    sources: list[int] = field(default_factory=list)
    state: PlanState = PlanState.PENDING
    started_at: float = 0.0
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        p = self.plan
        return {
            "plan_id": p.plan_id,
            "collection_id": p.collection_id,
            "partition_id": p.partition_id,
            "vchannel": p.vchannel,
            "target_id": p.target_id,
            "delete_ts": p.delete_ts,
            "sources": self.sources,
            "state": self.state.value,
            "started_at": self.started_at,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, job_id: int, d: dict[str, Any]) -> _Task:
        plan = CompactionPlan(
            d["plan_id"],
            job_id,
            d["collection_id"],
            d["partition_id"],
            d["vchannel"],
            d["target_id"],
            delete_ts=d["delete_ts"],
        )
        return cls(plan, list(d["sources"]), PlanState(d["state"]), d["started_at"], d["error"])


@dataclass
class _Job:
    plan_ids: list[int]
    created_at: float
    finished_at: float = 0.0


@dataclass
class CompactionJobs:
    timeout_s: float = 600.0
    #: finished jobs remembered for GetCompactionState (the oldest are forgotten)
    keep_jobs: int = 1000
    #: ... and for at most this long after they finished
    retention_s: float = 3600.0
    #: where the job records live; None keeps them in memory only
    kv: MetaKV | None = None
    clock: Callable[[], float] = time.time
    _tasks: dict[int, _Task] = field(default_factory=dict)
    _jobs: dict[int, _Job] = field(default_factory=dict)

    def add(self, job_id: int, plans: list[CompactionPlan]) -> None:
        now = self.clock()
        self._jobs[job_id] = _Job([p.plan_id for p in plans], now, 0.0 if plans else now)
        self._tasks.update({p.plan_id: _Task(p, [s.segment_id for s in p.sources]) for p in plans})
        self._save(job_id)
        self._forget_old(now)

    # -- the metastore ---------------------------------------------------------------------

    def _save(self, job_id: int) -> None:
        if self.kv is None:
            return
        job = self._jobs[job_id]
        record = {
            "job_id": job_id,
            "created_at": job.created_at,
            "finished_at": job.finished_at,
            "plans": [self._tasks[p].to_dict() for p in job.plan_ids],
        }
        self.kv.put(f"{JOBS_PREFIX}/{job_id}", json.dumps(record).encode())

    def load(self, rebuild: Rebuild) -> None:
        """The recorded jobs, after a coordinator restart; ``rebuild`` gives each open plan
        its sources' current records (None: they are gone, the plan fails)."""
        if self.kv is None:
            return
        self._jobs, self._tasks = {}, {}
        records = [json.loads(raw) for raw in self.kv.list_prefix(JOBS_PREFIX).values()]
        for record in sorted(records, key=lambda r: r["job_id"]):
            job_id = record["job_id"]
            tasks = [_Task.from_dict(job_id, d) for d in record["plans"]]
            self._jobs[job_id] = _Job(
                [t.plan.plan_id for t in tasks], record["created_at"], record["finished_at"]
            )
            self._tasks.update({t.plan.plan_id: t for t in tasks})
            open_ = [t for t in tasks if t.state in _OPEN]
            for task in open_:
                self._resume(task, rebuild)
            if open_:
                self._close_if_done(job_id)
                self._save(job_id)
        self._forget_old(self.clock())
        log.info("compaction jobs reloaded", extra={"jobs": len(self._jobs)})

    def _resume(self, task: _Task, rebuild: Rebuild) -> None:
        plan = rebuild(task.plan, task.sources)
        if plan is None:
            task.state, task.error = PlanState.FAILED, "a source segment is gone (restart)"
        else:
            task.plan, task.state, task.started_at = plan, PlanState.PENDING, 0.0

    def _close_if_done(self, job_id: int) -> None:
        job = self._jobs[job_id]
        if not job.finished_at and not self._open(job.plan_ids):
            job.finished_at = self.clock()

    # -- plans -----------------------------------------------------------------------------

    def _forget_old(self, now: float) -> None:
        finished = sorted(
            (j for j, job in self._jobs.items() if job.finished_at),
            key=lambda j: (self._jobs[j].finished_at, j),
        )
        excess = set(finished[: max(0, len(finished) - self.keep_jobs)])  # oldest first
        expired = {j for j in finished if now - self._jobs[j].finished_at > self.retention_s}
        for job_id in sorted(excess | expired):
            for plan_id in self._jobs.pop(job_id).plan_ids:
                del self._tasks[plan_id]
            if self.kv is not None:
                self.kv.delete(f"{JOBS_PREFIX}/{job_id}")

    def _open(self, plan_ids: list[int]) -> bool:
        return any(self._tasks[p].state in _OPEN for p in plan_ids)

    def busy_segments(self) -> frozenset[int]:
        """Sources of plans not finished: no other plan may take them."""
        return frozenset(s for t in self._tasks.values() if t.state in _OPEN for s in t.sources)

    def take(self, now: float | None = None) -> CompactionPlan | None:
        """The next pending plan, now Executing (a data node asks)."""
        now = self.clock() if now is None else now
        self._expire(now)
        task = next((t for t in self._tasks.values() if t.state == PlanState.PENDING), None)
        if task is None:
            return None
        task.state, task.started_at = PlanState.EXECUTING, now
        self._save(task.plan.job_id)
        return task.plan

    def executing(self, plan_id: int) -> CompactionPlan | None:
        task = self._tasks.get(plan_id)
        return task.plan if task is not None and task.state == PlanState.EXECUTING else None

    def finish(self, plan_id: int, state: PlanState, error: str = "") -> None:
        task = self._tasks[plan_id]
        task.state, task.error = state, error
        task.plan = replace(task.plan, sources=[], deltalogs=[])  # binlog lists: not needed
        job_id = task.plan.job_id
        self._close_if_done(job_id)
        self._save(job_id)
        if self._jobs[job_id].finished_at:
            self._forget_old(self.clock())

    def _expire(self, now: float) -> None:
        for plan_id, task in list(self._tasks.items()):
            if task.state == PlanState.EXECUTING and now - task.started_at > self.timeout_s:
                self.finish(plan_id, PlanState.TIMEOUT, "no result in time")

    def state(self, job_id: int) -> JobState:
        job = self._jobs.get(job_id)
        if job is None:
            return JobState(STATE_UNDEFINED)
        self._expire(self.clock())
        count = [self._tasks[p].state for p in job.plan_ids].count
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
        job = self._jobs.get(job_id)
        plan_ids = job.plan_ids if job is not None else []
        return [(self._tasks[p].sources, self._tasks[p].plan.target_id) for p in plan_ids]
