"""One micro-batch of channel records -> binlogs, deltalogs and stats on S3, then a report.

Pure of Spark and Kafka: it takes ``(channel, offset, value)`` records and a store. Every
object name derives from the channel and the offsets the batch covered, so processing the
same batch again (a replay after a crash) overwrites the same objects and reports the same
binlogs: exactly-once, with at-least-once delivery underneath.

Field 0 of a segment's binlogs holds the primary keys, field 1 the row timestamps (Milvus's
system fields); user fields keep their field ids.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from vectide.services.common import binlog, nullable
from vectide.services.common.binlog import PK_FIELD, TS_FIELD
from vectide.services.common.msgstream import codec
from vectide.services.common.msgstream.message import (
    FIXED_DTYPES,
    DataType,
    DeleteMsg,
    FieldColumn,
    InsertMsg,
    Position,
    TimeTickMsg,
    row_width,
)
from vectide.services.common.results import concat
from vectide.services.common.segment import BatchReport, Binlog, Deltalog, part_log_id
from vectide.streaming.poison import fit_deletes, fit_inserts

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Record:
    channel: str
    offset: int
    value: bytes


#: the counters of ``BatchStats`` that add up over pieces and tasks
_COUNTS = ("records", "rows", "deletes", "poison", "duplicates")


@dataclass
class BatchStats:
    records: int = 0
    rows: int = 0
    deletes: int = 0
    poison: int = 0
    #: insert records met twice in the batch (written once)
    duplicates: int = 0
    segments: set[int] = field(default_factory=set)
    #: host:pid of the Python worker that wrote the batch (proves where the work ran)
    executor: str = ""
    #: the slowest task's time reading the channel and writing S3
    consume_ms: int = 0
    write_ms: int = 0

    def add_counts(self, other: BatchStats) -> None:
        for name in _COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.segments.update(other.segments)


def merge_into(
    report: BatchReport, stats: BatchStats, part: BatchReport, part_stats: BatchStats
) -> None:
    """Add what one piece of a range wrote to the range's report (its last checkpoint is
    the range's)."""
    report.binlogs.extend(part.binlogs)
    report.deltalogs.extend(part.deltalogs)
    report.checkpoints.update(part.checkpoints)
    stats.add_counts(part_stats)


def process_batch(
    records: Iterable[Record], store: binlog.Store, seen: set[tuple[int, ...]] | None = None
) -> tuple[BatchReport, BatchStats]:
    """Write what ``records`` hold and describe it; the caller reports it to datacoord.
    ``seen``: insert identities met before in the same batch (one range written in pieces)."""
    stats = BatchStats()
    inserts: dict[tuple[str, int], list[tuple[int, InsertMsg]]] = defaultdict(list)
    deletes: dict[tuple[str, int, str], list[tuple[int, DeleteMsg]]] = defaultdict(list)
    checkpoints: dict[str, Position] = {}
    seen = set() if seen is None else seen
    for record in sorted(records, key=lambda r: (r.channel, r.offset)):
        stats.records += 1
        try:
            msg = codec.decode(record.value)
        except codec.DecodeError as exc:
            stats.poison += 1
            log.error(
                "skipping undecodable record",
                extra={"channel": record.channel, "offset": record.offset, "error": str(exc)},
            )
            continue
        if isinstance(msg, TimeTickMsg):
            checkpoints[record.channel] = Position(record.channel, record.offset + 1, msg.ts)
        elif isinstance(msg, InsertMsg):
            if not _first_time(seen, msg, stats):
                continue
            inserts[(record.channel, msg.segment_id)].append((record.offset, msg))
        elif isinstance(msg, DeleteMsg):
            deletes[(record.channel, msg.collection_id, msg.shard)].append((record.offset, msg))
    report = BatchReport([], [], checkpoints)
    for (channel, segment_id), msgs in inserts.items():
        msgs = _without_poison(channel, msgs, fit_inserts, stats)
        if not msgs:
            continue
        report.binlogs.append(_write_segment_part(store, channel, segment_id, msgs))
        stats.rows += report.binlogs[-1][4].rows
        stats.segments.add(segment_id)
    for (channel, collection_id, vchannel), msgs in deletes.items():
        msgs = _without_poison(channel, msgs, fit_deletes, stats)
        if not msgs:
            continue
        report.deltalogs.append((collection_id, _write_deltas(store, channel, vchannel, msgs)))
        stats.deletes += report.deltalogs[-1][1].rows
    return report, stats


