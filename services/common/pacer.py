"""How often a loop that only matters while something happens should run (a pure policy).

Timeticks and channel fetches cost the broker work on every run, whether or not anything
was written: 16 channels ticked every 50 ms kept an idle deployment's broker near a full
core. Readers need them fast only while writes flow or a read waits for its timestamp
(Strong, Session); idle, a Bounded read (now - graceful_time, 5 s) is served by a tick
every second and an Eventually read needs none. So the loops run every ``fast_s`` for
``hold_s`` after the last activity, then back off linearly to ``idle_s``: a burst of
writes never waits for a slow period, and a deployment nobody uses settles at one run per
``idle_s``. Events that need an answer at once (a finished write, a Strong read) also wake
the loop directly; the pacer only decides the period in between.

No clock inside: callers pass ``now`` (``time.monotonic()``), so tests drive it with
plain numbers.
"""

from __future__ import annotations

import math
import threading


class Pacer:
    def __init__(self, fast_s: float, idle_s: float, hold_s: float | None = None) -> None:
        #: period while active; also the floor of every period
        self.fast_s = fast_s
        #: longest period, reached once nothing happened for ``hold_s + idle_s``
        self.idle_s = max(idle_s, fast_s)
        #: how long the loop stays at ``fast_s`` after the last activity
        self.hold_s = self.idle_s if hold_s is None else hold_s
        self._last = -math.inf
        self._lock = threading.Lock()

    def activity(self, now: float) -> None:
        """Something happened at ``now`` that readers may wait for."""
        with self._lock:
            self._last = max(self._last, now)

    def active(self, now: float) -> bool:
        """Whether ``now`` lies within ``hold_s`` of the last activity."""
        return now - self._last < self.hold_s

    def interval(self, now: float) -> float:
        """The period to wait before the next run, decided at ``now``."""
        idle_for = now - self._last - self.hold_s
        if idle_for < 0:
            return self.fast_s
        return min(self.idle_s, max(self.fast_s, idle_for))
