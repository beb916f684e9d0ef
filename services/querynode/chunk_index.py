"""faiss indexes over the full chunks of a growing shard's vectors (Milvus's interim index).

A shard's vector column is cut into chunks of ``chunk_rows``; each full chunk gets an index,
built off the ingest path: a quickly trained IVF_FLAT by default whatever the collection's
index (``InterimIndex``, ``query.interim_index``), or the collection's own type. A sealed
segment is one chunk holding its index file, of the collection's type. A search runs the
index of each built chunk with the visibility/filter mask as a faiss ID selector,
brute-forces the rest exactly, and merges. FLAT is always exact.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

import faiss
import numpy as np

from vectide.services.common.index_spec import IndexSpec, normalised

DEFAULT_CHUNK_ROWS = 16_384
T = TypeVar("T")


class BuiltChunks(Generic[T]):
    """Indexes over the full chunks of a store's rows, built one chunk at a time off the
    ingest path (a full chunk's values never change) and forgotten from the head when the
    store frees its leading chunks. Vector (faiss) and scalar indexes both keep theirs here."""

    def __init__(self, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> None:
        self.chunk_rows = chunk_rows
        self._built: list[T] = []
        self._lock = threading.Lock()
        #: how many times the head was dropped, and when each chunk being built was issued:
        #: a chunk issued before a drop is numbered as before it (its rows may be gone)
        self._drops = 0
        self._issued: dict[int, int] = {}

    @property
    def indexed_rows(self) -> int:
        with self._lock:
            return len(self._built) * self.chunk_rows

    def built(self) -> list[T]:
        with self._lock:
            return list(self._built)

    def next_chunk(self, num_rows: int) -> int | None:
        """The first full chunk without an index, if any."""
        with self._lock:
            chunk = len(self._built)
            if (chunk + 1) * self.chunk_rows > num_rows:
                return None
            self._issued[chunk] = self._drops
        return chunk

    def install(self, chunk: int, index: T) -> None:
        """Keep ``index`` as chunk ``chunk``, unless the chunks moved while it was built
        (``drop_head``: the next round builds it again, at its new number; a drop of every
        chunk would otherwise let a chunk 0 built from freed rows in)."""
        with self._lock:
            issued_at = self._issued.pop(chunk, self._drops)
            if chunk == len(self._built) and issued_at == self._drops:
                self._built.append(index)

    def drop_head(self, chunks: int) -> None:
        """Forget the first ``chunks`` indexes (their rows left the store)."""
        with self._lock:
            self._built = self._built[chunks:]
            self._drops += 1


class ChunkIndexes(BuiltChunks[faiss.Index]):
    """The built chunk indexes of one vector field of one shard."""

    def __init__(self, spec: IndexSpec, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> None:
        super().__init__(chunk_rows)
        self.spec = spec

    def search(
        self, queries: np.ndarray, k: int, mask: np.ndarray, params: dict[str, object]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Best ``k`` per query over the indexed rows where ``mask`` holds: (scores, rows),
        faiss's scores (squared L2, or inner product of normalised vectors for COSINE). A
        chunk whose rows are all visible is searched without an ID selector (faiss's faster
        path: the usual case of growing rows, which are rarely deleted)."""
        built = self.built()
        nq = len(queries)
        if self.spec.metric == "COSINE":
            queries = normalised(queries)
        parts_scores, parts_rows = [], []
        for chunk, index in enumerate(built):
            start = chunk * self.chunk_rows
            local = mask[start : start + self.chunk_rows]
            live = int(np.count_nonzero(local))
            if not live:
                continue
            selector = None
            if live < len(local):
                bits = np.packbits(local, bitorder="little")  # alive while faiss reads it
                selector = faiss.IDSelectorBitmap(len(local), faiss.swig_ptr(bits))
            scores, ids = index.search(
                queries, min(k, live), params=self.spec.search_params(selector, k, params)
            )
            parts_scores.append(scores)
            parts_rows.append(np.where(ids >= 0, ids + start, -1) if start else ids)
        if not parts_scores:
            return np.empty((nq, 0), np.float32), np.empty((nq, 0), np.int64)
        if len(parts_scores) == 1:  # a sealed segment's one index: nothing to stack
            return parts_scores[0], parts_rows[0]
        return np.hstack(parts_scores), np.hstack(parts_rows)
