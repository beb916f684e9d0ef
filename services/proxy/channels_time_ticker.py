"""The proxy's per-channel write bookkeeping behind the timetick protocol.

A write is stamped and registered as pending in one step under one lock, and leaves the
pending set only once the broker acknowledged it. A report gives, per pchannel, the stamp
below which this proxy will write nothing more: its oldest pending stamp minus one, or a
fresh stamp when nothing is pending (taken under the same lock, so every later write is
stamped above it).

A finished write or a Strong read makes the next report *urgent*: someone waits for a tick
that covers it, so the rootcoord ticks at once instead of at its (idle-paced) period.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable


class ChannelsTimeTicker:
    def __init__(self, pchannels: Iterable[str], alloc_ts: Callable[[], int]) -> None:
        #: called when a write completes (the proxy reports at once rather than next period)
        self.on_done: Callable[[], None] = lambda: None
        self._pchannels = list(pchannels)
        self._alloc_ts = alloc_ts
        self._lock = threading.Lock()
        self._pending: dict[str, Counter[int]] = {c: Counter() for c in self._pchannels}
        #: the first report is urgent: the rootcoord holds every tick until it arrives
        self._urgent = True

    def stamp(self, channels: Iterable[str]) -> int:
        """Allocate the stamp of a write to ``channels`` and hold those channels back."""
        with self._lock:
            ts = self._alloc_ts()
            for ch in set(channels):
                self._pending[ch][ts] += 1
            return ts

    def done(self, channels: Iterable[str], ts: int) -> None:
        with self._lock:
            for ch in set(channels):
                pending = self._pending[ch]
                pending[ts] -= 1
                if pending[ts] <= 0:
                    del pending[ts]
        self.wake()

    def wake(self) -> None:
        """A reader waits for a tick covering what was stamped so far: report now, urgently."""
        with self._lock:
            self._urgent = True
        self.on_done()

    def take_urgent(self) -> bool:
        """Whether a wake-up happened since the last call (and forget it)."""
        with self._lock:
            urgent, self._urgent = self._urgent, False
            return urgent

    def report(self) -> dict[str, int]:
        with self._lock:
            fresh: int | None = None
            out: dict[str, int] = {}
            for ch, pending in self._pending.items():
                if pending:
                    out[ch] = min(pending) - 1
                else:
                    fresh = self._alloc_ts() if fresh is None else fresh
                    out[ch] = fresh
            return out

    def pending(self) -> int:
        with self._lock:
            return sum(sum(c.values()) for c in self._pending.values())
