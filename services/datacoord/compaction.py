"""Compaction planning: which flushed segments to merge, and which to rewrite for deletes.

Pure: segment and deltalog records in, groups of segments out. Mix compaction merges small
flushed segments of one (collection, partition, shard) into one segment of at most
``max_rows`` rows; delete compaction rewrites a segment on its own when the deletes that may
hit it reach ``delete_ratio`` of its rows. Both drop the rows deleted so far, so one plan
kind serves both: a plan is a list of source segments written as one new segment.

Deletes are kept per shard, not per segment, so the deleted share of a segment is estimated
from above: the rows of the shard's deltalogs newer than the segment's oldest row and than
the deletes it was last rewritten with. A shard with many deletes elsewhere may rewrite a
segment that had none: wasted work, never a wrong result.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from vectide.services.common.segment import PERSISTED, Deltalog, SegmentInfo
from vectide.services.common.time_travel import Retention


@dataclass
class CompactionPolicy:
    #: a merged segment holds at most this many rows (``data.segment_max_rows``)
    max_rows: int = 500_000
    #: automatic merges take segments below this share of ``max_rows`` (Milvus: 0.5)
    small_fraction: float = 0.5
    #: a segment is rewritten alone once deletes may reach this share of its rows
    delete_ratio: float = 0.2
    #: rows deleted within this window are kept, with their delete stamps (time travel)
    retention: Retention = field(default_factory=Retention)


def delete_estimate(
    segment: SegmentInfo, deltalogs: Iterable[Deltalog], purge_ts: int | None = None
) -> int:
    """At most this many of the segment's rows are deleted (see the module docstring), by
    deltalogs whose deletes are all at or before ``purge_ts`` when given (the retention
    window keeps newer ones: counting them would rewrite the segment for nothing)."""
    if not segment.binlogs:
        return 0
    oldest = min(entry.min_ts for entry in segment.binlogs.values())
    since = max(oldest, segment.deletes_applied_ts)
    newest = float("inf") if purge_ts is None else purge_ts
    return sum(
        d.rows
        for d in deltalogs
        if d.vchannel == segment.vchannel and not d.retired_at and since < d.max_ts <= newest
    )


def expired_estimate(segment: SegmentInfo, expire_ts: int) -> int:
    """At least this many of the segment's rows are past its collection's TTL: those of
    its parts whose newest row is older than ``expire_ts`` (0: no TTL)."""
    return sum(b.rows for b in segment.binlogs.values() if b.max_ts < expire_ts)


def plan_groups(
    segments: Iterable[SegmentInfo],
    deltalogs: list[Deltalog],
    policy: CompactionPolicy,
    manual: bool = False,
    busy: frozenset[int] = frozenset(),
    purge_ts: int | None = None,
    expire_ts: int = 0,
) -> list[list[SegmentInfo]]:
    """Groups of segments to compact, each written as one new segment.

    Automatic: small segments are merged (two or more per group); any segment whose
    deletes reach ``delete_ratio`` is rewritten. Manual (``compact()``): every segment may
    be merged up to ``max_rows``, and any segment with deletes is rewritten. ``busy``
    segments (in a running plan) are left alone. Only deletes at or before ``purge_ts``
    count (None: every one); rows past the TTL (``expire_ts``) count as deleted."""
    shards: dict[tuple[int, int, str], list[SegmentInfo]] = defaultdict(list)
    for s in segments:
        if s.state in PERSISTED and s.segment_id not in busy and s.num_rows > 0:
            shards[(s.collection_id, s.partition_id, s.vchannel)].append(s)
    small_rows = policy.max_rows if manual else policy.max_rows * policy.small_fraction
    groups: list[list[SegmentInfo]] = []
    for members in shards.values():
        small = [s for s in members if s.num_rows < small_rows]
        small.sort(key=lambda s: (s.num_rows, s.segment_id))
        merged = [g for g in _pack(small, policy.max_rows) if len(g) > 1]
        groups += merged
        taken = {s.segment_id for g in merged for s in g}
        for s in members:
            if s.segment_id not in taken and _deletes_warrant(
                s, deltalogs, policy, manual, purge_ts, expire_ts
            ):
                groups.append([s])
    return groups


def _pack(segments: list[SegmentInfo], max_rows: int) -> list[list[SegmentInfo]]:
    """Consecutive runs of ``segments`` (smallest first) of at most ``max_rows`` rows."""
    groups: list[list[SegmentInfo]] = []
    current: list[SegmentInfo] = []
    rows = 0
    for s in segments:
        if current and rows + s.num_rows > max_rows:
            groups.append(current)
            current, rows = [], 0
        current.append(s)
        rows += s.num_rows
    if current:
        groups.append(current)
    return groups


def _deletes_warrant(
    segment: SegmentInfo,
    deltalogs: list[Deltalog],
    policy: CompactionPolicy,
    manual: bool,
    purge_ts: int | None,
    expire_ts: int = 0,
) -> bool:
    deleted = delete_estimate(segment, deltalogs, purge_ts)
    deleted += expired_estimate(segment, expire_ts)
    if manual:
        return deleted > 0
    return deleted >= policy.delete_ratio * segment.num_rows
