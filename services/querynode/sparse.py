"""Sparse float vectors in a shard store: the rows as clients wrote them, plus their
non-zeros laid out for search as an inverted index.

Search is exact. The non-zeros are kept sorted by index (a term, for BM25 rows), so a
query reads only the postings of its own indices: two binary searches per query index find
each run, and the runs' values, weighted by the query's, are summed per row
(``np.bincount``). Rows appended since the last sort (a growing segment's newest) are a
row-ordered tail, scanned whole; the tail is folded into the sorted runs once it holds a
quarter of them, so sorting costs O(log n) per non-zero over a segment's life.

The score is the inner product, or for a BM25 function's rows (term counts) the BM25 score,
each count saturated by ``k1`` and normalised by the row's length against the shard's
average (``services/querynode/bm25.py`` weights the query by IDF). SPARSE_INVERTED_INDEX and
SPARSE_WAND are exact in Milvus too (WAND only prunes), so both give these results;
``drop_ratio_search`` (dropping the query's smallest values) is applied to the query as
Milvus does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from vectide.services.common import vector_types

#: a tail of at most this many non-zeros is scanned rather than sorted in
_SCANNED_TAIL = 65_536

#: (indices, rows, values) of some non-zeros
Postings = tuple[np.ndarray, np.ndarray, np.ndarray]


def _empty() -> Postings:
    return np.empty(0, np.uint32), np.empty(0, np.int64), np.empty(0, np.float32)


def _joined(parts: list[Postings]) -> Postings:
    if not parts:
        return _empty()
    if len(parts) == 1:
        return parts[0]
    indices, rows, values = zip(*parts, strict=True)
    return np.concatenate(indices), np.concatenate(rows), np.concatenate(values)


class SparseColumn:
    """Sparse rows (Milvus's byte layout) with their non-zeros as an inverted index."""

    def __init__(self) -> None:
        self._rows: list[bytes] = []
        #: non-zeros sorted by index (stable: by row within an index)
        self._sorted: Postings = _empty()
        #: non-zeros of the rows appended since, in row order
        self._tail: list[Postings] = []
        self._lengths: np.ndarray | None = None
        #: the rows' bytes (kept, not summed per call: memory reports ask often)
        self._row_bytes = 0

    def __len__(self) -> int:
        return len(self._rows)

    def checked(self, values: Any, rows: int) -> list[bytes]:
        """``values`` as ``rows`` well-formed sparse rows, or ValueError."""
        out = list(values)
        if len(out) != rows:
            raise ValueError(f"{len(out)} values, expected {rows}")
        for row in out:
            if not isinstance(row, bytes):
                raise ValueError("sparse rows must be bytes")
            vector_types.check_sparse(row)
        return out

    def append(self, values: list[bytes]) -> None:
        start = len(self._rows)
        self._rows.extend(values)
        self._row_bytes += sum(len(v) for v in values)
        entries = [vector_types.sparse_entries(v) for v in values]
        counts = np.fromiter((len(i) for i, _ in entries), dtype=np.int64, count=len(entries))
        rows = np.repeat(np.arange(start, start + len(values), dtype=np.int64), counts)
        indices = np.concatenate([i for i, _ in entries]) if entries else np.empty(0, "<u4")
        weights = np.concatenate([w for _, w in entries]) if entries else np.empty(0, "<f4")
        self._tail.append((indices.astype(np.uint32), rows, weights.astype(np.float32)))
        self._lengths = None

    def view(self) -> list[bytes]:
        return self._rows

    @property
    def nbytes(self) -> int:
        """The non-zeros (16 bytes each) and the rows' own bytes."""
        nonzeros = len(self._sorted[0]) + sum(len(i) for i, _, _ in self._tail)
        return nonzeros * 16 + self._row_bytes

    def drop_head(self, rows: int) -> None:
        """Forget the first ``rows`` rows (handed off to a sealed segment) and their
        non-zeros; the others are numbered from 0 again (filtering keeps the sort)."""

        def kept(part: Postings) -> Postings:
            indices, owners, values = part
            keep = owners >= rows
            return indices[keep], owners[keep] - rows, values[keep]

        self._row_bytes -= sum(len(r) for r in self._rows[:rows])
        self._rows = self._rows[rows:]
        self._sorted = kept(self._sorted)
        self._tail = [kept(_joined(self._tail))]
        self._lengths = None

    def lengths(self) -> np.ndarray:
        """Each row's sum of values: a BM25 row's length in terms."""
        if self._lengths is None:
            _, rows, values = _joined([self._sorted, *self._tail])
            self._lengths = np.bincount(rows, weights=values, minlength=len(self._rows))
        return self._lengths

    def _postings(self, terms: np.ndarray) -> tuple[Postings, np.ndarray]:
        """The non-zeros whose index is one of ``terms`` (sorted, unique), and for each the
        position of its index in ``terms``."""
        self._fold_tail()
        indices, rows, values = self._sorted
        starts = np.searchsorted(indices, terms, side="left")
        ends = np.searchsorted(indices, terms, side="right")
        sizes = ends - starts
        # every run's positions, end to end: each position minus where its run begins in
        # the output, plus where it begins in the sorted arrays
        offsets = np.repeat(starts - np.cumsum(sizes) + sizes, sizes)
        at = np.arange(int(sizes.sum())) + offsets
        which = np.repeat(np.arange(len(terms)), sizes)
        t_indices, t_rows, t_values = _joined(self._tail)
        hit = np.isin(t_indices, terms)
        found = (
            np.concatenate([indices[at], t_indices[hit]]),
            np.concatenate([rows[at], t_rows[hit]]),
            np.concatenate([values[at], t_values[hit]]),
        )
        return found, np.concatenate([which, np.searchsorted(terms, t_indices[hit])])

    def _fold_tail(self) -> None:
        """Sort the tail into the inverted index once it is large beside it."""
        tail = sum(len(i) for i, _, _ in self._tail)
        if tail <= max(len(self._sorted[0]) // 4, _SCANNED_TAIL):
            return
        indices, rows, values = _joined([self._sorted, *self._tail])
        order = np.argsort(indices, kind="stable")
        self._sorted = indices[order], rows[order], values[order]
        self._tail = []

    def rows_with(self, terms: np.ndarray, minimum: int = 1) -> np.ndarray:
        """Rows holding at least ``minimum`` of ``terms`` (sorted, unique), each once."""
        (_, rows, _), _ = self._postings(terms)
        if minimum <= 1:
            return np.unique(rows)
        found, counts = np.unique(rows, return_counts=True)  # a row holds an index once
        return found[counts >= minimum]

    def term_stats(self, terms: np.ndarray, mask: np.ndarray) -> tuple[int, float, np.ndarray]:
        """Over the rows where ``mask`` holds: how many, their total length, and how many
        hold each of ``terms`` (sorted, unique)."""
        (_, rows, _), which = self._postings(terms)
        counts = np.bincount(which[mask[rows]], minlength=len(terms))
        return int(np.count_nonzero(mask)), float(self.lengths()[mask].sum()), counts

    def search(
        self,
        queries: list[bytes],
        k: int,
        mask: np.ndarray,
        params: dict[str, object],
        metric: str = "IP",
    ) -> tuple[np.ndarray, np.ndarray]:
        """Best ``k`` rows per query among rows where ``mask`` holds, by inner product or
        BM25 (the query already IDF-weighted, ``bm25.weighted``): ``(scores, rows)``,
        ``nq x k'``. Rows sharing no index with the query score 0 and are not hits, as in
        Milvus."""
        drop = vector_types.drop_ratio(params)
        saturate = _bm25(params, self.lengths()) if metric == "BM25" else None
        scores_out, rows_out = [], []
        for query in queries:
            q_idx, q_val = _dropped(*vector_types.sparse_entries(query), drop)
            (_, rows, stored), which = self._postings(q_idx.astype(np.uint32))
            seen = mask[rows]
            rows, stored, which = rows[seen], stored[seen], which[seen]
            if saturate is not None:
                stored = saturate(stored, rows)
            totals = np.bincount(rows, weights=stored * q_val[which], minlength=len(self._rows))
            candidates = np.unique(rows)
            order = np.argsort(-totals[candidates], kind="stable")[:k]
            scores_out.append(totals[candidates][order].astype(np.float32))
            rows_out.append(candidates[order])
        width = max((len(r) for r in rows_out), default=0)
        scores = np.full((len(queries), width), -np.inf, dtype=np.float32)
        rows = np.full((len(queries), width), -1, dtype=np.int64)
        for i, (s, r) in enumerate(zip(scores_out, rows_out, strict=True)):
            scores[i, : len(s)], rows[i, : len(r)] = s, r
        return scores, rows


def _bm25(params: dict[str, object], lengths: np.ndarray) -> Callable[..., np.ndarray]:
    """BM25's term-frequency part: a count saturated by ``k1``, shorter rows than the
    average (``bm25_avgdl``) counting more as ``b`` says."""
    k1, b = float(params["bm25_k1"]), float(params["bm25_b"])  # type: ignore[arg-type]
    avgdl = max(float(params["bm25_avgdl"]), 1e-9)  # type: ignore[arg-type]

    def saturate(tf: np.ndarray, rows: np.ndarray) -> np.ndarray:
        norm = k1 * (1 - b + b * lengths[rows] / avgdl)
        return (tf * (k1 + 1) / (tf + norm)).astype(np.float32)

    return saturate


def _dropped(indices: np.ndarray, values: np.ndarray, ratio: float):
    """The query without its ``ratio`` smallest (by magnitude) values, as Milvus's
    ``drop_ratio_search`` prunes it."""
    drop = int(len(values) * ratio)
    if not drop:
        return indices, values
    keep = np.sort(np.argsort(np.abs(values), kind="stable")[drop:])
    return indices[keep], values[keep]
