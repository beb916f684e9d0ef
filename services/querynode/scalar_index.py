"""Scalar indexes of a store's rows (STL_SORT, TRIE, INVERTED, BITMAP), per chunk.

A filter on an indexed field asks the index for the rows a predicate holds on instead of
reading the whole column: O(log n + matches) rather than O(n). Two structures serve the four
Milvus index types:

- :class:`SortedValues` (numbers, booleans, strings): the chunk's non-null values in
  ascending order with the row each came from. A comparison or a ``like "prefix%"`` is one
  contiguous run of it, found by binary search (STL_SORT, TRIE); it is also an inverted list,
  every distinct value's rows being one run (INVERTED and BITMAP on scalar fields).
- :class:`ArrayElements` (ARRAY fields, INVERTED or BITMAP): element -> the rows holding it,
  which ``array_contains``/``_all``/``_any`` combine.

Each comparison is made with the same operator on the same numpy or Python value the scan
evaluates (``services/common/expr/evaluate.py``), only on O(log n) of them: the index agrees
with the scan on every row, casts and NaN included. Null rows are in no index (a predicate
on them is unknown, never true). Rows are chunk-local; :class:`StoreIndex` offsets them.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import shapely

from vectide.services.common import geometry
from vectide.services.common.expr.evaluate import (
    SCALAR_KINDS,
    json_key,
    like_literals,
    like_regex,
    lookup_path,
)
from vectide.services.common.expr.parser import ExprError, Field, PathKey, parse
from vectide.services.common.msgstream.message import FIXED_DTYPES, DataType
from vectide.services.common.schema import CollectionSchema, ngram_sizes
from vectide.services.querynode.chunk_index import DEFAULT_CHUNK_ROWS, BuiltChunks


class SortedValues:
    """A chunk's non-null values sorted ascending (NaN last), with their rows."""

    def __init__(self, values: np.ndarray, rows: np.ndarray, kind: str) -> None:
        self.values = values
        self.rows = rows
        self.kind = kind
        #: values[:ordered] compare with numbers; NaN (after them) compares with nothing
        self.ordered = len(values)
        if values.dtype.kind == "f":
            self.ordered = int(np.searchsorted(np.isnan(values), True))

    @classmethod
    def build(cls, values: Any, valid: np.ndarray | None, kind: str) -> SortedValues:
        rows = np.arange(len(values), dtype=np.int64)
        if valid is not None:
            rows = rows[valid]
        if isinstance(values, np.ndarray):
            picked = values[rows]
            order = np.argsort(picked, kind="stable")
        else:  # strings: Python's sort, the order the scan's comparisons follow
            picked = np.empty(len(rows), dtype=object)
            picked[:] = [values[i] for i in rows.tolist()]
            order = np.array(sorted(range(len(picked)), key=picked.__getitem__), dtype=np.int64)
        return cls(picked[order], rows[order], kind)

    def with_nan_rows(self, rows: np.ndarray) -> SortedValues:
        """These values with NaN rows after them (unordered: a NaN compares with nothing,
        and ``!=`` holds on it), for Python numbers, which ``build`` cannot sort with NaN."""
        if not len(rows):
            return self
        values = np.concatenate([self.values, np.full(len(rows), float("nan"), dtype=object)])
        sorted_values = SortedValues(values, np.concatenate([self.rows, rows]), self.kind)
        sorted_values.ordered = len(self.values)
        return sorted_values

    def present(self) -> np.ndarray:
        return self.rows

    def _first_false(self, holds: Callable[[Any], Any]) -> int:
        """The first position among the ordered values where ``holds`` (true, then false
        along the sorted values) is false."""
        lo, hi = 0, self.ordered
        values = self.values
        while lo < hi:
            mid = (lo + hi) // 2
            if holds(values[mid]):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _probe(self, value: Any) -> Any:
        """``value`` as the column's dtype when numpy compares them so (NEP 50: a Python
        number meets a column at the column's precision) and it fits; None otherwise (a
        float against integers, an integer out of range: compared one by one instead)."""
        dtype = self.values.dtype
        if dtype.kind == "f" and type(value) in (int, float):
            try:
                return dtype.type(value)
            except OverflowError:
                return None
        if dtype.kind in "iu" and type(value) is int:
            limits = np.iinfo(dtype)
            return dtype.type(value) if limits.min <= value <= limits.max else None
        return None

    def _less(self, value: Any, or_equal: bool) -> int:
        """How many ordered values are ``< value`` (or ``<=``)."""
        probe = self._probe(value)
        if probe is not None:  # numpy's binary search, same comparisons
            side = "right" if or_equal else "left"
            return int(np.searchsorted(self.values[: self.ordered], probe, side=side))
        if or_equal:
            return self._first_false(lambda v: v <= value)
        return self._first_false(lambda v: v < value)

    def _equal_run(self, value: Any) -> tuple[int, int]:
        return self._less(value, False), self._less(value, True)

    def _bounds(self, op: str, value: Any) -> tuple[int, int]:
        """The run of values where ``value op`` holds (``!=`` excepted: two runs)."""
        if op == "==":
            return self._equal_run(value)
        if op in ("<", ">="):
            less = self._less(value, False)
            return (0, less) if op == "<" else (less, self.ordered)
        less_equal = self._less(value, True)
        return (0, less_equal) if op == "<=" else (less_equal, self.ordered)

    def compare(self, op: str, value: Any) -> np.ndarray:
        if op == "!=":
            start, end = self._equal_run(value)
            return np.concatenate([self.rows[:start], self.rows[end:]])  # NaN rows included
        start, end = self._bounds(op, value)
        return self.rows[start:end]

    def compare_all(self, conditions: Sequence[tuple[str, Any]]) -> np.ndarray:
        """Rows where every ``(op, value)`` holds (no ``!=``): a range is one run."""
        start, end = 0, self.ordered
        for op, value in conditions:
            low, high = self._bounds(op, value)
            start, end = max(start, low), min(end, high)
        return self.rows[start : max(start, end)]

    def in_list(self, values: Sequence[Any]) -> np.ndarray:
        runs = self._in_runs(values)
        if runs is None:
            runs = [self._equal_run(value) for value in dict.fromkeys(values)]
        return _concat([self.rows[start:end] for start, end in runs if end > start])

    def _in_runs(self, values: Sequence[Any]) -> list[tuple[int, int]] | None:
        """The equal runs of a numeric list in one vectorised search, matching the scan's
        np.isin (floats at the column's precision, integers exact); None: one by one."""
        dtype = self.values.dtype
        if self.kind != "number" or dtype.kind == "O":  # JSON numbers: compared as Python's
            return None
        wanted = np.unique(np.asarray(values, dtype=dtype if dtype.kind == "f" else None))
        if dtype.kind in "iu":
            if wanted.dtype.kind not in "iu":
                return None  # floats against integers: compared one by one
            limits = np.iinfo(dtype)
            wanted = wanted[(wanted >= limits.min) & (wanted <= limits.max)].astype(dtype)
        ordered = self.values[: self.ordered]
        starts = np.searchsorted(ordered, wanted, side="left")
        ends = np.searchsorted(ordered, wanted, side="right")
        return list(zip(starts.tolist(), ends.tolist(), strict=True))

    def prefix(self, prefix: str) -> np.ndarray:
        start = self._first_false(lambda v: v < prefix)
        end = self._first_false(lambda v: v < prefix or v.startswith(prefix))
        return self.rows[start:end]