def _first_time(seen: set[tuple[int, ...]], msg: InsertMsg, stats: BatchStats) -> bool:
    """Whether the batch met this insert record before (a producer's retry stored it twice:
    its rows are written once)."""
    key = msg.identity()
    if key in seen:
        stats.duplicates += 1
        return False
    seen.add(key)
    return True


def _without_poison(channel: str, msgs: list, fit: Callable, stats: BatchStats) -> list:
    """The messages of one group that can be written together; the rest are counted and
    logged with their positions (see ``streaming/poison.py``)."""
    keep, skipped = fit(msgs)
    for offset, why in skipped:
        stats.poison += 1
        log.error(
            "skipping a message that cannot be written",
            extra={"channel": channel, "offset": offset, "error": why},
        )
    return keep


def checkpoints_only(positions: Iterable[tuple[str, int, int]]) -> tuple[BatchReport, BatchStats]:
    """The report of ranges the driver knows hold only ticks, given as (channel, offset after
    the last tick, its stamp): the same checkpoints ``process_batch`` would find in them."""
    checkpoints = {c: Position(c, offset, ts) for c, offset, ts in positions}
    return BatchReport([], [], checkpoints), BatchStats()


def _write_segment_part(
    store: binlog.Store, channel: str, segment_id: int, msgs: list[tuple[int, InsertMsg]]
):
    offsets = [o for o, _ in msgs]
    first = msgs[0][1]
    coll, part = first.collection_id, first.partition_id
    log_id = part_log_id(channel, offsets[0], offsets[-1])
    pks = concat([m.pks for _, m in msgs])
    timestamps = np.concatenate([m.timestamps for _, m in msgs])
    pk_type = DataType.VARCHAR if isinstance(pks, list) else DataType.INT64
    columns = {
        PK_FIELD: (pks, pk_type, 0, None),
        TS_FIELD: (timestamps, DataType.INT64, 0, None),
    }
    # every field any message carries (one written before AddCollectionField lacks the new
    # field: nulls for its rows), in the order the messages give them
    fields: dict[int, FieldColumn] = {}
    for _, m in msgs:
        for c in m.fields:
            fields.setdefault(c.field_id, c)
    for field_id, col in fields.items():
        parts = [_field(m, col) for _, m in msgs]
        columns[field_id] = (
            concat([p.data for p in parts]),
            col.data_type,
            col.dim,
            _validity(parts),
        )
    paths = {}
    for field_id, (values, data_type, dim, valid) in columns.items():
        key = binlog.insert_log_key(coll, part, segment_id, field_id, log_id)
        store.put(key, binlog.encode_column(values, data_type, dim, valid))
        paths[str(field_id)] = key
    stats_key = binlog.stats_log_key(coll, part, segment_id, PK_FIELD, log_id)
    store.put(stats_key, binlog.PkStats.of(pks).to_json())
    record = Binlog(
        log_id, len(pks), paths, stats_key, int(timestamps.min()), int(timestamps.max())
    )
    start = Position(channel, offsets[0], 0)
    return segment_id, coll, part, first.shard, record, start


def _field(msg: InsertMsg, like: FieldColumn) -> FieldColumn:
    """``msg``'s column of ``like``'s field, or nulls for its rows when it has none."""
    for col in msg.fields:
        if col.field_id == like.field_id:
            return col
    rows = msg.num_rows
    if like.data_type in FIXED_DTYPES:
        width = row_width(like.data_type, like.dim)
        data: Any = np.zeros((rows, width) if width else rows, FIXED_DTYPES[like.data_type])
    else:
        data = [nullable.placeholder(like.data_type)] * rows
    return FieldColumn(
        like.field_id, like.name, like.data_type, data, like.dim, np.zeros(rows, bool)
    )


