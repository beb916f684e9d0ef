"""Data coordinator: segment ids, segment states, binlog records and channel checkpoints.

A segment collects the inserts of one (collection, partition, shard). Proxies ask for a
segment *after* stamping a write, and sealing takes a fresh stamp under the same lock, so
every row of a sealed segment has ``ts < seal_ts``. A channel's TimeTick >= ``seal_ts`` then
proves every row of the segment was written before it: once the data node's checkpoint of
that channel passes ``seal_ts``, the segment is complete in S3 and becomes Flushed.

States: Growing -> Sealed (size, idle time, or Flush) -> Flushed -> Indexed -> Dropped, or
Compacted once merged into a new segment (``compaction_coord.py``). Retired segments (Dropped,
Compacted) keep their records and files until garbage collection removes both (``gc.py``).
Binlog records are keyed by their log id, so a data node replaying a batch after a crash
records the same files again without duplicating anything.

Metadata stays small however long the ingest runs: a segment's record (``segments/{id}``)
holds its state and positions only and is rewritten when those change; each binlog is a
znode of its own (``binlogs/{segment}/{log id}``), written once; channel checkpoints are
overwritten in place. No value grows with the number of batches.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace

from vectide.services.common.kv.base import MetaKV
from vectide.services.common.msgstream.channels import pchannel_of
from vectide.services.common.msgstream.message import Position
from vectide.services.common.segment import (
    PERSISTED,
    RETIRED,
    BatchReport,
    Binlog,
    Deltalog,
    SegmentInfo,
    SegmentState,
    unpadded_log_id,
)
from vectide.services.datacoord.compaction import CompactionPolicy
from vectide.services.datacoord.compaction_coord import CompactionCoord
from vectide.services.datacoord.compaction_jobs import CompactionJobs
from vectide.services.datacoord.garbage import GcPlan
from vectide.services.datacoord.import_jobs import ImportCoord

log = logging.getLogger(__name__)

_SEGMENTS = "datacoord/segments"
_BINLOGS = "datacoord/binlogs"
_CHECKPOINTS = "datacoord/checkpoints"
_DELTALOGS = "datacoord/deltalogs"
#: the newest seal stamp: a data node watches it to run a batch for a waiting flush
SEAL_TS_KEY = "datacoord/seal_ts"


@dataclass
class DataCoordConfig:
    #: a growing segment seals once this many rows were assigned to it
    segment_max_rows: int = 500_000
    #: ... or when nothing was assigned to it for this long
    segment_idle_seal_s: float = 600.0
    #: what compaction merges and rewrites (``max_rows`` is ``segment_max_rows``)
    compaction: CompactionPolicy | None = None
    #: a compaction plan without a result after this long is given up (Timeout)
    compaction_timeout_s: float = 600.0
    #: finished compaction jobs answer GetCompactionState this long (their metastore records)
    compaction_job_retention_s: float = 3600.0


class DataCoord(CompactionCoord, ImportCoord):
    def __init__(
        self,
        kv: MetaKV,
        alloc_ts: Callable[[], int],
        alloc_id: Callable[[], int],
        config: DataCoordConfig | None = None,
        datanode_alive: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._datanode_alive = datanode_alive
        #: epoch seconds; a fault harness injects its own (idle sealing, retirement)
        self._clock = clock
        self._kv = kv
        self._alloc_ts = alloc_ts
        self._alloc_id = alloc_id
        self.config = config or DataCoordConfig()
        self._lock = threading.RLock()
        self._segments: dict[int, SegmentInfo] = {}
        self._checkpoints: dict[str, Position] = {}
        self._deltalogs: dict[int, dict[str, Deltalog]] = {}
        self._imports = {}
        self._dirty: set[int] = set()
        #: told (pchannel, seal_ts) of every seal: the data node's checkpoint there must pass
        #: the stamp, so the rootcoord ticks that channel though nothing may be written there
        self.on_seal: Callable[[str, int], None] = lambda pchannel, ts: None
        self.policy = self.config.compaction or CompactionPolicy(self.config.segment_max_rows)
        self.jobs = CompactionJobs(
            self.config.compaction_timeout_s,
            retention_s=self.config.compaction_job_retention_s,
            kv=kv,
            clock=clock,
        )

    def start(self) -> None:
        with self._lock:
            self._segments = {
                s.segment_id: s
                for s in map(SegmentInfo.from_json, self._kv.list_prefix(_SEGMENTS).values())
            }
            for key, raw in self._kv.list_prefix(_BINLOGS).items():
                segment = self._segments.get(int(key.split("/")[2]))
                if segment is not None:
                    entry = Binlog(**json.loads(raw))
                    segment.binlogs[entry.log_id] = entry
            for segment in self._segments.values():
                if segment.binlogs and not self._kv.list_prefix(
                    f"{_BINLOGS}/{segment.segment_id}"
                ):  # written by a version that kept binlogs inside the segment record
                    for entry in segment.binlogs.values():
                        self._kv.put(
                            f"{_BINLOGS}/{segment.segment_id}/{entry.log_id}",
                            json.dumps(asdict(entry)).encode(),
                        )
                    self._save(segment)
            self._checkpoints = {
                key.rsplit("/", 1)[1]: Position(**json.loads(raw))
                for key, raw in self._kv.list_prefix(_CHECKPOINTS).items()
            }
            self._deltalogs = {}
            for key, raw in self._kv.list_prefix(_DELTALOGS).items():
                collection_id = int(key.split("/")[2])
                entry = Deltalog(**json.loads(raw))
                self._deltalogs.setdefault(collection_id, {})[entry.log_id] = entry
            for segment in self._segments.values():
                if segment.state in RETIRED and not segment.retired_at:
                    # retired by a version without garbage collection: the delay starts now
                    self._retire(segment, segment.state)
            self._resume_compactions()
            self._load_imports()

    # -- allocation (proxies) ------------------------------------------------------------------

    def assign_segment(
        self, collection_id: int, partition_id: int, vchannel: str, rows: int
    ) -> int:
        """The growing segment that takes ``rows`` more rows of this shard and partition.

        Call it after the write is stamped: sealing takes a newer stamp, so a sealed
        segment's rows are all older than its ``seal_ts``.
        """
        with self._lock:
            current = next(
                (
                    s
                    for s in self._segments.values()
                    if s.state == SegmentState.GROWING
                    and s.collection_id == collection_id
                    and s.partition_id == partition_id
                    and s.vchannel == vchannel
                ),
                None,
            )
            if (
                current is not None
                and current.assigned_rows + rows > self.config.segment_max_rows
                and current.assigned_rows > 0
            ):
                self._seal(current)
                current = None
            if current is None:
                current = SegmentInfo(self._alloc_id(), collection_id, partition_id, vchannel)
                self._segments[current.segment_id] = current
                self._save(current)  # a new segment is durable before any row names it
            current.assigned_rows += rows
            current.last_assigned_at = self._clock()
            # the row count is bookkeeping for sealing: persisted by seal_idle, not per write
            self._dirty.add(current.segment_id)
            return current.segment_id

    def _seal(self, segment: SegmentInfo) -> None:
        segment.state = SegmentState.SEALED
        segment.seal_ts = self._alloc_ts()
        self._save(segment)
        self._kv.put(SEAL_TS_KEY, str(segment.seal_ts).encode())
        self.on_seal(pchannel_of(segment.vchannel), segment.seal_ts)
        log.info(
            "segment sealed", extra={"segment": segment.segment_id, "rows": segment.assigned_rows}
        )

    def seal_idle(self) -> list[int]:
        """Persist row counts, and seal growing segments that took no rows for
        ``segment_idle_seal_s`` (called every second)."""
        now = self._clock()
        with self._lock:
            for segment_id in self._dirty:
                self._save(self._segments[segment_id])
            self._dirty.clear()
            idle = [
                s
                for s in self._segments.values()
                if s.state == SegmentState.GROWING
                and now - s.last_assigned_at > self.config.segment_idle_seal_s
            ]
            for segment in idle:
                self._seal(segment)
            self._promote()
            return [s.segment_id for s in idle]

    # -- Flush / GetFlushState -----------------------------------------------------------------

    def flush(self, collection_id: int) -> tuple[list[int], int]:
        """Seal every growing segment of the collection: (segments to wait for, flush ts).

        With no data node alive nothing can be flushed now: the segments are sealed (they
        flush when a data node starts) and none is returned, so a client does not wait
        forever; its data is durable in the channels meanwhile.
        """
        with self._lock:
            for segment in self._segments.values():
                if segment.collection_id == collection_id and segment.state == SegmentState.GROWING:
                    self._seal(segment)
            flush_ts = self._alloc_ts()
            waiting = [
                s.segment_id
                for s in self._segments.values()
                if s.collection_id == collection_id and s.state == SegmentState.SEALED
            ]
            self._promote()
            if not self._datanode_alive():
                log.warning("flush without a data node: segments stay sealed until one runs")
                return [], flush_ts
            return waiting, flush_ts

    def flushed(
        self, segment_ids: list[int], pchannels: Sequence[str] = (), flush_ts: int = 0
    ) -> bool:
        """GetFlushState: the segments are persisted and, as Milvus's flush promises, so is
        everything written to ``pchannels`` before ``flush_ts`` (their checkpoints passed it:
        deletes too, which live in no segment). Without a data node only the segments count,
        so a client does not wait forever."""
        with self._lock:
            segments = all(
                self._segments[s].state in (*PERSISTED, *RETIRED)
                for s in segment_ids
                if s in self._segments
            )
            if not segments or not flush_ts or not self._datanode_alive():
                return segments
            return all(
                (c := self._checkpoints.get(p)) is not None and c.ts >= flush_ts for p in pchannels
            )

    # -- data node progress --------------------------------------------------------------------

    def save_batch(self, report: BatchReport) -> list[int]:
        """Record a micro-batch (idempotent); returns segments that became Flushed."""
        with self._lock:
            for segment_id, collection_id, partition_id, vchannel, binlog, first in report.binlogs:
                segment = self._segments.get(segment_id)
                if segment is None:  # written before datacoord knew it (e.g. external producer)
                    segment = SegmentInfo(
                        segment_id,
                        collection_id,
                        partition_id,
                        vchannel,
                        state=SegmentState.GROWING,
                    )
                    self._segments[segment_id] = segment
                    self._save(segment)
                if not _known(segment.binlogs, binlog.log_id):  # a replayed batch
                    self._kv.put(
                        f"{_BINLOGS}/{segment_id}/{binlog.log_id}",
                        json.dumps(asdict(binlog)).encode(),
                    )
                    segment.binlogs[binlog.log_id] = binlog
                if segment.start_position is None or first.offset < segment.start_position.offset:
                    segment.start_position = first
                    self._save(segment)
            for collection_id, delta in report.deltalogs:
                if _known(self._deltalogs.get(collection_id, {}), delta.log_id):
                    continue  # a replayed batch: recorded already (and maybe retired since)
                self._deltalogs.setdefault(collection_id, {})[delta.log_id] = delta
                self._kv.put(
                    _deltalog_key(collection_id, delta), json.dumps(asdict(delta)).encode()
                )
            for pchannel, position in report.checkpoints.items():
                old = self._checkpoints.get(pchannel)
                if old is None or position.ts > old.ts:
                    self._checkpoints[pchannel] = position
                    self._kv.put(
                        f"{_CHECKPOINTS}/{pchannel}", json.dumps(asdict(position)).encode()
                    )
            return self._promote()

    def _promote(self) -> list[int]:
        """Sealed segments whose channel checkpoint passed their seal stamp are Flushed."""
        done = []
        for segment in self._segments.values():
            if segment.state != SegmentState.SEALED:
                continue
            checkpoint = self._checkpoints.get(pchannel_of(segment.vchannel))
            if checkpoint is not None and checkpoint.ts >= segment.seal_ts:
                segment.state = SegmentState.FLUSHED
                self._save(segment)
                done.append(segment.segment_id)
                log.info(
                    "segment flushed",
                    extra={"segment": segment.segment_id, "rows": segment.num_rows},
                )
        return done

    # -- readers (querycoord, index builder) -------------------------------------------------

    def segments(
        self, collection_id: int, states: tuple[SegmentState, ...] | None = None
    ) -> list[SegmentInfo]:
        with self._lock:
            return [
                s
                for s in self._segments.values()
                if s.collection_id == collection_id and (states is None or s.state in states)
            ]

    def segment_rows(self, collection_id: int) -> list[tuple[int, int, str, str, int, int]]:
        """(segment, partition, vchannel, state, rows on S3, rows assigned) of each live
        segment. Small, unlike ``segments`` (no binlog lists): what the segment-info RPCs
        report, so a client can watch persistence trail the writes."""
        with self._lock:
            return [
                (
                    s.segment_id,
                    s.partition_id,
                    s.vchannel,
                    s.state.value,
                    s.num_rows,
                    max(s.assigned_rows, s.num_rows),
                )
                for s in self._segments.values()
                if s.collection_id == collection_id and s.state not in RETIRED
            ]

    def segment(self, segment_id: int) -> SegmentInfo | None:
        with self._lock:
            return self._segments.get(segment_id)

    def deltalogs(self, collection_id: int, vchannel: str) -> list[Deltalog]:
        with self._lock:
            return sorted(
                (
                    d
                    for d in self._deltalogs.get(collection_id, {}).values()
                    if d.vchannel == vchannel and not d.retired_at
                ),
                key=lambda d: d.max_ts,
            )

    def checkpoint(self, pchannel: str) -> Position | None:
        with self._lock:
            return self._checkpoints.get(pchannel)

    def checkpoints(self) -> dict[str, Position]:
        """Every channel's data-node checkpoint (the flush lag is measured from these)."""
        with self._lock:
            return dict(self._checkpoints)

    def segment_totals(self) -> dict[SegmentState, tuple[int, int]]:
        """(segments, rows) by state: assigned rows until persisted, persisted rows after."""
        totals: dict[SegmentState, tuple[int, int]] = {}
        with self._lock:
            for s in self._segments.values():
                count, rows = totals.get(s.state, (0, 0))
                done = s.state in PERSISTED
                totals[s.state] = (count + 1, rows + (s.num_rows if done else s.assigned_rows))
        return totals

    def set_index_file(self, segment_id: int, build_id: int, path: str) -> None:
        with self._lock:
            segment = self._segments.get(segment_id)
            if segment is None:  # collected while the build ran: its file is garbage too
                return
            segment.index_files[str(build_id)] = path
            if segment.state == SegmentState.FLUSHED:
                segment.state = SegmentState.INDEXED
            self._save(segment)

    def forget_channels(self) -> tuple[int, int]:
        """The channels were recreated empty: their checkpoints mean nothing any more, and
        segments that were not flushed lost whatever the data node had not persisted.
        Those with binlogs keep what was persisted (Flushed); the others are Dropped.
        Returns (kept, dropped)."""
        kept = dropped = 0
        with self._lock:
            self._checkpoints.clear()
            self._kv.delete(_CHECKPOINTS)
            for segment in self._segments.values():
                if segment.state not in (SegmentState.GROWING, SegmentState.SEALED):
                    continue
                if segment.binlogs:
                    segment.state, kept = SegmentState.FLUSHED, kept + 1
                else:
                    segment.state, dropped = SegmentState.DROPPED, dropped + 1
                segment.start_position = None
                self._save(segment)
        return kept, dropped

    def index_progress(
        self, collection_id: int, index_id: int, needs_files: bool
    ) -> tuple[int, int, int]:
        """(total, indexed, pending) rows for DescribeIndex. Growing rows count in the total
        only (Milvus indexes them when they are sealed); ``needs_files`` is False for FLAT,
        whose persisted rows need no index file."""
        with self._lock:
            total = indexed = pending = 0
            for s in self._segments.values():
                if s.collection_id != collection_id or s.state in RETIRED:
                    continue
                if s.state not in PERSISTED:
                    total += max(s.assigned_rows, s.num_rows)
                    continue
                total += s.num_rows
                if not needs_files or str(index_id) in s.index_files:
                    indexed += s.num_rows
                else:
                    pending += s.num_rows
            return total, indexed, pending

    def drop_collection(self, collection_id: int) -> None:
        with self._lock:
            self.retire_segments(
                [s.segment_id for s in self._segments.values() if s.collection_id == collection_id]
            )

    # -- garbage collection (``gc.py`` plans and runs it) ----------------------------------

    def gc_snapshot(
        self,
    ) -> tuple[list[SegmentInfo], dict[int, dict[str, Deltalog]], dict[str, Position]]:
        """Copies of every segment record, deltalog record and checkpoint."""
        with self._lock:
            return (
                [replace(s, binlogs=dict(s.binlogs)) for s in self._segments.values()],
                {c: {k: replace(d) for k, d in ls.items()} for c, ls in self._deltalogs.items()},
                dict(self._checkpoints),
            )

    def retire_segments(self, segment_ids: list[int]) -> None:
        """Drop these segments (their collection or partition is gone)."""
        with self._lock:
            for segment_id in segment_ids:
                segment = self._segments.get(segment_id)
                if segment is not None and segment.state not in RETIRED:
                    self._retire(segment, SegmentState.DROPPED)

    def retire_deltalogs(self, deltalogs: list[tuple[int, str]]) -> None:
        """Stop handing these deltalogs to loads: no live row needs their deletes."""
        now = self._clock()
        with self._lock:
            for collection_id, log_id in deltalogs:
                delta = self._deltalogs.get(collection_id, {}).get(log_id)
                if delta is not None and not delta.retired_at:
                    delta.retired_at = now
                    self._kv.put(
                        _deltalog_key(collection_id, delta), json.dumps(asdict(delta)).encode()
                    )

    def forget(self, plan: GcPlan) -> None:
        """Remove the records garbage collection decided nobody needs."""
        with self._lock:
            for segment_id in plan.segments:
                if self._segments.pop(segment_id, None) is not None:
                    self._kv.delete(f"{_BINLOGS}/{segment_id}")
                    self._kv.delete(f"{_SEGMENTS}/{segment_id}")
            for collection_id, log_id in plan.deltalogs:
                logs = self._deltalogs.get(collection_id, {})
                if logs.pop(log_id, None) is not None:
                    self._kv.delete(f"{_DELTALOGS}/{collection_id}/{log_id}")
                if not logs:
                    self._deltalogs.pop(collection_id, None)

    def _retire(self, segment: SegmentInfo, state: SegmentState) -> None:
        segment.state, segment.retired_at = state, self._clock()
        self._save(segment)

    def _save(self, segment: SegmentInfo) -> None:
        """The segment's record, without its binlogs (each has its own znode)."""
        self._kv.put(f"{_SEGMENTS}/{segment.segment_id}", segment.to_json(with_binlogs=False))


def _known(logs: dict[str, object], log_id: str) -> bool:
    """Whether a part is recorded already, under its id or the unpadded one it had before."""
    return log_id in logs or unpadded_log_id(log_id) in logs


def _deltalog_key(collection_id: int, delta: Deltalog) -> str:
    return f"{_DELTALOGS}/{collection_id}/{delta.log_id}"