class ArrayElements:
    """A chunk's ARRAY rows as element -> the rows holding it (each row once)."""

    kind = "array"

    def __init__(self, postings: dict[Any, np.ndarray], lists: np.ndarray, present: np.ndarray):
        self.postings = postings
        self.lists = lists
        self._present = present

    @classmethod
    def build(cls, rows: Sequence[Any], valid: np.ndarray | None) -> ArrayElements:
        postings: dict[Any, list[int]] = {}
        lists: list[int] = []
        for i, row in enumerate(rows):
            if type(row) is not list or (valid is not None and not valid[i]):
                continue
            lists.append(i)
            for key in {json_key(item) for item in row}:
                postings.setdefault(key, []).append(i)
        present = np.arange(len(rows), dtype=np.int64)
        if valid is not None:
            present = present[valid]
        return cls(
            {k: np.array(v, dtype=np.int64) for k, v in postings.items() if k is not None},
            np.array(lists, dtype=np.int64),
            present,
        )

    def present(self) -> np.ndarray:
        return self._present

    def contains(self, values: Sequence[Any], match_all: bool) -> np.ndarray:
        wanted = {json_key(value) for value in values}
        found = [self.postings.get(key, _EMPTY) for key in wanted]
        if not match_all:
            return np.unique(_concat(found))
        result = self.lists
        for rows in sorted(found, key=len):
            result = np.intersect1d(result, rows, assume_unique=True)
        return result


