"""One batch of a mapping's Kafka records -> writes through the proxy, dead letters, progress.

Pure of Kafka: the worker hands it records and a :class:`Writer` (the proxy core in
standalone mode, the proxy's RPC in a cluster), and gets back what to dead-letter and how far
each partition got. Order is kept where it matters: records become runs of upserts and
deletes applied one after another, so a tombstone followed by a re-send of the same key ends
with the key present. Within a run of upserts the last record of a key wins, as Kafka's
log compaction would have it.

A write the proxy refuses as invalid is retried record by record, so only the records it
really refuses go to the dead-letter topic. Any other failure (proxy down, pushback) raises
:class:`Backpressure`: nothing of the batch counts as applied, and the worker retries it.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from vectide.services.common import nullable, timestamptz
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.msgstream.message import (
    DENSE_VECTORS,
    FIXED_DTYPES,
    DataType,
    FieldColumn,
)
from vectide.services.common.schema import CollectionInfo, FieldSchema
from vectide.services.ingest.decode import RecordDecoder, RecordError, Tombstone, Upsert

log = logging.getLogger(__name__)

#: the proxy refused these records themselves: retrying cannot help
_RECORD_CODES = {
    Code.PARAMETER_INVALID,
    Code.PARAMETER_MISSING,
    Code.COLLECTION_NOT_FOUND,
    Code.PARTITION_NOT_FOUND,
    Code.COLLECTION_ILLEGAL_SCHEMA,
}


#: column dtypes as the gRPC path builds them (small ints travel as int64)
_COLUMN_DTYPES = {DataType.BOOL: np.bool_, DataType.FLOAT: np.float32, DataType.DOUBLE: np.float64}
#: columns held as lists: text (VarChar, JSON, ARRAY as JSON text) and sparse rows (bytes)
_LISTS = frozenset(
    {
        DataType.VARCHAR,
        DataType.JSON,
        DataType.GEOMETRY,
        DataType.ARRAY,
        DataType.SPARSE_FLOAT_VECTOR,
    }
)


class Writer(Protocol):
    """The proxy's write path, as the ingest role uses it."""

    def describe_collection(self, name: str) -> CollectionInfo: ...
    def insert(
        self, collection: str, partition: str, columns: dict[str, FieldColumn], num_rows: int
    ) -> Any: ...
    def upsert(
        self, collection: str, partition: str, columns: dict[str, FieldColumn], num_rows: int
    ) -> Any: ...
    def delete_pks(self, collection: str, partition: str, pks: Any) -> Any: ...


class Backpressure(RuntimeError):
    """The proxy could not take the batch now; retry it later."""


@dataclass(slots=True)  # one per consumed record: a frozen dataclass's init costs 3x
class KafkaRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True)
class DeadLetter:
    record: KafkaRecord
    error: str

    def headers(self) -> list[tuple[str, bytes]]:
        r = self.record
        return [
            *r.headers,
            ("error", self.error.encode()),
            ("source.topic", r.topic.encode()),
            ("source.partition", str(r.partition).encode()),
            ("source.offset", str(r.offset).encode()),
        ]


@dataclass
class BatchOutcome:
    dead: list[DeadLetter] = field(default_factory=list)
    #: per (topic, partition): the offset after the last record of the batch
    next_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    applied: dict[tuple[str, int], int] = field(default_factory=dict)
    failed: dict[tuple[str, int], int] = field(default_factory=dict)
    decode_s: float = 0.0
    write_s: float = 0.0

    @property
    def applied_total(self) -> int:
        return sum(self.applied.values())


@dataclass
class _Run:
    """Consecutive records of one kind (upserts or deletes)."""

    tombstones: bool
    items: list[tuple[KafkaRecord, Upsert | Tombstone]] = field(default_factory=list)