def _validity(parts: list[FieldColumn]) -> np.ndarray | None:
    """The concatenated validity of a nullable field's parts; None when no part has a null."""
    if all(p.valid is None for p in parts):
        return None
    return np.concatenate([np.ones(len(p), bool) if p.valid is None else p.valid for p in parts])


def _write_deltas(
    store: binlog.Store, channel: str, vchannel: str, msgs: list[tuple[int, DeleteMsg]]
) -> Deltalog:
    log_id = part_log_id(channel, msgs[0][0], msgs[-1][0])
    pks = concat([m.pks for _, m in msgs])
    timestamps = np.concatenate([m.timestamps for _, m in msgs])
    key = binlog.delta_log_key(msgs[0][1].collection_id, vchannel, log_id)
    store.put(key, binlog.encode_deltas(pks, timestamps))
    return Deltalog(vchannel, log_id, key, len(pks), int(timestamps.max()))


class ParallelPuts:
    """A store whose ``put`` returns at once and uploads on a few threads, so encoding the
    next column overlaps the upload of the last one (boto3 clients are thread-safe).
    ``join`` waits for every upload and raises the first failure: call it before reporting
    anything, a report must only name objects that exist."""

    def __init__(self, store: binlog.Store, threads: int = 4) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._store = store
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="s3-put")
        self._pending: list = []

    def put(self, key: str, data: bytes) -> None:
        self._pending.append(self._pool.submit(self._store.put, key, data))

    def get(self, key: str) -> bytes:
        return self._store.get(key)

    def drain(self) -> None:
        """Wait for every upload queued so far (raising the first failure); more may follow."""
        pending, self._pending = self._pending, []
        for future in pending:
            future.result()

    def join(self) -> None:
        try:
            for future in self._pending:
                future.result()
        finally:
            self._pending = []
            self._pool.shutdown(wait=True)


# -- executor -> driver ---------------------------------------------------------------------
# An executor task returns what it wrote as a few (kind, JSON) rows: paths, row counts,
# positions and stamps, never data. The driver merges the rows of all tasks into one report.


def report_rows(report: BatchReport, stats: BatchStats) -> Iterator[tuple[str, str]]:
    for segment_id, coll, part, vchannel, record, start in report.binlogs:
        body = [segment_id, coll, part, vchannel, asdict(record), asdict(start)]
        yield "binlog", json.dumps(body)
    for collection_id, delta in report.deltalogs:
        yield "deltalog", json.dumps([collection_id, asdict(delta)])
    for position in report.checkpoints.values():
        yield "checkpoint", json.dumps(asdict(position))
    body = {**asdict(stats), "segments": sorted(stats.segments)}
    yield "stats", json.dumps(body)


def merge_rows(rows: Iterable[tuple[str, str]]) -> tuple[BatchReport, BatchStats, list[str]]:
    """The report of a whole batch from its tasks' rows, their summed stats, and the
    executors that wrote it."""
    report, total, executors = BatchReport([], [], {}), BatchStats(), []
    for kind, body in rows:
        data = json.loads(body)
        if kind == "binlog":
            segment_id, coll, part, vchannel, record, start = data
            report.binlogs.append(
                (segment_id, coll, part, vchannel, Binlog(**record), Position(**start))
            )
        elif kind == "deltalog":
            report.deltalogs.append((data[0], Deltalog(**data[1])))
        elif kind == "checkpoint":  # tasks of one channel's pieces: the furthest one counts
            position = Position(**data)
            known = report.checkpoints.get(position.channel)
            if known is None or position.offset > known.offset:
                report.checkpoints[position.channel] = position
        elif kind == "stats":
            total.add_counts(
                BatchStats(**{n: data.get(n, 0) for n in _COUNTS}, segments=set(data["segments"]))
            )
            total.consume_ms = max(total.consume_ms, data["consume_ms"])
            total.write_ms = max(total.write_ms, data["write_ms"])
            executors.append(data["executor"])
    return report, total, executors