class Ngrams:
    """A chunk's VARCHAR rows as n-gram -> the rows holding it (NGRAM, Milvus 2.6): a
    ``like`` pattern's candidates are the rows holding every n-gram of its literal runs, then
    the pattern is matched on their texts, with the scan's matcher. A pattern with no run as
    long as ``min_gram`` cannot be narrowed (``narrows``): the planner scans it instead."""

    kind = "ngram"

    def __init__(self, texts: list[str], rows: np.ndarray, grams: tuple[int, int]) -> None:
        self._texts = dict(zip(rows.tolist(), texts, strict=True))
        self._rows = rows
        self.min_gram, self.max_gram = grams
        postings: dict[str, list[int]] = {}
        for row, text in zip(rows.tolist(), texts, strict=True):
            for gram in self._grams(text, self.max_gram, self.min_gram):
                postings.setdefault(gram, []).append(row)
        self._postings = {g: np.array(r, dtype=np.int64) for g, r in postings.items()}

    @classmethod
    def build(cls, values: Any, valid: np.ndarray | None, grams: tuple[int, int]) -> Ngrams:
        rows = np.arange(len(values), dtype=np.int64)
        if valid is not None:
            rows = rows[valid]
        return cls([values[i] for i in rows.tolist()], rows, grams)

    @staticmethod
    def _grams(text: str, longest: int, shortest: int) -> set[str]:
        return {
            text[start : start + n]
            for n in range(shortest, longest + 1)
            for start in range(len(text) - n + 1)
        }

    def present(self) -> np.ndarray:
        return self._rows

    def narrows(self, pattern: str) -> bool:
        """Whether ``pattern`` has a literal run this index can look up (else every text is
        a candidate, and a scan of the column is cheaper)."""
        return any(len(run) >= self.min_gram for run in like_literals(pattern))

    def like(self, pattern: str) -> np.ndarray:
        grams = set()
        for run in like_literals(pattern):
            if len(run) >= self.min_gram:
                n = min(len(run), self.max_gram)
                grams |= self._grams(run, n, n)
        postings = sorted((self._postings.get(g, _EMPTY) for g in grams), key=len)
        candidates = postings[0] if postings else self._rows
        for rows in postings[1:]:  # the rarest first: the candidates only shrink
            if not len(candidates):
                break
            at = np.minimum(np.searchsorted(rows, candidates), len(rows) - 1)
            candidates = candidates[rows[at] == candidates] if len(rows) else _EMPTY
        matches = like_regex(pattern).fullmatch
        texts = self._texts
        return candidates[[matches(texts[row]) is not None for row in candidates.tolist()]]


class GeometryTree:
    """A chunk's GEOMETRY rows in an R-tree of their bounding boxes (RTREE, Milvus 2.6.4):
    an operator's candidates are the rows whose box meets the query's search box
    (``geometry.search_box``), and on them the scan's own GEOS call decides; so the index
    agrees with the scan on every row."""

    def __init__(self, geometries: np.ndarray, rows: np.ndarray) -> None:
        self._geometries = geometries
        self._rows = rows
        self._tree = shapely.STRtree(geometries)

    @classmethod
    def build(cls, values: Any, valid: np.ndarray | None) -> GeometryTree:
        geometries = np.fromiter(values, dtype=object, count=len(values))
        held = ~shapely.is_missing(geometries)
        if valid is not None:
            held &= np.asarray(valid, dtype=bool)
        rows = np.flatnonzero(held)
        return cls(geometries[rows], rows)

    def present(self) -> np.ndarray:
        return self._rows

    def spatial(self, op: str, query: shapely.Geometry, distance: float) -> np.ndarray:
        box = geometry.search_box(op, query, distance)
        candidates = self._tree.query(box) if box is not None else None
        if candidates is None or len(candidates) * 4 > len(self._rows):
            # a wide query: GEOS runs faster over the whole array, in row order, than over
            # a gathered quarter or more of it (measured 6 ms against 12 ms at 200k points)
            return self._rows[geometry.evaluate(op, self._geometries, query, distance)]
        hits = geometry.evaluate(op, self._geometries[candidates], query, distance)
        return self._rows[np.sort(candidates[hits])]


