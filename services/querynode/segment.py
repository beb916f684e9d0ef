"""The rows of one shard (vchannel) held in memory, with timestamp-based visibility (MVCC).

Every row keeps its insert timestamp and the timestamp of the first delete that hit it. A
read at snapshot ``T`` sees a row iff ``insert_ts <= T < deleted_at``. A delete at ``d`` hits
rows of its key with ``insert_ts < d`` (strictly): an upsert writes the delete and the new
row at the same stamp, and the new row must survive its own delete.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import faiss
import numpy as np

from vectide.services.common import analyzer, geometry, nullable, vector_types
from vectide.services.common.index_spec import InterimIndex, chunk_spec, is_interim
from vectide.services.common.memory import faiss_bytes
from vectide.services.common.msgstream.message import (
    FIXED_DTYPES,
    DataType,
    DeleteMsg,
    FieldColumn,
    InsertMsg,
    row_width,
)
from vectide.services.common.nullable import with_nulls
from vectide.services.common.phrase import text_holds_phrase
from vectide.services.common.results import SIMILARITY_METRICS, take
from vectide.services.common.schema import (
    ANALYZER_PARAMS,
    ENABLE_MATCH,
    SCALAR_INDEX_ROW_BYTES,
    CollectionSchema,
    FieldSchema,
    IndexInfo,
)
from vectide.services.querynode.chunk_index import (
    DEFAULT_CHUNK_ROWS,
    ChunkIndexes,
)
from vectide.services.querynode.columns import (
    FixedColumn,
    IndexVectors,
    NullableVectors,
    ObjectColumn,
    json_bytes,
    json_documents,
)
from vectide.services.querynode.scalar_index import FieldChunks, ScalarIndexes, StoreIndex
from vectide.services.querynode.sparse import SparseColumn

NEVER = np.iinfo(np.int64).max
Column = FixedColumn | ObjectColumn | SparseColumn | IndexVectors | NullableVectors
#: rows compared between a column and its index before the column is dropped for it
_SAME_ROWS_SAMPLE = 64


@dataclass
class Candidates:
    """Row offsets a read may return, plus the snapshot it was taken at."""

    mask: np.ndarray
    snapshot_ts: int


class ShardStore:
    def __init__(
        self,
        schema: CollectionSchema,
        indexes: list[IndexInfo] | None = None,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
        interim: InterimIndex | None = None,
    ) -> None:
        """``interim``: the index growing chunks get; None: the collection's own (a sealed
        segment, whose index file is of that type)."""
        self.schema = schema
        self._chunk_rows = chunk_rows
        #: interim faiss indexes per vector field (FLAT needs none: it is exact)
        self.indexes: dict[str, ChunkIndexes] = {
            i.field_name: ChunkIndexes(chunk_spec(i, interim), chunk_rows)
            for i in indexes or []
            if is_interim(i, schema)
        }
        #: scalar indexes per field, over the same chunks (filters read them, not columns)
        self.scalar = ScalarIndexes(schema, chunk_rows)
        for i in indexes or []:
            self.scalar.add(*i.scalar_entry())
        pk = schema.primary
        self._pk_is_str = pk.data_type == DataType.VARCHAR
        self._pks: FixedColumn | ObjectColumn = (
            ObjectColumn() if self._pk_is_str else FixedColumn(np.dtype("<i8"))
        )
        #: varchar keys: key -> row offsets (deletes look rows up without a scan)
        self._str_rows: dict[str, list[int]] = {}
        self._insert_ts = FixedColumn(np.dtype("<i8"))
        self._deleted_at = FixedColumn(np.dtype("<i8"))
        #: the newest insert stamp (NEVER while hidden rows stay) and the oldest delete
        #: stamp, kept as rows change: a read between the two sees every row without a
        #: pass over the stamps (most reads; ~40 us per 100k rows otherwise)
        self._newest_insert = -1
        self._first_delete = NEVER
        self._partition = FixedColumn(np.dtype("<i8"))
        self._segment = FixedColumn(np.dtype("<i8"))
        #: deletes known before the rows they may hit arrive (a replay after loading)
        self._early_deletes: list[tuple[np.ndarray | list[str], np.ndarray]] = []
        self._types = {f.name: f.data_type for f in schema.fields}
        self._columns: dict[str, Column] = {
            f.name: _new_column(f) for f in schema.fields if not f.is_primary
        }
        #: nullable fields' validity masks, aligned with their columns
        self._valid: dict[str, FixedColumn] = {
            f.name: FixedColumn(np.dtype("?")) for f in schema.fields if f.nullable
        }
        #: TEXT_MATCH's inverted index of each ``enable_match`` field's analyzed text, built
        #: on the first match and extended as rows arrive (under its own lock: a hosted
        #: segment serves reads at once)
        self._matches: dict[str, SparseColumn] = {}
        self._match_lock = threading.Lock()
        #: squared norms of each float vector field's rows (L2 and COSINE reuse them)
        self._sq_norms: dict[str, FixedColumn] = {
            f.name: FixedColumn(np.dtype("<f4"))
            for f in schema.vector_fields
            if f.data_type in vector_types.FLOAT_TYPES
        }

    @property
    def num_rows(self) -> int:
        return len(self._insert_ts)

    def row_bytes(self) -> int:
        """A row's memory here (the schema's estimate), its scalar indexes' share included."""
        return self.schema.row_bytes() + SCALAR_INDEX_ROW_BYTES * len(self.scalar.fields)

    @property
    def pk_is_str(self) -> bool:
        return self._pk_is_str

    # -- writes ----------------------------------------------------------------------------

    def insert(self, msg: InsertMsg) -> None:
        """Append a message's rows, all or nothing: every column is checked and converted
        before the first one grows (a message that fails half-way would leave columns of
        different lengths, and every later row misaligned)."""
        n = msg.num_rows
        columns = self._complete(msg, n)
        values = self._checked(columns, n)
        valid = self._checked_validity(columns, n)
        pks = self._pks.checked(msg.pks, n)
        stamps = self._insert_ts.checked(msg.timestamps, n)
        for name, mask in valid.items():
            self._valid[name].append(mask)
        for name, data in values.items():
            _append(self._columns[name], data, valid.get(name))
            if name in self._sq_norms:
                wide = vector_types.as_float32(self._types[name], data)
                self._sq_norms[name].append(np.einsum("ij,ij->i", wide, wide))
        start = self.num_rows
        if self._pk_is_str:
            for i, key in enumerate(pks):
                self._str_rows.setdefault(key, []).append(start + i)
        self._pks.append(pks)
        self._insert_ts.append(stamps)
        if n:
            self._newest_insert = max(self._newest_insert, int(np.max(stamps)))
        self._deleted_at.append(np.full(n, NEVER, dtype=np.int64))
        self._partition.append(np.full(n, msg.partition_id, dtype=np.int64))
        self._segment.append(np.full(n, msg.segment_id, dtype=np.int64))
        for pks, stamps in self._early_deletes:
            self.delete_keys(pks, stamps, first_row=start)

    def add_field(self, field: FieldSchema) -> None:
        """A field AddCollectionField added: the rows held so far take its default value, or
        null (added fields are nullable); a field already known is left as it is."""
        if self.schema.field(field.name) is not None:
            return
        self.schema = self.schema.with_field(field)
        self.scalar.schema = self.schema
        self._types[field.name] = field.data_type
        rows = self.num_rows
        filled = nullable.absent(field, rows)
        if filled is None:
            raise ValueError(f"field {field.name} added to a collection must be nullable")
        column = _new_column(field)
        valid = np.ones(rows, bool) if filled.valid is None else filled.valid
        _append(column, column.checked(filled.data, rows), valid)
        self._columns[field.name] = column
        if field.nullable:
            mask = FixedColumn(np.dtype("?"))
            mask.append(valid)
            self._valid[field.name] = mask
        if field.data_type in vector_types.FLOAT_TYPES:  # the older rows' vectors: zeros
            norms = FixedColumn(np.dtype("<f4"))
            norms.append(np.zeros(rows, np.float32))
            self._sq_norms[field.name] = norms

    def _complete(self, msg: InsertMsg, rows: int) -> list[FieldColumn]:
        """The message's columns of the schema's fields, every one present. A field the
        message lacks (written before AddCollectionField added it, or by a proxy that had
        not heard of it yet) is all nulls or all its default value, as an insert leaving it
        out would be; nulls in a field with a default value (rows from before the field
        existed, read back from a binlog) take it. A column of a field this store does not
        know is left out."""
        given = {c.name: c for c in msg.fields}
        out: list[FieldColumn] = []
        for f in self.schema.fields:
            if f.is_primary:
                continue
            col = given.get(f.name)
            if col is None:
                col = nullable.absent(f, rows)
                if col is None:
                    raise ValueError(f"insert message lacks field {f.name}")
            elif f.default_value is not None and col.valid is not None:
                col = nullable.settle(f, replace(col))
            out.append(col)
        return out

    def _checked(self, columns: list[FieldColumn], rows: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for col in columns:
            try:
                out[col.name] = self._columns[col.name].checked(col.data, rows)
            except ValueError as exc:
                raise ValueError(f"field {col.name}: {exc}") from None
        return out

    def _checked_validity(self, columns: list[FieldColumn], rows: int) -> dict[str, np.ndarray]:
        """Each nullable field's mask for the message (all valid when it carries none); a
        null sent for a field that is not nullable is refused like any malformed column."""
        out: dict[str, np.ndarray] = {}
        for col in columns:
            column = self._valid.get(col.name)
            if column is None:
                if col.valid is not None and not col.valid.all():
                    raise ValueError(f"field {col.name}: nulls in a field that is not nullable")
                continue
            mask = np.ones(rows, dtype=bool) if col.valid is None else col.valid
            try:
                out[col.name] = column.checked(mask, rows)
            except ValueError as exc:
                raise ValueError(f"field {col.name} validity: {exc}") from None
        return out

    def delete(self, msg: DeleteMsg) -> int:
        """Apply a delete; returns how many live rows it hit."""
        return self.delete_keys(msg.pks, msg.timestamps, msg.partition_id)

    def delete_keys(
        self,
        pks: np.ndarray | list[str],
        stamps: np.ndarray,
        partition_id: int = -1,
        first_row: int = 0,
    ) -> int:
        """Delete ``pks[i]`` at ``stamps[i]``: rows of the key inserted before that stamp
        (among rows from ``first_row`` on)."""
        if not len(pks) or self.num_rows <= first_row:
            return 0
        rows, stamps = self._rows_of(pks, np.asarray(stamps, dtype=np.int64), first_row)
        if not len(rows):
            return 0
        insert_ts = self._insert_ts.view()[rows]
        deleted_at = self._deleted_at.view()
        hit = (insert_ts < stamps) & (stamps < deleted_at[rows])
        if partition_id >= 0:
            hit &= self._partition.view()[rows] == partition_id
        deleted_at[rows[hit]] = stamps[hit]
        if hit.any():
            self._first_delete = min(self._first_delete, int(stamps[hit].min()))
        return int(hit.sum())

    def _rows_of(
        self, keys: np.ndarray | list[str], stamps: np.ndarray, first_row: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        """Row offsets (from ``first_row``) holding the deleted keys, and each one's stamp."""
        if self._pk_is_str:
            rows, per_row = [], []
            for key, ts in zip(keys, stamps.tolist(), strict=True):
                for row in self._str_rows.get(key, ()):
                    if row >= first_row:
                        rows.append(row)
                        per_row.append(ts)
            return np.array(rows, dtype=np.int64), np.array(per_row, dtype=np.int64)
        pks = self._pks.view()
        keys = np.asarray(keys, dtype=np.int64)
        rows = np.flatnonzero(np.isin(pks[first_row:], keys)) + first_row
        if len(np.unique(stamps)) == 1:
            return rows, np.full(len(rows), stamps[0], dtype=np.int64)
        stamp_of = dict(zip(keys.tolist(), stamps.tolist(), strict=True))
        return rows, np.array([stamp_of[k] for k in pks[rows].tolist()], dtype=np.int64)

    def remember_deletes(self, pks: np.ndarray | list[str], stamps: np.ndarray) -> None:
        """Apply these deletes now and to rows inserted later (deltalogs read at load time
        may be older than rows the channel replay delivers afterwards)."""
        self._early_deletes.append((pks, np.asarray(stamps, dtype=np.int64)))
        self.delete_keys(pks, stamps)

    def drop_partition(self, partition_id: int, ts: int) -> int:
        """Hide the partition's rows from reads at ``ts`` on (its DropPartition's stamp);
        returns how many were live."""
        deleted_at = self._deleted_at.view()
        hit = (self._partition.view() == partition_id) & (deleted_at > ts)
        deleted_at[hit] = ts
        if hit.any():
            self._first_delete = min(self._first_delete, ts)
        return int(hit.sum())

    def partitions(self) -> set[int]:
        return set(np.unique(self._partition.view()).tolist())

    # -- segments ------------------------------------------------------------------------

    def segment_rows(self, segment_id: int) -> np.ndarray:
        return np.flatnonzero(self._segment.view() == segment_id)

    def deletes_of(self, rows: np.ndarray) -> tuple[np.ndarray | list[str], np.ndarray]:
        """(keys, delete stamps) of the deleted ones among ``rows``: what a sealed copy of
        these rows must also apply."""
        deleted_at = self._deleted_at.view()[rows]
        hit = rows[deleted_at < NEVER]
        return take(self._pks.view(), hit), self._deleted_at.view()[hit]

    def hide(self, rows: np.ndarray) -> None:
        """Make rows invisible to every read (a sealed copy now serves them)."""
        self._insert_ts.view()[rows] = NEVER
        if len(rows):
            self._newest_insert = NEVER

    def free_hidden_head(self) -> int:
        """Free the leading whole chunks of rows that are all hidden (handed off: a sealed
        copy serves them), with their interim indexes, or every row when all are hidden;
        returns how many rows went. Growing rows are handed off oldest first, so their
        memory comes back as segments flush; whole chunks only while rows stay, so the
        indexes of the chunks that stay are kept. Row offsets shift: call it under the
        shard lock, between reads."""
        shown = self._insert_ts.view() != NEVER
        head = int(np.argmax(shown)) if shown.any() else len(shown)
        chunks = head // self._chunk_rows
        # every row hidden (a flush handed them all off): the unindexed tail goes too
        rows = head if head == len(shown) else chunks * self._chunk_rows
        if not rows:
            return 0
        for column in self._row_columns():
            column.drop_head(rows)
        for indexes in self.indexes.values():
            indexes.drop_head(chunks)
        self.scalar.drop_head(chunks)
        with self._match_lock:
            for matches in self._matches.values():  # one not caught up yet starts afresh
                matches.drop_head(min(rows, len(matches)))
        self._measure_stamps()
        if self._pk_is_str:
            self._str_rows = {}
            for row, key in enumerate(self._pks.view()):
                self._str_rows.setdefault(key, []).append(row)
        return rows

    def _measure_stamps(self) -> None:
        """The stamp bounds again from the rows that stay."""
        inserted, deleted = self._insert_ts.view(), self._deleted_at.view()
        self._newest_insert = int(inserted.max()) if len(inserted) else -1
        self._first_delete = int(deleted.min()) if len(deleted) else NEVER

    def _row_columns(self) -> list[Column]:
        """Every column with a value per row: what dropping or reserving rows touches."""
        return [self._pks, *self._columns.values(), *self._bookkeeping_columns()]

    def _bookkeeping_columns(self) -> list[FixedColumn]:
        """The per-row columns that are not field values: stamps, partition, segment,
        validity, norms."""
        return [
            self._insert_ts,
            self._deleted_at,
            self._partition,
            self._segment,
            *self._valid.values(),
            *self._sq_norms.values(),
        ]

    # -- memory ------------------------------------------------------------------------------

    def reserve(self, rows: int) -> None:
        """Allocate the fixed-width columns for ``rows`` rows at once (a sealed segment)."""
        for column in self._row_columns():
            if isinstance(column, FixedColumn):
                column.reserve(rows)

    def install_index(self, field: str, index: faiss.Index) -> bool:
        """Take ``index`` over every row of ``field`` (a sealed segment's index file), and
        read the field's vectors from it from now on, freeing the column, when it keeps
        them exactly (HNSW's flat storage, IVF_FLAT's lists; COSINE indexes keep normalised
        copies, and half-float columns are smaller than the index: those columns stay).
        Returns whether the column went."""
        indexes = self.indexes[field]
        from_index = self._index_vectors(field, index)
        indexes.replace(index)  # an interim stand-in goes (``ChunkIndexes.stand_in``)
        if from_index is None or indexes.built() != [index]:
            return False
        self._columns[field] = from_index
        return True

    def _index_vectors(self, field: str, index: faiss.Index) -> IndexVectors | None:
        column = self._columns.get(field)
        if (
            not isinstance(column, FixedColumn)
            or self._types[field] != DataType.FLOAT_VECTOR
            or self.indexes[field].spec.metric == "COSINE"
            or index.ntotal != self.num_rows
            or not self.num_rows
            or not IndexVectors.holds_rows(index)
        ):
            return None
        from_index = IndexVectors(index)
        sample = np.linspace(0, self.num_rows - 1, _SAME_ROWS_SAMPLE).astype(np.int64)
        if not np.array_equal(from_index.take(sample), column.view()[sample]):
            return None  # another row order: keep the column
        return from_index

    def held_bytes(self) -> dict[str, int]:
        """Bytes this store's arrays hold, by kind: ``vectors`` (vector columns),
        ``vector_index`` (faiss), ``fields`` (the other columns, keys included), ``rows``
        (stamps, partitions, segments, validity, norms). What its memory is spent on."""
        vectors = {f.name for f in self.schema.vector_fields}
        held = {"vectors": 0, "vector_index": 0, "fields": self._pks.nbytes, "rows": 0}
        for name, column in self._columns.items():
            held["vectors" if name in vectors else "fields"] += getattr(column, "nbytes", 0)
        held["fields"] += sum(matches.nbytes for matches in self._matches.values())
        for column in self._bookkeeping_columns():
            held["rows"] += column.nbytes
        for indexes in self.indexes.values():
            held["vector_index"] += sum(faiss_bytes(i) for i in indexes.built())
        return held

    # -- scalar indexes ----------------------------------------------------------------------

    def scalar_chunk(self, field: FieldChunks, chunk: int) -> tuple[Any, np.ndarray | None]:
        """(values, validity) of one full chunk of an indexed field: what its index is built
        from. A full chunk never changes, so building needs no lock, taking the slice does."""
        start, end = chunk * field.chunk_rows, (chunk + 1) * field.chunk_rows
        name = field.spec.field
        values = self.pks() if field.spec.is_primary else self.column(name)
        valid = self.valid(name)
        return values[start:end], None if valid is None else valid[start:end]

    def build_scalar_indexes(self) -> int:
        """Index every full chunk not indexed yet (a sealed segment: itself); returns how
        many chunks were built."""
        built = 0
        while pending := self.scalar.pending(self.num_rows):
            for field, chunk in pending:
                field.install(chunk, field.spec.build(*self.scalar_chunk(field, chunk)))
                built += 1
        return built

    def scalar_views(self) -> dict[str, StoreIndex]:
        """The scalar indexes filters may use now, by field."""
        return self.scalar.views()

    def live(
        self,
        rows: np.ndarray,
        snapshot_ts: int,
        partition_ids: list[int] | None = None,
        expire_ts: int = 0,
    ) -> np.ndarray:
        """Which of ``rows`` a read at ``snapshot_ts`` sees (``candidates`` for some rows)."""
        return _seen(
            self._insert_ts.view()[rows],
            self._deleted_at.view()[rows],
            self._partition.view()[rows],
            snapshot_ts,
            partition_ids,
            expire_ts,
        )

    # -- reads -----------------------------------------------------------------------------

    def candidates(
        self, snapshot_ts: int, partition_ids: list[int] | None = None, expire_ts: int = 0
    ) -> Candidates:
        """The rows a read at ``snapshot_ts`` sees: inserted by then (and not before
        ``expire_ts``, the collection's TTL), not deleted by then, in the partitions."""
        if not expire_ts and self._newest_insert <= snapshot_ts < self._first_delete:
            live = np.ones(self.num_rows, dtype=bool)
        else:
            live = _live(self._insert_ts.view(), self._deleted_at.view(), snapshot_ts, expire_ts)
        mask = _in_partitions(live, self._partition.view(), partition_ids)
        return Candidates(mask, snapshot_ts)

    def pks(self) -> np.ndarray | list[str]:
        return self._pks.view()

    def column(self, name: str) -> np.ndarray | list:
        return self._columns[name].view()

    def raw_column(self, name: str) -> np.ndarray | list:
        """Values as clients wrote them (JSON as text)."""
        col = self._columns[name]
        return col.raw() if isinstance(col, ObjectColumn) else col.view()

    def valid(self, name: str) -> np.ndarray | None:
        """A nullable field's validity mask (True where the row has a value), else None."""
        column = self._valid.get(name)
        return None if column is None else column.view()

    def output(self, name: str, rows: np.ndarray) -> np.ndarray | list:
        """``rows`` of a column as results carry them: raw values, None at null rows; the
        primary key's are the rows' keys (a search grouped by it, an aggregate of it)."""
        column = self._columns.get(name)
        if column is None and name == self.schema.primary.name:
            return take(self.pks(), rows)
        if isinstance(column, IndexVectors | NullableVectors):  # vectors not kept as given
            values = column.take(rows)
        else:
            values = take(self.raw_column(name), rows)
        valid = self._valid.get(name)
        return values if valid is None else with_nulls(values, valid.view()[rows])

    def text_match(self, name: str, query: str, minimum: int = 1) -> np.ndarray:
        """Rows whose text in ``name`` holds at least ``minimum`` of ``query``'s distinct
        terms, both analyzed with the field's analyzer (TEXT_MATCH); ValueError when the
        field does not enable match."""
        analyze = self._match_analyzer(name)
        terms = _term_indexes(analyze.terms(query))
        if len(terms) < minimum:
            return np.zeros(self.num_rows, dtype=bool)
        with self._match_lock:
            rows = self._caught_up_matches(name, analyze).rows_with(terms, minimum)
        mask = np.zeros(self.num_rows, dtype=bool)  # sized after the index caught up
        mask[rows] = True
        return mask

    def phrase_match(self, name: str, query: str, slop: int) -> np.ndarray:
        """Rows whose text in ``name`` holds ``query``'s terms as a phrase, up to ``slop``
        position moves (PHRASE_MATCH, ``services.common.phrase``): the rows holding every
        term, from the match index, then each one's text analyzed with its positions."""
        analyze = self._match_analyzer(name)
        phrase = analyze.placed_terms(query)
        if not phrase:
            return np.zeros(self.num_rows, dtype=bool)
        terms = _term_indexes(t for t, _ in phrase)
        with self._match_lock:
            rows = self._caught_up_matches(name, analyze).rows_with(terms, len(terms))
        mask = np.zeros(self.num_rows, dtype=bool)  # sized after the index caught up
        if len(phrase) == 1:
            mask[rows] = True
            return mask
        for row, text in zip(rows.tolist(), self.output(name, rows), strict=True):
            mask[row] = text_holds_phrase(analyze.placed_terms(text), phrase, slop)
        return mask

    def _match_analyzer(self, name: str) -> analyzer.Analyzer:
        field = self.schema.field(name)
        if field is None or field.properties.get(ENABLE_MATCH) != "true":
            raise ValueError(f"field {name} does not enable match (enable_match=True)")
        return analyzer.analyzer_of(field.properties.get(ANALYZER_PARAMS))

    def _caught_up_matches(self, name: str, analyze: analyzer.Analyzer) -> SparseColumn:
        """The field's match index, extended to every row (under ``_match_lock``)."""
        matches = self._matches.setdefault(name, SparseColumn())
        if len(matches) < self.num_rows:
            texts = self.output(name, np.arange(len(matches), self.num_rows))
            matches.append([analyze.sparse_row(text) for text in texts])
        return matches

    def index_input(self, field: str, start: int, end: int) -> tuple[np.ndarray, np.ndarray | None]:
        """What an index over rows ``start:end`` takes (``IndexSpec.build``): the float32
        vectors of the rows holding one and, when some are null (a nullable field's), those
        rows' offsets from ``start`` (None: every row, in order)."""
        column = self._columns[field]
        if isinstance(column, NullableVectors):
            vectors, held = column.held(start, end)
            whole = len(held) == end - start
            return vector_types.as_float32(self._types[field], vectors), None if whole else held
        return vector_types.as_float32(self._types[field], column.view()[start:end]), None

    def term_stats(
        self, field: str, terms: np.ndarray, mask: np.ndarray
    ) -> tuple[int, float, np.ndarray]:
        """A sparse field's rows where ``mask`` holds: how many, their total length, and how
        many hold each of ``terms`` (BM25's statistics, ``SparseColumn.term_stats``)."""
        column = self._columns[field]
        if not isinstance(column, SparseColumn):
            raise ValueError(f"field {field} is not a sparse vector field")
        return column.term_stats(terms, mask)

    def search(
        self,
        field: str,
        queries: np.ndarray | list[bytes],
        metric: str,
        k: int,
        mask: np.ndarray,
        params: dict[str, object] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` per query among rows where ``mask`` holds: the field's interim index over
        its built chunks, exact search over the rest.

        Returns ``(scores, rows)``, each ``nq x k'``; missing hits have row -1. Scores follow
        Milvus: squared L2 distance (smaller is better), inner product, cosine similarity,
        HAMMING or JACCARD distance (binary vectors); sparse vectors: inner product.
        """
        data_type = self._types[field]
        allowed = vector_types.kind_of(data_type).metrics
        if metric not in allowed:
            raise ValueError(
                f"metric type {metric} not supported for {data_type.name} "
                f"({', '.join(sorted(allowed))})"
            )
        valid = self.valid(field)
        if valid is not None:  # a null vector is near nothing
            mask = mask & valid
        column = self._columns[field]
        if isinstance(column, SparseColumn):
            return column.search(list(queries), k, mask, params or {}, metric)
        if data_type == DataType.BINARY_VECTOR:
            return self._exact_binary(field, np.asarray(queries), metric, k, mask)
        indexes = self.indexes.get(field)
        if indexes is None or indexes.spec.metric != metric or not indexes.indexed_rows:
            return self._exact(field, queries, metric, k, mask)
        covered = indexes.indexed_rows
        indexed = indexes.search(queries, k, mask[:covered], params or {})
        if covered >= len(mask) and len(indexes.built()) == 1:  # a sealed segment's index
            return indexed
        exact = self._exact(field, queries, metric, k, mask, start=covered)
        return _merge(metric, k, indexed, exact)

    def _exact(
        self,
        field: str,
        queries: np.ndarray,
        metric: str,
        k: int,
        mask: np.ndarray,
        start: int = 0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Exact search over the rows from ``start`` on where ``mask`` holds. When they are
        all visible (the usual tail of a growing shard) the vectors are read in place."""
        nq = len(queries)
        seen = mask[start:]
        visible = int(np.count_nonzero(seen))
        if not visible or k <= 0:
            return np.empty((nq, 0), np.float32), np.empty((nq, 0), np.int64)
        column = self._columns[field]
        sq_norms = self._sq_norms[field].view()[start : start + len(seen)]
        if visible == len(seen) and not isinstance(column, NullableVectors):
            rows = np.arange(start, start + len(seen))
            base = column.view()[start : start + len(seen)]  # in place
        else:  # (a nullable field's mask holds only rows with a vector)
            local = np.flatnonzero(seen)
            base, sq_norms = column.take(start + local), sq_norms[local]
            rows = local + start
        vectors = vector_types.as_float32(self._types[field], base)
        scores = _scores(vectors, sq_norms, queries.astype(np.float32, copy=False), metric)
        return _top_k(scores, rows, k, metric)

    def _exact_binary(
        self, field: str, queries: np.ndarray, metric: str, k: int, mask: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Binary vectors are searched exactly (BIN_FLAT, and BIN_IVF_FLAT too: a superset
        of its recall)."""
        rows = np.flatnonzero(mask)
        if not len(rows) or k <= 0:
            nq = len(queries)
            return np.empty((nq, 0), np.float32), np.empty((nq, 0), np.int64)
        base = self._columns[field].take(rows)
        scores = vector_types.binary_scores(queries.astype(np.uint8), base, metric)
        return _top_k(scores, rows, k, metric)


def _seen(
    insert_ts: np.ndarray,
    deleted_at: np.ndarray,
    partition: np.ndarray,
    snapshot_ts: int,
    partition_ids: list[int] | None,
    expire_ts: int = 0,
) -> np.ndarray:
    """Rows inserted by ``snapshot_ts`` (not before ``expire_ts``), not deleted by then, in
    the partitions (if any)."""
    live = _live(insert_ts, deleted_at, snapshot_ts, expire_ts)
    return _in_partitions(live, partition, partition_ids)


def _live(
    insert_ts: np.ndarray, deleted_at: np.ndarray, snapshot_ts: int, expire_ts: int = 0
) -> np.ndarray:
    live = (insert_ts <= snapshot_ts) & (deleted_at > snapshot_ts)
    if expire_ts:
        live &= insert_ts >= expire_ts
    return live


def _in_partitions(
    mask: np.ndarray, partition: np.ndarray, partition_ids: list[int] | None
) -> np.ndarray:
    """``mask`` narrowed to rows of ``partition_ids`` (None or empty: every partition)."""
    if partition_ids:  # sorting: numpy's default lookup table costs ~1 ms per 100k rows here
        mask &= np.isin(partition, partition_ids, kind="sort")
    return mask


def _top_k(
    scores: np.ndarray, rows: np.ndarray, k: int, metric: str
) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of ``scores`` (``nq x len(rows)``) per query, best first."""
    nq = len(scores)
    k = min(k, len(rows))
    better = -scores if metric in SIMILARITY_METRICS else scores
    top = (
        np.argpartition(better, k - 1, axis=1)[:, :k]
        if k < len(rows)
        else (np.tile(np.arange(len(rows)), (nq, 1)))
    )
    order = np.take_along_axis(better, top, axis=1).argsort(axis=1, kind="stable")
    top = np.take_along_axis(top, order, axis=1)
    return np.take_along_axis(scores, top, axis=1), rows[top]


def _merge(metric: str, k: int, *parts: tuple[np.ndarray, np.ndarray]):
    """Best ``k`` per query over several (scores, rows) parts; -1 rows sort last."""
    scores = np.hstack([p[0] for p in parts]).astype(np.float32)
    rows = np.hstack([p[1] for p in parts])
    worst = -np.inf if metric in SIMILARITY_METRICS else np.inf
    scores = np.where(rows >= 0, scores, worst)
    better = -scores if metric in SIMILARITY_METRICS else scores
    order = np.argsort(better, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, order, axis=1), np.take_along_axis(rows, order, axis=1)


def _scores(vectors: np.ndarray, sq_norms: np.ndarray, queries: np.ndarray, metric: str):
    dots = queries @ vectors.T  # nq x n
    if metric == "IP":
        return dots
    q_sq = np.einsum("ij,ij->i", queries, queries)[:, None]
    if metric == "L2":
        return np.maximum(q_sq + sq_norms[None, :] - 2 * dots, 0)
    denom = np.sqrt(q_sq) * np.sqrt(sq_norms)[None, :]
    return np.divide(dots, denom, out=np.zeros_like(dots), where=denom > 0)


def _append(column: Column, values: Any, valid: np.ndarray | None) -> None:
    """A message's rows of one column; a nullable vector column keeps only the vectors of
    the rows ``valid`` marks."""
    if isinstance(column, NullableVectors):
        column.append(values, valid)
    else:
        column.append(values)


def _new_column(field: FieldSchema) -> Column:
    if field.is_vector and field.nullable and field.data_type in FIXED_DTYPES:
        return NullableVectors(FIXED_DTYPES[field.data_type], row_width(field.data_type, field.dim))
    if field.data_type in FIXED_DTYPES:
        return FixedColumn(FIXED_DTYPES[field.data_type], dim=row_width(field.data_type, field.dim))
    if field.data_type == DataType.SPARSE_FLOAT_VECTOR:
        return SparseColumn()
    if field.data_type in (DataType.JSON, DataType.ARRAY):
        return ObjectColumn(json_documents, json_bytes)
    if field.data_type == DataType.GEOMETRY:
        return ObjectColumn(lambda texts: list(geometry.column(texts)), geometry.memory_bytes)
    return ObjectColumn()


def _term_indexes(terms: Iterable[str]) -> np.ndarray:
    """Terms' sparse indexes, sorted and unique (what ``SparseColumn.rows_with`` takes)."""
    return np.unique(np.array([analyzer.term_index(t) for t in terms], dtype=np.uint32))
