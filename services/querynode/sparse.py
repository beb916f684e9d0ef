"""Sparse float vectors in a shard store: the rows as clients wrote them, plus one flat
(row, index, value) listing of every non-zero, grown as rows arrive.

Search is exact inner product (the only sparse metric Milvus has besides BM25): for each
query, the non-zeros whose index the query also has are weighted by the query's value and
summed per row (``np.bincount``), so a query costs one pass over the stored non-zeros.
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
        entries = [vector_types.sparse_entries(v) for v in values]
        counts = np.fromiter((len(i) for i, _ in entries), dtype=np.int64, count=len(entries))
        owners = np.repeat(np.arange(start, start + len(values), dtype=np.int64), counts)
        indices = np.concatenate([i for i, _ in entries]) if entries else np.empty(0, "<u4")
        weights = np.concatenate([w for _, w in entries]) if entries else np.empty(0, "<f4")
        self._parts.append((owners, indices.astype(np.uint32), weights.astype(np.float32)))
        self._flat = None

    def view(self) -> list[bytes]:
        return self._rows

    def _nonzeros(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._flat is None:
            if self._parts:
                self._parts = [tuple(np.concatenate(p) for p in zip(*self._parts, strict=True))]
                self._flat = self._parts[0]
            else:
                self._flat = (np.empty(0, np.int64), np.empty(0, np.uint32), np.empty(0, "<f4"))
        return self._flat

    def search(
        self, queries: list[bytes], k: int, mask: np.ndarray, params: dict[str, object]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Best ``k`` rows by inner product per query among rows where ``mask`` holds:
        ``(scores, rows)``, ``nq x k'``. Rows sharing no index with the query score 0 and
        are not hits, as in Milvus."""
        owners, indices, weights = self._nonzeros()
        drop = vector_types.drop_ratio(params)
        scores_out, rows_out = [], []
        for query in queries:
            q_idx, q_val = _dropped(*vector_types.sparse_entries(query), drop)
            hit = np.isin(indices, q_idx) & mask[owners]
            rows = owners[hit]
            contrib = weights[hit] * q_val[np.searchsorted(q_idx, indices[hit])]
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


def _dropped(indices: np.ndarray, values: np.ndarray, ratio: float):
    """The query without its ``ratio`` smallest (by magnitude) values, as Milvus's
    ``drop_ratio_search`` prunes it."""
    drop = int(len(values) * ratio)
    if not drop:
        return indices, values
    keep = np.sort(np.argsort(np.abs(values), kind="stable")[drop:])
    return indices[keep], values[keep]