ChunkIndex = SortedValues | ArrayElements | Ngrams | GeometryTree
_EMPTY = np.empty(0, dtype=np.int64)


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else _EMPTY


@dataclass(frozen=True)
class ScalarSpec:
    """A scalar index as a query node builds it: the field, how its values are read."""

    field: str
    index_type: str
    data_type: DataType
    is_primary: bool
    #: NGRAM's (min_gram, max_gram); None for the other index types
    grams: tuple[int, int] | None = None
    #: a scalar field's index answers negations (a null row is in none, as in the scan)
    positive_only = False

    @property
    def kind(self) -> str:
        if self.grams is not None:
            return "ngram"
        if self.data_type == DataType.ARRAY:
            return "array"
        if self.data_type == DataType.GEOMETRY:
            return "geometry"
        if self.data_type == DataType.VARCHAR:
            return "string"
        if self.data_type == DataType.TIMESTAMPTZ:
            return "timestamptz"  # compared with ISO literals only, as the scan compares
        return "bool" if self.data_type == DataType.BOOL else "number"

    def build(self, values: Any, valid: np.ndarray | None) -> ChunkIndex:
        if self.grams is not None:
            return Ngrams.build(values, valid, self.grams)
        if self.kind == "array":
            return ArrayElements.build(values, valid)
        if self.kind == "geometry":
            return GeometryTree.build(values, valid)
        if self.kind != "string":
            values = np.asarray(values, dtype=FIXED_DTYPES[self.data_type])
        return SortedValues.build(values, valid, self.kind)


#: a JSON path index's cast type -> the kind of values it holds, which a JSON value of that
#: kind (``evaluate.SCALAR_KINDS``: a bool is no number) or a list has
JSON_CAST_KINDS = {
    "VARCHAR": "string",
    "DOUBLE": "number",
    "BOOL": "bool",
    "ARRAY_VARCHAR": "array",
    "ARRAY_DOUBLE": "array",
    "ARRAY_BOOL": "array",
}


@dataclass(frozen=True)
class JsonPathSpec:
    """A JSON path index (Milvus's ``json_path`` and ``json_cast_type``): the values at the
    path that have the cast type's kind, compared as the scan compares JSON values (Python
    objects, so ``1`` equals ``1.0`` and large integers stay exact). Rows whose value is
    missing or of another kind are in no index, but the scan's ``not``, ``not in`` and
    ``not like`` hold on them, so it answers positive predicates only; an array cast
    indexes every element of a list, which ``json_contains`` matches exactly as the scan."""

    field: str
    path: tuple[PathKey, ...]
    cast_type: str
    #: NGRAM's (min_gram, max_gram) over the path's strings; None for an INVERTED index
    grams: tuple[int, int] | None = None
    is_primary = False
    positive_only = True

    @property
    def kind(self) -> str:
        return "ngram" if self.grams is not None else JSON_CAST_KINDS[self.cast_type]

    def build(self, documents: Any, valid: np.ndarray | None) -> ChunkIndex:
        values = [lookup_path(document, self.path) for document in documents]
        if valid is not None:  # a null JSON row has no value at any path
            values = [v if ok else None for v, ok in zip(values, valid.tolist(), strict=True)]
        if self.grams is not None:
            return Ngrams.build(values, np.array([type(v) is str for v in values]), self.grams)
        if self.kind == "array":
            return ArrayElements.build(values, np.array([type(v) is list for v in values]))
        held = np.array([SCALAR_KINDS.get(type(v)) == self.kind for v in values], dtype=bool)
        if self.kind != "number":
            return SortedValues.build(values, held, self.kind)
        nan = np.array([type(v) is float and math.isnan(v) for v in values], dtype=bool)
        return SortedValues.build(values, held & ~nan, self.kind).with_nan_rows(
            np.flatnonzero(held & nan)
        )


class FieldChunks(BuiltChunks[ChunkIndex]):
    """One field's (or JSON path's) scalar indexes over a store's full chunks."""

    def __init__(
        self, spec: ScalarSpec | JsonPathSpec, chunk_rows: int = DEFAULT_CHUNK_ROWS
    ) -> None:
        super().__init__(chunk_rows)
        self.spec = spec

    def view(self) -> StoreIndex:
        return StoreIndex(self.spec.kind, self.chunk_rows, self.built(), self.spec.positive_only)


