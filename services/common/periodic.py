"""Run a function every interval on a daemon thread until stopped; errors are logged and
the loop goes on (a broker hiccup must not end the timeticks).

``wake()`` runs it at once instead of at the end of the interval: the timetick loops use it
so that a finished write or a Strong read moves serviceable time without waiting a period.
The interval may be a function, asked before each wait: the timetick loops pass a ``Pacer``
so that they slow down while nothing happens.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from vectide.services.common.priority import lower_thread

log = logging.getLogger(__name__)


class Periodic:
    def __init__(
        self,
        name: str,
        interval_s: float | Callable[[], float],
        fn: Callable[[], object],
        min_gap_s: float = 0.0,
        nice: int = 0,
    ) -> None:
        self._name = name
        self._interval_s: Callable[[], float] = (
            interval_s if callable(interval_s) else lambda: float(interval_s)
        )
        #: a wake-up never runs it sooner than this after the previous run started
        self._min_gap_s = min_gap_s
        #: background work (index builds) lowers its thread's priority (``priority.py``)
        self._nice = nice
        self._fn = fn
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._failures = 0
        self._last_run = -math.inf

    def start(self) -> Periodic:
        self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        lower_thread(self._nice)
        while True:
            self._wake.wait(self._interval_s())
            self._wake.clear()
            if self._stop.is_set():
                return
            if self._min_gap_s:
                # only what is left of the gap since the last run: an isolated wake-up runs
                # at once, a burst of them at most once per gap
                self._stop.wait(max(0.0, self._last_run + self._min_gap_s - time.monotonic()))
            self._last_run = time.monotonic()
            try:
                self._fn()
                self._failures = 0
            except Exception:
                self._failures += 1
                if self._failures in (1, 10) or self._failures % 100 == 0:
                    log.exception(
                        "periodic task failed",
                        extra={"task": self._name, "failures": self._failures},
                    )

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
