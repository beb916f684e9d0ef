"""Sparse float vectors in a shard store: the rows as clients wrote them, plus one flat
(row, index, value) listing of every non-zero, grown as rows arrive.

Search is exact: for each query, the non-zeros whose index the query also has are weighted
by the query's value and summed per row (``np.bincount``), so a query costs one pass over the
stored non-zeros. The score is the inner product, or for a BM25 function's rows (term counts)
the BM25 score, each count saturated by ``k1`` and normalised by the row's length against
the shard's average (``services/querynode/bm25.py`` weights the query by IDF).
SPARSE_INVERTED_INDEX and SPARSE_WAND are exact in Milvus too (WAND only prunes), so both
give these results; ``drop_ratio_search`` (dropping the query's smallest values) is applied
to the query as Milvus does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vectide.services.common import vector_types


class SparseColumn:
    """Sparse rows (Milvus's byte layout) with their non-zeros flattened for search."""

    def __init__(self) -> None:
        self._rows: list[bytes] = []
        self._parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._flat: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
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
        owners = np.repeat(np.arange(start, start + len(values), dtype=np.int64), counts)
        indices = np.concatenate([i for i, _ in entries]) if entries else np.empty(0, "<u4")
        weights = np.concatenate([w for _, w in entries]) if entries else np.empty(0, "<f4")
        self._parts.append((owners, indices.astype(np.uint32), weights.astype(np.float32)))
        self._flat = None
        self._lengths = None

    def view(self) -> list[bytes]:
        return self._rows

    @property
    def nbytes(self) -> int:
        """The flattened non-zeros (16 bytes each) and the rows' own bytes."""
        return sum(len(owners) for owners, _, _ in self._parts) * 16 + self._row_bytes

    def drop_head(self, rows: int) -> None:
        """Forget the first ``rows`` rows (handed off to a sealed segment) and their
        non-zeros; the others are numbered from 0 again."""
        owners, indices, weights = self._nonzeros()
        keep = owners >= rows
        self._row_bytes -= sum(len(r) for r in self._rows[:rows])
        self._rows = self._rows[rows:]
        self._parts = [(owners[keep] - rows, indices[keep], weights[keep])]
        self._flat, self._lengths = None, None

    def _nonzeros(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._flat is None:
            if self._parts:
                self._parts = [tuple(np.concatenate(p) for p in zip(*self._parts, strict=True))]
                self._flat = self._parts[0]
            else:
                self._flat = (np.empty(0, np.int64), np.empty(0, np.uint32), np.empty(0, "<f4"))
        return self._flat

    def lengths(self) -> np.ndarray:
        """Each row's sum of values: a BM25 row's length in terms."""
        if self._lengths is None:
            owners, _, weights = self._nonzeros()
            self._lengths = np.bincount(owners, weights=weights, minlength=len(self._rows))
        return self._lengths

    def term_stats(self, terms: np.ndarray, mask: np.ndarray) -> tuple[int, float, np.ndarray]:
        """Over the rows where ``mask`` holds: how many, their total length, and how many
        hold each of ``terms`` (sorted, unique)."""
        owners, indices, _ = self._nonzeros()
        hit = np.isin(indices, terms) & mask[owners]
        counts = np.bincount(np.searchsorted(terms, indices[hit]), minlength=len(terms))
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
        owners, indices, weights = self._nonzeros()
        drop = vector_types.drop_ratio(params)
        saturate = _bm25(params, self.lengths()) if metric == "BM25" else None
        scores_out, rows_out = [], []
        for query in queries:
            q_idx, q_val = _dropped(*vector_types.sparse_entries(query), drop)
            hit = np.isin(indices, q_idx) & mask[owners]
            rows = owners[hit]
            stored = weights[hit] if saturate is None else saturate(weights[hit], rows)
            contrib = stored * q_val[np.searchsorted(q_idx, indices[hit])]
            totals = np.bincount(rows, weights=contrib, minlength=len(self._rows))
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


def _bm25(params: dict[str, object], lengths: np.ndarray):
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