class StoreIndex:
    """A field's built chunks as one index over the store's rows ``[0, covered)``: what the
    filter planner (``services/common/expr/indexed.py``) asks; answers are store rows."""

    def __init__(
        self, kind: str, chunk_rows: int, chunks: list[ChunkIndex], positive_only: bool = False
    ) -> None:
        self.kind = kind
        self.positive_only = positive_only
        self.covered = chunk_rows * len(chunks)
        self.present_count = sum(len(c.present()) for c in chunks)
        self._chunk_rows = chunk_rows
        self._chunks = chunks

    def _each(self, ask: Callable[[Any], np.ndarray]) -> np.ndarray:
        parts = [ask(c) + i * self._chunk_rows for i, c in enumerate(self._chunks)]
        return parts[0] if len(parts) == 1 else _concat(parts)

    def present(self) -> np.ndarray:
        return self._each(lambda c: c.present())

    def compare(self, op: str, value: Any) -> np.ndarray:
        return self._each(lambda c: c.compare(op, value))

    def compare_all(self, conditions: Sequence[tuple[str, Any]]) -> np.ndarray:
        return self._each(lambda c: c.compare_all(conditions))

    def in_list(self, values: Sequence[Any]) -> np.ndarray:
        return self._each(lambda c: c.in_list(values))

    def prefix(self, prefix: str) -> np.ndarray:
        return self._each(lambda c: c.prefix(prefix))

    def contains(self, values: Sequence[Any], match_all: bool) -> np.ndarray:
        return self._each(lambda c: c.contains(values, match_all))

    def like(self, pattern: str) -> np.ndarray:
        return self._each(lambda c: c.like(pattern))

    def narrows(self, pattern: str) -> bool:
        return all(c.narrows(pattern) for c in self._chunks)

    def spatial(self, op: str, query: shapely.Geometry, distance: float) -> np.ndarray:
        return self._each(lambda c: c.spatial(op, query, distance))


class ScalarIndexes:
    """A store's scalar indexes, by field; new ones can be added while it serves reads (an
    index created after the collection was loaded)."""

    def __init__(self, schema: CollectionSchema, chunk_rows: int) -> None:
        #: the fields ``add`` may index (a store replaces it when a field is added)
        self.schema = schema
        self._chunk_rows = chunk_rows
        self._lock = threading.Lock()
        self.fields: dict[str, FieldChunks] = {}

    def add(self, key: str, index_type: str) -> bool:
        """Index ``key`` from now on (built by ``build``): a scalar field or a JSON path with
        what it holds (``IndexInfo.scalar_entry``). False if it already is, or names no
        scalar field or JSON path of the schema."""
        spec = self._spec(key, index_type)
        if spec is None:
            return False
        with self._lock:
            if key in self.fields:
                return False
            self.fields[key] = FieldChunks(spec, self._chunk_rows)
        return True

    def _spec(self, key: str, index_type: str) -> ScalarSpec | JsonPathSpec | None:
        field = self.schema.field(key)
        grams = ngram_sizes(index_type)
        if field is not None and not field.is_vector and field.data_type != DataType.JSON:
            return ScalarSpec(key, index_type, field.data_type, field.is_primary, grams)
        if index_type not in JSON_CAST_KINDS and grams is None:
            return None
        try:
            node = parse(key)
        except ExprError:
            return None
        field = self.schema.field(node.name) if isinstance(node, Field) else None
        if field is None or field.data_type != DataType.JSON:
            return None
        cast = "VARCHAR" if grams is not None else index_type
        return JsonPathSpec(field.name, node.path, cast, grams)

    def views(self) -> dict[str, StoreIndex]:
        with self._lock:
            fields = list(self.fields.items())
        return {name: chunks.view() for name, chunks in fields if chunks.indexed_rows}

    def drop_head(self, chunks: int) -> None:
        with self._lock:
            fields = list(self.fields.values())
        for field in fields:
            field.drop_head(chunks)

    def pending(self, num_rows: int) -> list[tuple[FieldChunks, int]]:
        """(field, chunk) of every full chunk not indexed yet."""
        with self._lock:
            fields = list(self.fields.values())
        out = []
        for field in fields:
            chunk = field.next_chunk(num_rows)
            if chunk is not None:
                out.append((field, chunk))
        return out
