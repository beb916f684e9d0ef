"""Segment meta: what datacoord records about each segment and each data-node batch."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum

from vectide.services.common.msgstream.message import Position


class SegmentState(StrEnum):
    GROWING = "Growing"
    SEALED = "Sealed"
    FLUSHED = "Flushed"
    INDEXED = "Indexed"
    DROPPED = "Dropped"
    #: merged into another segment: readable until garbage collection removes it
    COMPACTED = "Compacted"


#: states whose data is complete in S3
PERSISTED = (SegmentState.FLUSHED, SegmentState.INDEXED)
#: states of segments no read should use any more (their files wait for garbage collection)
RETIRED = (SegmentState.DROPPED, SegmentState.COMPACTED)


def part_log_id(channel: str, first: int, last: int) -> str:
    """The id of a binlog part holding a channel's records from offset ``first`` to ``last``.

    Offsets are zero-padded: a segment's rows are in sorted log id order
    (``SegmentInfo.parts_in_row_order``), so sorted ids must follow the channel. Unpadded,
    "...-1000-1063" sorted before "...-128-191": rows were loaded scrambled, consistently
    (index labels are row numbers), but an HNSW graph built over that order searched worse
    than one over the rows as inserted (docs/architecture.md, "Binlog layout")."""
    return f"{channel}-{first:020d}-{last:020d}"


def unpadded_log_id(log_id: str) -> str:
    """The id a part written before ``part_log_id`` padded offsets had (a batch replayed
    across that upgrade is recognised as written already)."""
    head, sep, last = log_id.rpartition("-")
    channel, sep2, first = head.rpartition("-")
    if not (sep and sep2 and first.isdigit() and last.isdigit()):
        return log_id
    return f"{channel}-{int(first)}-{int(last)}"


@dataclass
class Binlog:
    """One micro-batch's share of a segment: a file per field."""

    log_id: str
    rows: int
    #: field id (as str, JSON keys) -> object key
    paths: dict[str, str]
    stats_path: str
    min_ts: int
    max_ts: int


@dataclass
class SegmentInfo:
    segment_id: int
    collection_id: int
    partition_id: int
    vchannel: str
    state: SegmentState = SegmentState.GROWING
    assigned_rows: int = 0
    last_assigned_at: float = field(default_factory=time.time)
    seal_ts: int = 0
    binlogs: dict[str, Binlog] = field(default_factory=dict)
    #: where the shard's channel must be replayed from to see this segment's rows
    start_position: Position | None = None
    #: index builds: build id -> object key of the index file
    index_files: dict[str, str] = field(default_factory=dict)
    #: when it became Dropped or Compacted (epoch seconds): garbage collection waits
    #: ``data.gc_delay_s`` from here before removing its files
    retired_at: float = 0.0
    #: segments whose rows this one holds (compaction), transitively: a query node that
    #: serves this one skips their inserts met in a channel replay
    compacted_from: list[int] = field(default_factory=list)
    #: every delete stamped at or before this was applied when the segment was written
    #: (compaction); a deltalog older than this no longer concerns it
    deletes_applied_ts: int = 0

    @property
    def num_rows(self) -> int:
        return sum(b.rows for b in self.binlogs.values())

    def parts_in_row_order(self) -> list[Binlog]:
        """The binlog parts in the order of the segment's rows: query nodes load them so and
        index builds index them so (an index's labels are row numbers), by sorted log id,
        which for parts the data node wrote is the channel's order (``part_log_id``)."""
        return [self.binlogs[log_id] for log_id in sorted(self.binlogs)]

    def to_json(self, with_binlogs: bool = True) -> bytes:
        data = asdict(self)
        data["state"] = self.state.value
        if not with_binlogs:
            data["binlogs"] = {}
        return json.dumps(data).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> SegmentInfo:
        data = json.loads(raw)
        data["state"] = SegmentState(data["state"])
        data["binlogs"] = {k: Binlog(**v) for k, v in data.get("binlogs", {}).items()}
        if data["start_position"]:
            data["start_position"] = Position(**data["start_position"])
        return cls(**data)


@dataclass
class Deltalog:
    vchannel: str
    log_id: str
    path: str
    rows: int
    max_ts: int
    #: when it was retired (no segment needs it any more); 0 while live
    retired_at: float = 0.0


@dataclass
class BatchReport:
    """What one data-node micro-batch wrote, and how far each channel is now persisted."""

    #: segment id -> (collection, partition, vchannel, binlog, first position)
    binlogs: list[tuple[int, int, int, str, Binlog, Position]]
    deltalogs: list[tuple[int, Deltalog]]
    checkpoints: dict[str, Position]


@dataclass
class LoadPlan:
    """What a query node loads to serve a shard: persisted segments, the shard's deletes
    from the deltalogs, and where to replay the channel from (inserts of ``segments`` met
    in the replay are skipped)."""

    segments: list[SegmentInfo] = field(default_factory=list)
    deltalogs: list[Deltalog] = field(default_factory=list)
    replay_offset: int = 0
    #: segments of the shard other nodes hold already: segment id -> node id (the leader
    #: scatters reads of them there instead of loading them)
    remote: dict[int, int] = field(default_factory=dict)