class BatchApplier:
    """Applies batches of one mapping: its collection, partition and format."""

    def __init__(
        self,
        writer: Writer,
        collection: str,
        partition: str = "",
        fmt: str = "json",
        registry: Callable[[int], Any] | None = None,
        schema_ttl_s: float = 5.0,
    ) -> None:
        self._writer = writer
        self._collection = collection
        self._partition = partition
        self._fmt = fmt
        self._registry = registry
        self._schema_ttl_s = schema_ttl_s
        self._decoder: RecordDecoder | None = None
        self._decoder_at = 0.0

    def apply(self, records: Sequence[KafkaRecord]) -> BatchOutcome:
        outcome = BatchOutcome()
        for r in records:
            tp = (r.topic, r.partition)
            outcome.next_offsets[tp] = max(outcome.next_offsets.get(tp, 0), r.offset + 1)
        decoder = self._current_decoder(outcome, records)
        if decoder is None:
            return outcome
        started = time.monotonic()
        with _gc_paused():
            runs = self._runs(decoder, records, outcome)
        decoded = time.monotonic()
        for run in runs:
            self._apply_run(decoder, run, outcome)
        outcome.decode_s, outcome.write_s = decoded - started, time.monotonic() - decoded
        return outcome

    # -- decoding --------------------------------------------------------------------------

    def _current_decoder(
        self, outcome: BatchOutcome, records: Sequence[KafkaRecord]
    ) -> RecordDecoder | None:
        """The collection's decoder; every record is dead-lettered when it does not exist."""
        now = time.monotonic()
        if self._decoder is None or now - self._decoder_at > self._schema_ttl_s:
            try:
                info = self._writer.describe_collection(self._collection)
            except MilvusError as exc:
                if exc.code != Code.COLLECTION_NOT_FOUND:
                    raise Backpressure(str(exc)) from exc
                self._decoder = None
                self._fail_missing(outcome, records)
                return None
            if self._decoder is None or self._decoder.schema != info.schema:
                self._decoder = RecordDecoder(
                    info.schema, self._fmt, self._registry, timestamptz.zone_of(info.properties)
                )
            self._decoder_at = now
        return self._decoder

    def _runs(
        self, decoder: RecordDecoder, records: Sequence[KafkaRecord], outcome: BatchOutcome
    ) -> list[_Run]:
        runs: list[_Run] = []
        decoded = decoder.decode_all([(r.key, r.value) for r in records])
        for r, item in zip(records, decoded, strict=True):
            if isinstance(item, RecordError):
                self._fail(outcome, r, str(item))
                continue
            tomb = isinstance(item, Tombstone)
            if not runs or runs[-1].tombstones != tomb:
                runs.append(_Run(tomb))
            runs[-1].items.append((r, item))
        return runs

    # -- writing ---------------------------------------------------------------------------

    def _apply_run(self, decoder: RecordDecoder, run: _Run, outcome: BatchOutcome) -> None:
        try:
            self._write(decoder, run.tombstones, _last_per_key(run.items))
        except MilvusError as exc:
            if exc.code not in _RECORD_CODES:
                raise Backpressure(str(exc)) from exc
            if exc.code == Code.COLLECTION_NOT_FOUND:
                self._decoder = None  # dropped: look it up again next batch
                self._fail_missing(outcome, [r for r, _ in run.items])
                return
            if len(run.items) == 1:
                self._fail(outcome, run.items[0][0], f"refused by the proxy: {exc.message}")
                return
            for item in run.items:  # find the records the proxy refuses
                self._apply_run(decoder, _Run(run.tombstones, [item]), outcome)
            return
        for r, _ in run.items:
            tp = (r.topic, r.partition)
            outcome.applied[tp] = outcome.applied.get(tp, 0) + 1

    def _write(
        self,
        decoder: RecordDecoder,
        tombstones: bool,
        items: list[tuple[KafkaRecord, Upsert | Tombstone]],
    ) -> None:
        pk = decoder.schema.primary
        pks = [item.pk for _, item in items]
        if tombstones:
            keys = pks if pk.data_type == DataType.VARCHAR else np.asarray(pks, dtype=np.int64)
            self._writer.delete_pks(self._collection, self._partition, keys)
            return
        rows = [item.values for _, item in items if isinstance(item, Upsert)]
        columns = columns_of(decoder, rows)
        if pk.auto_id:  # no key to upsert on: plain inserts, at-least-once
            self._writer.insert(self._collection, self._partition, columns, len(rows))
            return
        columns[pk.name] = pk_column(pk, pks)
        self._writer.upsert(self._collection, self._partition, columns, len(rows))

    def _fail_missing(self, outcome: BatchOutcome, records: Sequence[KafkaRecord]) -> None:
        for r in records:
            self._fail(outcome, r, f"collection {self._collection!r} does not exist")

    def _fail(self, outcome: BatchOutcome, record: KafkaRecord, error: str) -> None:
        outcome.dead.append(DeadLetter(record, error))
        tp = (record.topic, record.partition)
        outcome.failed[tp] = outcome.failed.get(tp, 0) + 1


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cycle collector paused while a batch is decoded: the records' dicts and lists
    hold no cycles, yet allocating thousands of them set off collections that walked every
    object of the process, 15 % of a batch's decoding in the benchmark (more in a standalone
    process holding the other roles' objects). Threads decoding at once leave it enabled at
    the end as long as it was enabled before any of them started."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _last_per_key(
    items: list[tuple[KafkaRecord, Upsert | Tombstone]],
) -> list[tuple[KafkaRecord, Upsert | Tombstone]]:
    """One item per primary key, the last one (auto_id rows have no key and all stay)."""
    if any(item.pk is None for _, item in items):
        return items
    last = {item.pk: i for i, (_, item) in enumerate(items)}
    if len(last) == len(items):
        return items
    return [items[i] for i in sorted(last.values())]


def pk_column(pk: FieldSchema, pks: Sequence[Any]) -> FieldColumn:
    """The decoded rows' primary keys as the insert's column of ``pk``."""
    data = list(pks) if pk.data_type == DataType.VARCHAR else np.asarray(pks, np.int64)
    return FieldColumn(pk.field_id, pk.name, pk.data_type, data, 0)


def columns_of(decoder: RecordDecoder, rows: list[dict[str, Any]]) -> dict[str, FieldColumn]:
    out: dict[str, FieldColumn] = {}
    for f in decoder.schema.fields:
        if f.is_primary:
            continue
        values = [row[f.name] for row in rows]
        valid = None
        if nullable.may_be_null(f):
            valid = np.array([v is not None for v in values], dtype=bool)
            filler = nullable.row_placeholder(f)
            values = [filler if v is None else v for v in values]
        if f.data_type in DENSE_VECTORS:
            data: Any = np.array(values, dtype=FIXED_DTYPES[f.data_type])  # faster than stack
        elif f.data_type in _LISTS:
            data = values
        else:
            data = np.asarray(values, dtype=_COLUMN_DTYPES.get(f.data_type, np.int64))
        column = FieldColumn(f.field_id, f.name, f.data_type, data, f.dim, valid)
        out[f.name] = nullable.settle(f, column)  # nulls take the default, as the proxy's do
    return out
