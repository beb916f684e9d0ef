"""The garbage collection loop: runs the plan of ``garbage.py`` against the real parts.

One pass: segments of collections and partitions that no longer exist, and segments whose
rows are all past their collection's TTL, are dropped, and deltalogs no live row needs are
retired; query nodes let go of retired segments nothing
replaces (a compaction whose rows were all deleted); then every object under the data
prefixes that no record needs and that is older than the delay is deleted, and the records
of segments and deltalogs retired longer than the delay, and held by no query node, go.

The coordinator runs it every ``data.gc_interval_s``. If any query node cannot say what it
holds, nothing is deleted in that pass.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from vectide.services.common.segment import RETIRED, SegmentInfo
from vectide.services.datacoord.core import DataCoord
from vectide.services.datacoord.garbage import (
    PREFIXES,
    expired,
    needless_deltalogs,
    orphans,
    plan_gc,
)

log = logging.getLogger(__name__)


class ObjectLister(Protocol):
    def list_ages(self, prefix: str = "") -> Iterator[tuple[str, float]]: ...
    def delete(self, key: str) -> None: ...


class SegmentHolders(Protocol):
    """The querycoord, as far as garbage collection is concerned."""

    def held_segments(self) -> set[int] | None: ...
    def release_segments(self, segment_ids: set[int]) -> None: ...


@dataclass
class GcStats:
    objects: int = 0
    segments: int = 0
    deltalogs: int = 0


class GarbageCollector:
    def __init__(
        self,
        datacoord: DataCoord,
        store: ObjectLister,
        holders: SegmentHolders,
        live_partitions: Callable[[], set[tuple[int, int]]],
        delay_s: float,
        expiries: Callable[[], dict[int, int]] = dict,
    ) -> None:
        """``expiries``: per collection with a TTL, the oldest insert stamp a read may still
        return (``collection_properties.expiries``)."""
        self._datacoord = datacoord
        self._store = store
        self._holders = holders
        self._live_partitions = live_partitions
        self._expiries = expiries
        self.delay_s = delay_s

    def run_once(self) -> GcStats:
        segments, _, _ = self._datacoord.gc_snapshot()
        live = self._live_partitions()  # after the snapshot: newer collections are not orphans
        gone = orphans(segments, live) + expired(segments, self._expiries())
        self._datacoord.retire_segments([s.segment_id for s in gone])
        segments, deltalogs, checkpoints = self._datacoord.gc_snapshot()
        collections = {c for c, _ in live}
        needless = needless_deltalogs(segments, deltalogs, checkpoints, collections)
        self._datacoord.retire_deltalogs([(c, d.log_id) for c, d in needless])
        self._holders.release_segments(_unreplaced(segments))
        held = self._holders.held_segments()
        if held is None:
            log.warning("garbage collection skipped: a query node did not answer")
            return GcStats()
        segments, deltalogs, _ = self._datacoord.gc_snapshot()
        objects = [entry for prefix in PREFIXES for entry in self._store.list_ages(prefix)]
        plan = plan_gc(segments, deltalogs, objects, held, time.time(), self.delay_s)
        self._datacoord.forget(plan)
        for key in plan.objects:
            self._store.delete(key)
        stats = GcStats(len(plan.objects), len(plan.segments), len(plan.deltalogs))
        if plan.objects or plan.segments or plan.deltalogs:
            log.info("garbage collected", extra=vars(stats))
        return stats


def _unreplaced(segments: list[SegmentInfo]) -> set[int]:
    """Retired segments no live segment took the rows of: a query node serving one should
    let it go (its rows were all deleted, or its collection or partition dropped)."""
    covered = {c for s in segments if s.state not in RETIRED for c in s.compacted_from}
    return {s.segment_id for s in segments if s.state in RETIRED} - covered
