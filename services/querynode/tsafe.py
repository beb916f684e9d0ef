"""Serviceable time of a shard: every message with ``ts <= tsafe`` has been applied.

A read that must see everything up to its guarantee timestamp waits here; the pipeline
raises tsafe after applying each MsgPack and wakes the waiters.
"""

from __future__ import annotations

import threading
import time


class TSafe:
    def __init__(self, initial: int = 0) -> None:
        self._ts = initial
        self._cond = threading.Condition()
        self._closed = False

    def get(self) -> int:
        with self._cond:
            return self._ts

    def advance(self, ts: int) -> None:
        with self._cond:
            if ts > self._ts:
                self._ts = ts
                self._cond.notify_all()

    def close(self) -> None:
        """Wake every waiter: the shard is going away."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def wait(self, ts: int, timeout_s: float) -> int | None:
        """The tsafe once it is >= ``ts``; None if ``timeout_s`` passed first or closed."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._ts < ts and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)
            return None if self._closed else self._ts
