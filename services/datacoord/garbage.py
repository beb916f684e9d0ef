"""Garbage collection planning: which S3 objects and which metadata nothing needs any more.

Pure: segment and deltalog records, the object listing with each object's age, and the
segments query nodes hold come in; what may be deleted comes out. The coordinator runs it
periodically (:class:`services.datacoord.gc.GarbageCollector`).

Two delays keep readers safe. A retired segment (Dropped, Compacted) keeps its files for
``delay_s`` after it was retired *and* for as long as any query node still serves it: a
load planned before the retirement, or a node that has not swapped it out yet, reads on. An
object no record names is deleted only once it is ``delay_s`` old: the data node, the index
builder and compaction write their files before they record them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from vectide.services.common.msgstream.channels import pchannel_of
from vectide.services.common.msgstream.message import Position
from vectide.services.common.segment import PERSISTED, RETIRED, Deltalog, SegmentInfo
from vectide.services.datacoord.compaction import expired_estimate

#: the object kinds garbage collection looks after (Milvus's layout, ``services.common.binlog``)
PREFIXES = ("insert_log/", "stats_log/", "delta_log/", "index_files/")


@dataclass
class GcPlan:
    #: object keys to delete
    objects: list[str] = field(default_factory=list)
    #: retired segments whose records go
    segments: list[int] = field(default_factory=list)
    #: retired deltalogs whose records go: (collection id, log id)
    deltalogs: list[tuple[int, str]] = field(default_factory=list)


def segment_objects(segment: SegmentInfo) -> Iterator[str]:
    """Every object a segment's record names: binlogs, stats logs and index files."""
    for entry in segment.binlogs.values():
        yield from entry.paths.values()
        yield entry.stats_path
    yield from segment.index_files.values()


def plan_gc(
    segments: Iterable[SegmentInfo],
    deltalogs: dict[int, dict[str, Deltalog]],
    objects: Iterable[tuple[str, float]],
    held: set[int],
    now: float,
    delay_s: float,
) -> GcPlan:
    """What to remove now. ``objects`` are (key, age in seconds) under :data:`PREFIXES`;
    ``held`` the segments some query node serves."""
    plan = GcPlan()
    referenced: set[str] = set()
    for segment in segments:
        if (
            segment.state in RETIRED
            and now - segment.retired_at >= delay_s
            and segment.segment_id not in held
        ):
            plan.segments.append(segment.segment_id)
        else:
            referenced.update(segment_objects(segment))
    for collection_id, logs in deltalogs.items():
        for delta in logs.values():
            if delta.retired_at and now - delta.retired_at >= delay_s:
                plan.deltalogs.append((collection_id, delta.log_id))
            else:
                referenced.add(delta.path)
    plan.objects = [key for key, age in objects if key not in referenced and age >= delay_s]
    return plan


def orphans(
    segments: Iterable[SegmentInfo], live_partitions: set[tuple[int, int]]
) -> list[SegmentInfo]:
    """Live segments of collections or partitions that no longer exist."""
    return [
        s
        for s in segments
        if s.state not in RETIRED and (s.collection_id, s.partition_id) not in live_partitions
    ]


def expired(segments: Iterable[SegmentInfo], expiries: Mapping[int, int]) -> list[SegmentInfo]:
    """Persisted segments all of whose rows were inserted before their collection's expiry
    bound (collection id -> the oldest insert stamp a read may still return, its TTL's):
    no read returns a row of them any more."""
    return [
        s
        for s in segments
        if s.state in PERSISTED
        and s.binlogs
        and s.collection_id in expiries
        and expired_estimate(s, expiries[s.collection_id]) == s.num_rows
    ]


def needless_deltalogs(
    segments: list[SegmentInfo],
    deltalogs: dict[int, dict[str, Deltalog]],
    checkpoints: dict[str, Position],
    live_collections: set[int],
) -> list[tuple[int, Deltalog]]:
    """Live deltalogs no segment needs any more: their collection is gone, or every
    delete in them is older than every row it could hit that is still served.

    A delete at ``d`` hits rows inserted before ``d``. Once the channel's data-node
    checkpoint passed ``d``, every such row is in some segment's binlogs; a segment whose
    binlogs all start at or after ``d``, or that was rewritten with the deletes up to ``d``
    applied (compaction), does not need the deltalog."""
    needless = []
    for collection_id, logs in deltalogs.items():
        mine = [s for s in segments if s.collection_id == collection_id and s.state not in RETIRED]
        for delta in logs.values():
            if delta.retired_at:
                continue
            if collection_id not in live_collections or _applied_everywhere(
                delta, [s for s in mine if s.vchannel == delta.vchannel], checkpoints
            ):
                needless.append((collection_id, delta))
    return needless


def _applied_everywhere(
    delta: Deltalog, segments: list[SegmentInfo], checkpoints: dict[str, Position]
) -> bool:
    checkpoint = checkpoints.get(pchannel_of(delta.vchannel))
    if checkpoint is None or checkpoint.ts < delta.max_ts:
        return False  # rows it hits may still be on their way to a binlog
    for segment in segments:
        if segment.deletes_applied_ts >= delta.max_ts:
            continue
        if any(entry.min_ts < delta.max_ts for entry in segment.binlogs.values()):
            return False
    return True
