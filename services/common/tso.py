"""The timestamp oracle core: strictly increasing hybrid stamps that survive restarts.

The allocator never hands out a stamp whose physical part has not first been covered by an
upper bound persisted in the metastore. A restarted (or newly elected) allocator starts above
that bound, so stamps never go backwards even if the wall clock does. The bound is written
with compare-and-set: an allocator that lost its leadership fails instead of racing the new
one (fencing).

Pure logic: no thread, no network. The owner calls :meth:`update` every
``tso_update_interval_ms`` (the rootcoord service runs the timer).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from vectide.services.common import timestamp
from vectide.services.common.kv.base import MetaKV

#: Refresh the persisted bound when physical time gets this close to it.
_GUARD_MS = 1


class TSOError(RuntimeError):
    """The TSO cannot hand out stamps (not initialised, or fenced by another allocator)."""


class TSOAllocator:
    def __init__(
        self,
        kv: MetaKV,
        key: str = "tso/bound",
        window_ms: int = 3000,
        clock: Callable[[], int] = timestamp.now_ms,
    ) -> None:
        if window_ms < 10:
            raise ValueError("the TSO window must be at least 10 ms")
        self._kv = kv
        self._key = key
        self._window_ms = window_ms
        self._clock = clock
        self._lock = threading.Lock()
        self._physical = 0
        self._logical = 0
        self._bound = 0
        self._saved: bytes | None = None
        self._ready = False

    def initialize(self) -> None:
        """Load the persisted bound, start above it (or at the clock) and persist a new one."""
        with self._lock:
            self._saved = self._kv.get(self._key)
            saved_bound = int(self._saved) if self._saved else 0
            self._physical = max(self._clock(), saved_bound + 1)
            self._logical = 0
            self._persist_bound(self._physical + self._window_ms)
            self._ready = True

    def update(self) -> None:
        """Advance physical time to the clock (never backwards) and extend the bound if due."""
        with self._lock:
            self._require_ready()
            now = self._clock()
            if now > self._physical:
                self._physical, self._logical = now, 0
            elif self._logical > timestamp.MAX_LOGICAL // 2:
                self._physical, self._logical = self._physical + 1, 0
            if self._bound - self._physical <= _GUARD_MS:
                self._persist_bound(self._physical + self._window_ms)

    def alloc(self, count: int = 1) -> int:
        """Reserve ``count`` consecutive stamps and return the first."""
        if count < 1 or count > timestamp.MAX_LOGICAL + 1:
            raise ValueError(f"count must be in [1, {timestamp.MAX_LOGICAL + 1}], got {count}")
        with self._lock:
            self._require_ready()
            if self._logical + count > timestamp.MAX_LOGICAL + 1:
                # Logical space of this millisecond is spent: borrow the next one.
                self._physical, self._logical = self._physical + 1, 0
                if self._physical >= self._bound:
                    self._persist_bound(self._physical + self._window_ms)
            first = timestamp.compose(self._physical, self._logical)
            self._logical += count
            return first

    def last(self) -> int:
        """The newest stamp handed out (or about to be): a cheap lower bound for readers."""
        with self._lock:
            self._require_ready()
            return timestamp.compose(self._physical, max(self._logical - 1, 0))

    def fence(self) -> None:
        """Hand out no more stamps (leadership lost): another TSO may already be active."""
        with self._lock:
            self._ready = False

    def _persist_bound(self, bound_ms: int) -> None:
        value = str(bound_ms).encode()
        if not self._kv.compare_and_set(self._key, self._saved, value):
            self._ready = False
            raise TSOError(
                "the persisted TSO bound changed under this allocator: another TSO is active"
            )
        self._saved, self._bound = value, bound_ms

    def _require_ready(self) -> None:
        if not self._ready:
            raise TSOError("TSO allocator is not initialised (or was fenced)")
