"""Globally unique int64 ids (collections, partitions, segments, rows), reserved in blocks.

Each process reserves a block of ids from a counter in the metastore with compare-and-set and
hands them out from memory; a crash wastes at most one block, never reuses an id.
"""

from __future__ import annotations

import threading

from vectide.services.common.kv.base import MetaKV

_CAS_ATTEMPTS = 64


class IDAllocatorError(RuntimeError):
    pass


class IDAllocator:
    def __init__(self, kv: MetaKV, key: str = "id/bound", block: int = 10_000) -> None:
        if block < 1:
            raise ValueError("block must be positive")
        self._kv = kv
        self._key = key
        self._block = block
        self._lock = threading.Lock()
        self._next = 0
        self._end = 0

    def alloc(self, count: int = 1) -> tuple[int, int]:
        """Reserve ``count`` ids: returns ``(first, end)``, ids ``first .. end - 1``."""
        if count < 1:
            raise ValueError("count must be positive")
        with self._lock:
            if self._next + count > self._end:
                self._next, self._end = self._reserve(max(count, self._block))
            first = self._next
            self._next += count
            return first, first + count

    def alloc_one(self) -> int:
        return self.alloc(1)[0]

    def _reserve(self, size: int) -> tuple[int, int]:
        for _ in range(_CAS_ATTEMPTS):
            raw = self._kv.get(self._key)
            start = int(raw) if raw else 1
            if self._kv.compare_and_set(self._key, raw, str(start + size).encode()):
                return start, start + size
        raise IDAllocatorError(f"could not reserve ids under {self._key}: too much contention")
