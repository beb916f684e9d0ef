"""faiss indexes over the full chunks of a growing shard's vectors (Milvus's interim index).

A shard's vector column is cut into chunks of ``chunk_rows``; each full chunk gets an index,
built off the ingest path: a quickly trained IVF_FLAT by default whatever the collection's
index (``InterimIndex``, ``query.interim_index``), or the collection's own type. A sealed
segment is one chunk holding its index file, of the collection's type. A search runs the
index of each block with the visibility/filter mask as a faiss ID selector, brute-forces the
rest exactly, and merges. FLAT is always exact.

Interim IVF_FLAT blocks are merged as they accumulate: ``merge_fanout`` (4) neighbouring blocks of
one level become one block of the next (16k -> 64k -> 256k -> 1M rows), with more lists
(``IndexSpec.merged``), built off the search path and swapped in atomically. A search costs a
faiss call, a mask slice and some Python per block: 61 chunks of 1M rows made a search 61
calls scanning 61 x 16/128 of the rows; as blocks, 7 calls at most, scanning far fewer rows
(the lists grow with the square root of the rows, not with the rows).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Generic, TypeVar

import faiss
import numpy as np

from vectide.services.common.index_spec import IndexSpec, normalised

DEFAULT_CHUNK_ROWS = 16_384
T = TypeVar("T")


class BuiltChunks(Generic[T]):
    """Indexes over the full chunks of a store's rows, built one chunk at a time off the
    ingest path (a full chunk's values never change) and forgotten from the head when the
    store frees its leading chunks. Vector (faiss) and scalar indexes both keep theirs here:
    one entry per chunk here, one per block of chunks in ``ChunkIndexes``."""

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
            return self._covered() * self.chunk_rows

    def built(self) -> list[T]:
        with self._lock:
            return list(self._built)

    def next_chunk(self, num_rows: int) -> int | None:
        """The first full chunk without an index, if any."""
        with self._lock:
            chunk = self._covered()
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
            if chunk == self._covered() and issued_at == self._drops:
                self._built.append(index)

    def drop_head(self, chunks: int) -> None:
        """Forget the first ``chunks`` chunks' indexes (their rows left the store)."""
        with self._lock:
            self._drop(chunks)
            self._drops += 1

    def _covered(self) -> int:
        """How many leading chunks have an index (lock held)."""
        return len(self._built)

    def _drop(self, chunks: int) -> None:
        self._built = self._built[chunks:]


@dataclass(frozen=True, eq=False)
class Block:
    """One faiss index over ``chunks`` neighbouring chunks from chunk ``first``: its id ``j``
    is row ``first * chunk_rows + j``. ``first`` < 0: the store freed the block's leading
    rows (a handoff cut through it); searches skip them, and the block is never merged."""

    first: int
    chunks: int
    level: int
    spec: IndexSpec
    index: faiss.Index


@dataclass(frozen=True)
class Merge:
    """``merge_fanout`` neighbouring blocks of one level to build as one of the next level,
    as issued at the ``drops``-th head drop (a later drop makes the result stale)."""

    blocks: tuple[Block, ...]
    spec: IndexSpec
    drops: int

    def rows(self, chunk_rows: int) -> tuple[int, int]:
        """The store rows ``start:end`` the merged block is built from."""
        first = self.blocks[0].first
        return first * chunk_rows, (first + sum(b.chunks for b in self.blocks)) * chunk_rows


class ChunkIndexes(BuiltChunks[Block]):
    """The built chunk indexes of one vector field of one shard, as blocks."""

    def __init__(self, spec: IndexSpec, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> None:
        super().__init__(chunk_rows)
        self.spec = spec
        #: interim IVF blocks merge (quick to build); other indexes (a collection's HNSW
        #: per chunk, a sealed segment's file) stay as built
        self._fanout = spec.merge_fanout if spec.index_type == "IVF_FLAT" else 0

    def built(self) -> list[faiss.Index]:  # type: ignore[override]
        with self._lock:
            return [b.index for b in self._built]

    def blocks(self) -> list[Block]:
        with self._lock:
            return list(self._built)

    def install(self, chunk: int, index: faiss.Index) -> None:  # type: ignore[override]
        super().install(chunk, Block(chunk, 1, 0, self.spec, index))

    @property
    def provisional(self) -> bool:
        """Whether the index held is an interim one standing in for a sealed segment's index
        file (``stand_in``): the file replaces it when it arrives."""
        with self._lock:
            return any(b.spec is not self.spec for b in self._built)

    def stand_in(self, spec: IndexSpec, index: faiss.Index) -> bool:
        """Take ``index`` (of ``spec``, over every row) until the index file is installed;
        refused when the file came first. Returns whether it was taken."""
        with self._lock:
            if self._built:
                return False
            self._built.append(Block(0, 1, 0, spec, index))
            return True

    def replace(self, index: faiss.Index) -> None:
        """Take the index file ``index`` (one chunk: every row), replacing a stand-in."""
        with self._lock:
            self._built = [Block(0, 1, 0, self.spec, index)]

    def _covered(self) -> int:
        last = self._built[-1] if self._built else None
        return last.first + last.chunks if last else 0

    def _drop(self, chunks: int) -> None:
        self._built = [
            Block(b.first - chunks, b.chunks, b.level, b.spec, b.index)
            for b in self._built
            if b.first + b.chunks > chunks
        ]

    # -- merges ----------------------------------------------------------------------------

    def next_merge(self) -> Merge | None:
        """The first ``merge_fanout`` neighbouring blocks of one level, if any (interim IVF
        only): blocks are in row order and their levels never rise along it, so equal
        levels sit together."""
        if self._fanout < 2:
            return None
        with self._lock:
            run: list[Block] = []
            for block in self._built:
                if block.first < 0 or (run and block.level != run[0].level):
                    run = [] if block.first < 0 else [block]
                    continue
                run.append(block)
                if len(run) == self._fanout:
                    level = run[0].level + 1
                    return Merge(tuple(run), self.spec.merged(level), self._drops)
        return None

    def install_merge(self, merge: Merge, index: faiss.Index) -> bool:
        """Swap the merged blocks for ``index``, unless they changed meanwhile (a head drop
        renumbered them: the next round merges again). Returns whether it was swapped."""
        with self._lock:
            if merge.drops != self._drops:
                return False
            first = merge.blocks[0]
            at = next((i for i, b in enumerate(self._built) if b is first), None)
            n = len(merge.blocks)
            if at is None or any(
                a is not b for a, b in zip(self._built[at : at + n], merge.blocks, strict=False)
            ):
                return False
            chunks = sum(b.chunks for b in merge.blocks)
            merged = Block(first.first, chunks, first.level + 1, merge.spec, index)
            self._built[at : at + n] = [merged]
            return True

    # -- search ----------------------------------------------------------------------------

    def search(
        self, queries: np.ndarray, k: int, mask: np.ndarray, params: dict[str, object]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Best ``k`` per query over the indexed rows where ``mask`` holds: (scores, rows),
        faiss's scores (squared L2, or inner product of normalised vectors for COSINE). A
        block whose rows are all visible is searched without an ID selector (faiss's faster
        path: the usual case of growing rows, which are rarely deleted)."""
        blocks = self.blocks()
        nq = len(queries)
        if self.spec.metric == "COSINE":
            queries = normalised(queries)
        parts_scores, parts_rows = [], []
        for block in blocks:
            start = block.first * self.chunk_rows
            local = _block_mask(mask, start, block.chunks * self.chunk_rows)
            live = int(np.count_nonzero(local))
            if not live:
                continue
            selector = None
            if live < len(local):
                bits = np.packbits(local, bitorder="little")  # alive while faiss reads it
                selector = faiss.IDSelectorBitmap(len(local), faiss.swig_ptr(bits))
            scores, ids = block.index.search(
                queries, min(k, live), params=block.spec.search_params(selector, k, params)
            )
            parts_scores.append(scores)
            parts_rows.append(np.where(ids >= 0, ids + start, -1) if start else ids)
        if not parts_scores:
            return np.empty((nq, 0), np.float32), np.empty((nq, 0), np.int64)
        if len(parts_scores) == 1:  # a sealed segment's one index: nothing to stack
            return parts_scores[0], parts_rows[0]
        return np.hstack(parts_scores), np.hstack(parts_rows)


def _block_mask(mask: np.ndarray, start: int, rows: int) -> np.ndarray:
    """``mask`` over a block's rows ``start:start + rows``; rows before 0 (freed) are False."""
    if start >= 0:
        return mask[start : start + rows]
    local = np.zeros(rows, dtype=bool)
    local[-start:] = mask[: start + rows]
    return local
