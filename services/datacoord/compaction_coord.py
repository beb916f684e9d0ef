"""Datacoord's side of compaction: plan jobs, hand plans to the data node, swap the result in.

A mixin of :class:`services.datacoord.core.DataCoord` (which supplies the lock, the segment
and deltalog records, the checkpoints, the metastore and id allocation). The data node pulls
plans (``next_compaction``), writes the merged segment's binlogs and reports them
(``complete_compaction``); the swap is one metastore transaction: the new segment appears
Flushed and its sources become Compacted together, so no reader of the metadata ever sees
both or neither. Query nodes then swap them through the usual handoff (querycoord), and the
index builder builds the new segment's index like any flushed segment's.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import asdict, replace

from vectide.services.common.compaction_plan import CompactionPlan, JobState
from vectide.services.common.kv.base import KVError, MetaKV, Txn
from vectide.services.common.msgstream.channels import pchannel_of
from vectide.services.common.msgstream.message import Position
from vectide.services.common.segment import PERSISTED, Binlog, Deltalog, SegmentInfo, SegmentState
from vectide.services.datacoord.compaction import CompactionPolicy, plan_groups
from vectide.services.datacoord.compaction_jobs import CompactionJobs, PlanState

log = logging.getLogger(__name__)


class CompactionCoord:
    _lock: threading.RLock
    _kv: MetaKV
    _alloc_id: Callable[[], int]
    _alloc_ts: Callable[[], int]
    _clock: Callable[[], float]
    _segments: dict[int, SegmentInfo]
    _deltalogs: dict[int, dict[str, Deltalog]]
    _checkpoints: dict[str, Position]
    policy: CompactionPolicy
    jobs: CompactionJobs
    #: per collection with a TTL, the oldest insert stamp a read may still return (set by
    #: the coordinators from the collections' properties; plans drop older rows)
    expiries: Callable[[], dict[int, int]] = dict

    def compact(self, collection_id: int) -> tuple[int, int]:
        """ManualCompaction: plan every merge and rewrite worth doing now; (job id, plans)."""
        with self._lock:
            expire_ts = self.expiries().get(collection_id, 0)
            job_id, plans = self._plan_job(collection_id, manual=True, expire_ts=expire_ts)
            return job_id, plans

    def auto_compact(self) -> int:
        """One automatic round over every collection (periodic); returns the plans made."""
        with self._lock:
            collections = {s.collection_id for s in self._segments.values() if s.state in PERSISTED}
            bounds = self.expiries()  # every collection's TTL bound, looked up once a round
            return sum(
                self._plan_job(c, manual=False, expire_ts=bounds.get(c, 0))[1]
                for c in sorted(collections)
            )

    def _plan_job(self, collection_id: int, manual: bool, expire_ts: int = 0) -> tuple[int, int]:
        """Plan a job for one collection; ``expire_ts``: its TTL bound (0: none)."""
        deltas = list(self._deltalogs.get(collection_id, {}).values())
        mine = [s for s in self._segments.values() if s.collection_id == collection_id]
        purge_ts = self._purge_ts()
        busy = self.jobs.busy_segments()
        groups = plan_groups(mine, deltas, self.policy, manual, busy, purge_ts, expire_ts)
        if not groups and not manual:
            return 0, 0
        job_id = self._alloc_id()
        plans = [self._new_plan(job_id, g, deltas, purge_ts, expire_ts) for g in groups]
        self.jobs.add(job_id, plans)
        if plans:
            log.info(
                "compaction planned",
                extra={"collection": collection_id, "job": job_id, "plans": len(plans)},
            )
        return job_id, len(plans)

    def _purge_ts(self) -> int | None:
        """The newest delete a plan made now may purge: None (every recorded one) unless
        the retention window keeps the recent ones for time travel."""
        retention = self.policy.retention
        return retention.purge_ts(self._alloc_ts()) if retention.enabled else None

    def _new_plan(
        self,
        job_id: int,
        group: list[SegmentInfo],
        deltas: list[Deltalog],
        purge_ts: int | None = None,
        expire_ts: int = 0,
    ) -> CompactionPlan:
        first = group[0]
        # every delete stamped up to the channel's checkpoint is in a recorded deltalog
        checkpoint = self._checkpoints.get(pchannel_of(first.vchannel))
        delete_ts = checkpoint.ts if checkpoint is not None else 0
        if purge_ts is not None:  # rows deleted later stay, their deltalogs with them
            delete_ts = min(delete_ts, purge_ts)
        return CompactionPlan(
            plan_id=self._alloc_id(),
            job_id=job_id,
            collection_id=first.collection_id,
            partition_id=first.partition_id,
            vchannel=first.vchannel,
            target_id=self._alloc_id(),
            sources=[replace(s, binlogs=dict(s.binlogs)) for s in group],
            deltalogs=_deltalogs_for(group, deltas),
            delete_ts=delete_ts,
            expire_ts=expire_ts,
        )

    def _rebuild_plan(self, stub: CompactionPlan, source_ids: list[int]) -> CompactionPlan | None:
        """An open plan reloaded after a restart, with its sources' and deltalogs' current
        records; None when a source is no longer Flushed/Indexed (dropped meanwhile). The
        delete stamp stays the recorded one: a data node may still be executing the plan as
        it was handed out, and the swap records what that execution applied."""
        group = [self._segments.get(s) for s in source_ids]
        if not group or any(s is None or s.state not in PERSISTED for s in group):
            return None
        sources = [s for s in group if s is not None]
        deltas = list(self._deltalogs.get(stub.collection_id, {}).values())
        return replace(
            stub,
            sources=[replace(s, binlogs=dict(s.binlogs)) for s in sources],
            deltalogs=_deltalogs_for(sources, deltas),
        )

    def _resume_compactions(self) -> None:
        """Reload the recorded jobs (``DataCoord.start``, after the segment records)."""
        self.jobs.load(self._rebuild_plan)

    # -- the data node ---------------------------------------------------------------------

    def next_compaction(self) -> CompactionPlan | None:
        with self._lock:
            return self.jobs.take()

    def complete_compaction(self, plan_id: int, binlog: Binlog | None, error: str = "") -> bool:
        """The data node's result: the merged segment's binlog (None: no row survived), or
        the error that stopped it. Returns whether the new segment replaced its sources."""
        with self._lock:
            plan = self.jobs.executing(plan_id)
            if plan is None:  # timed out meanwhile, or planned before a restart
                return False
            sources = [self._segments.get(s.segment_id) for s in plan.sources]
            if not error and any(s is None or s.state not in PERSISTED for s in sources):
                error = "a source segment was dropped meanwhile"
            if error:
                self.jobs.finish(plan_id, PlanState.FAILED, error)
                log.warning("compaction failed", extra={"plan": plan_id, "error": error})
                return False
            self._swap(plan, [s for s in sources if s is not None], binlog)
            self.jobs.finish(plan_id, PlanState.COMPLETED)
            return True

    def _swap(
        self, plan: CompactionPlan, sources: list[SegmentInfo], binlog: Binlog | None
    ) -> None:
        covered = {s.segment_id for s in sources} | {c for s in sources for c in s.compacted_from}
        target = SegmentInfo(
            plan.target_id,
            plan.collection_id,
            plan.partition_id,
            plan.vchannel,
            state=SegmentState.FLUSHED,
            compacted_from=sorted(covered),
            deletes_applied_ts=plan.delete_ts,
        )
        txn = Txn()
        if binlog is not None:
            target.binlogs[binlog.log_id] = binlog
            target.assigned_rows = binlog.rows
            txn.puts[f"datacoord/binlogs/{target.segment_id}/{binlog.log_id}"] = json.dumps(
                asdict(binlog)
            ).encode()
            txn.puts[f"datacoord/segments/{target.segment_id}"] = target.to_json(False)
        now = self._clock()
        retired = [replace(s, state=SegmentState.COMPACTED, retired_at=now) for s in sources]
        for s in retired:
            txn.puts[f"datacoord/segments/{s.segment_id}"] = s.to_json(False)
        if not self._kv.commit(txn):
            raise KVError(f"compaction {plan.plan_id}: the metastore refused the swap")
        if binlog is not None:
            self._segments[target.segment_id] = target
        for s in retired:
            self._segments[s.segment_id] = s
        log.info(
            "segments compacted",
            extra={
                "plan": plan.plan_id,
                "sources": [s.segment_id for s in sources],
                "target": target.segment_id if binlog is not None else None,
                "rows": target.num_rows,
            },
        )

    # -- GetCompactionState / GetCompactionStateWithPlans ----------------------------------

    def compaction_state(self, job_id: int) -> JobState:
        with self._lock:
            return self.jobs.state(job_id)

    def compaction_plans(self, job_id: int) -> list[tuple[list[int], int]]:
        with self._lock:
            return self.jobs.merges(job_id)


def _deltalogs_for(group: list[SegmentInfo], deltas: list[Deltalog]) -> list[Deltalog]:
    """The deltalogs a merge of ``group`` must apply: live ones of its channel newer than its
    oldest row."""
    vchannel = group[0].vchannel
    oldest = min(b.min_ts for s in group for b in s.binlogs.values())
    return [d for d in deltas if d.vchannel == vchannel and not d.retired_at and d.max_ts > oldest]
