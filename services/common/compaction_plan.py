"""Compaction as it crosses roles: a plan (datacoord -> data node) and a job's state
(datacoord -> proxy, GetCompactionState). The planning and job bookkeeping stay in
services/datacoord; these types live here because the RPC codec and the proxy need them."""

from __future__ import annotations

from dataclasses import dataclass, field

from vectide.services.common.segment import Deltalog, SegmentInfo

#: common.proto CompactionState
STATE_UNDEFINED = 0
STATE_EXECUTING = 1
STATE_COMPLETED = 2


@dataclass
class CompactionPlan:
    """One merge, as the data node executes it: read ``sources``, drop the rows deleted by
    ``deltalogs`` at or before ``delete_ts`` and those inserted before ``expire_ts`` (the
    collection's TTL; 0: none), write segment ``target_id``."""

    plan_id: int
    job_id: int
    collection_id: int
    partition_id: int
    vchannel: str
    target_id: int
    sources: list[SegmentInfo] = field(default_factory=list)
    deltalogs: list[Deltalog] = field(default_factory=list)
    delete_ts: int = 0
    expire_ts: int = 0


@dataclass
class JobState:
    """GetCompactionState's answer."""

    state: int
    executing: int = 0
    completed: int = 0
    failed: int = 0
    timeout: int = 0
