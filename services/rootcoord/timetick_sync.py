"""Which TimeTick each channel may carry: the minimum over every live writer's promise.

A proxy reports, per pchannel, a stamp below which it will write nothing more (its oldest
in-flight write minus one, or a fresh stamp when idle). The rootcoord adds its own in-flight
DDL writes. A tick T is safe on a channel once no writer can still put a message with
``ts <= T`` on it. A proxy that registered but has not reported yet, or stopped reporting
while its session lives, holds the channels back: that is the point.

The same promises give *fences* without writing anything: with each promise a proxy says
where its acknowledged writes end per channel; if every writer's promise covers a read's
stamp, every message stamped up to it lies below the largest of those ends (and of the
rootcoord's own writes). Strong, Bounded and Session reads carry such fences to the query
nodes instead of waiting for TimeTicks.

So while writes flow, a TimeTick goes only where it is needed: to a channel written past its
last tick (its readers see the rows once a tick covers them), a channel a reader or a flush
asked ticks for (``want``), one without a floor yet, and one not ticked for ``max_quiet_s``.
Each channel is a Kafka topic, and every tick a record the broker stores and every reader
fetches: a one-shard collection's insert used to add a tick to all 16 channels. Idle, the
paced broadcast ticks every channel, as it always did.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from vectide.services.common.msgstream.message import Position


@dataclass
class _Report:
    channels: dict[str, int]
    #: per channel, the offset after the writer's last acknowledged write (0: it wrote
    #: none; a channel left out: it cannot say, a write failed); None: not told at all
    ends: dict[str, int] | None = None
    #: per channel, the stamp of the writer's latest finished write (a channel left out:
    #: none); None: not told, so every tick round ticks every channel for this writer
    written: dict[str, int] | None = None
    received_at: float = field(default_factory=time.monotonic)


class TimeTickSync:
    def __init__(
        self,
        pchannels: Iterable[str],
        unregistered_grace_s: float = 10.0,
        max_quiet_s: float = 10.0,
    ) -> None:
        self._pchannels = list(pchannels)
        self._lock = threading.Lock()
        self._reports: dict[int, _Report] = {}
        self._live: set[int] = set()
        self._own_pending: dict[str, set[int]] = {c: set() for c in self._pchannels}
        self._last: dict[str, int] = dict.fromkeys(self._pchannels, 0)
        #: per channel, an offset every write not reported lies below: the end of the first
        #: TimeTick this coordinator wrote there after it started (a predecessor's writes
        #: may lie anywhere), after its own write there failed, or after a writer left (its
        #: last writes may not have been reported). A channel without one gets no fence.
        #: Later ticks do not move it: a fence need not cover ticks, so a reader that has
        #: the data need not fetch the latest tick first (on Tansu's long topics, slow)
        self._floor: dict[str, int] = {}
        #: per channel, the offset after this coordinator's last acknowledged DDL message
        self._own_end: dict[str, int] = {}
        #: per channel, the stamp of this coordinator's latest own write (acknowledged or not)
        self._own_written: dict[str, int] = {}
        #: per channel, a stamp a reader or a flush waits for a TimeTick to reach
        self._wanted: dict[str, int] = {}
        #: per channel, when it was last ticked (``time.monotonic()``)
        self._ticked_at: dict[str, float] = {}
        self._grace_s = unregistered_grace_s
        #: while only needed channels tick, each still gets one this often
        self._max_quiet_s = max_quiet_s

    def report(
        self,
        source_id: int,
        channels: dict[str, int],
        ends: dict[str, int] | None = None,
        written: dict[str, int] | None = None,
    ) -> None:
        with self._lock:
            self._reports[source_id] = _Report(
                dict(channels),
                None if ends is None else dict(ends),
                None if written is None else dict(written),
            )

    def want(self, stamps: Mapping[str, int]) -> None:
        """Readers (or a flush) wait for TimeTicks reaching these stamps on these channels:
        those channels tick every round until a tick gets there."""
        with self._lock:
            for channel, ts in stamps.items():
                if channel in self._last and ts > self._last[channel]:
                    self._wanted[channel] = max(self._wanted.get(channel, 0), ts)

    def set_live(self, source_ids: Iterable[int]) -> None:
        """The proxies whose sessions are alive; reports of the others are dropped."""
        with self._lock:
            live = set(source_ids)
            for gone in self._live - live:
                self._forget(gone)
            self._live = live

    def _forget(self, source_id: int) -> None:
        if self._reports.pop(source_id, None) is not None:
            self._floor.clear()

    def stale(self, source_id: int, now: float, older_than_s: float) -> list[int]:
        """Live proxies other than ``source_id`` whose last promise is older than
        ``older_than_s`` at ``now`` (a ``time.monotonic()`` reading): while they report at
        the idle pace, their promises hold a tick back that another proxy's reader needs."""
        with self._lock:
            return sorted(
                s
                for s in self._live - {source_id}
                if s in self._reports and now - self._reports[s].received_at > older_than_s
            )

    def begin_own(self, channel: str, ts: int) -> None:
        with self._lock:
            self._own_pending[channel].add(ts)

    def end_own(self, channel: str, ts: int, end: int | None = None) -> None:
        """An own write is over: acknowledged and ending at ``end``, or failed (None)."""
        with self._lock:
            self._own_pending[channel].discard(ts)
            self._own_written[channel] = max(self._own_written.get(channel, 0), ts)
            if end is None:
                self._floor.pop(channel, None)  # part of it may be there, where is unknown
            else:
                self._own_end[channel] = max(self._own_end.get(channel, 0), end)

    def written(self, ends: dict[str, int]) -> None:
        """Own TimeTicks were acknowledged, ending at these offsets."""
        with self._lock:
            for channel, end in ends.items():
                self._floor.setdefault(channel, end)

    def fences(self, ts: int | None, channels: Iterable[str]) -> list[Position]:
        """A fence for each of ``channels`` every writer's promise covers: at ``ts``, or
        (None) at the smallest promise, the stamp a TimeTick written now would carry."""
        with self._lock:
            if self._live - set(self._reports):
                return []  # a live proxy has not promised anything yet
            told = [(r.channels, r.ends) for r in self._reports.values() if r.ends is not None]
            if len(told) < len(self._reports):
                return []  # a proxy that does not say where its writes end
            out: list[Position] = []
            for channel in channels:
                if channel not in self._floor or self._own_pending.get(channel):
                    continue
                promised = [p[channel] for p, _ in told if channel in p]
                at = min(promised, default=None) if ts is None else ts
                if at is None or any(p < at for p in promised):
                    continue
                ends = [e.get(channel) for _, e in told]  # None: that writer cannot say
                if None not in ends:
                    own = [self._floor[channel], self._own_end.get(channel, 0)]
                    out.append(Position(channel, max(own + ends), at))
            return out

    def next_ticks(self, fresh_ts: int, everywhere: bool = True) -> dict[str, int]:
        """Ticks to write now: per channel the safe stamp, where it advanced and (unless
        ``everywhere``) where a tick is needed.

        ``fresh_ts`` is a newly allocated stamp: nothing stamped later can be below it, so it
        bounds channels with no in-flight writes.
        """
        with self._lock:
            now = time.monotonic()
            # reports from proxies never seen alive expire; live ones hold until they leave
            for source in [s for s, r in self._reports.items() if s not in self._live]:
                if now - self._reports[source].received_at > self._grace_s:
                    self._forget(source)
            waiting = self._live - set(self._reports)
            if waiting:
                return {}  # a live proxy has not promised anything yet
            ticks: dict[str, int] = {}
            for channel in self._pchannels:
                bound = fresh_ts
                for report in self._reports.values():
                    bound = min(bound, report.channels.get(channel, bound))
                if self._own_pending[channel]:
                    bound = min(bound, min(self._own_pending[channel]) - 1)
                if bound > self._last[channel] and (everywhere or self._needs_tick(channel, now)):
                    ticks[channel] = bound
                    self._last[channel] = bound
                    self._ticked_at[channel] = now
                    if self._wanted.get(channel, math.inf) <= bound:
                        del self._wanted[channel]
            return ticks

    def _needs_tick(self, channel: str, now: float) -> bool:
        """Whether a reader may wait for a tick on ``channel``: a write stamped past its
        last tick, a reader's or a flush's request, no floor for fences yet, or a long quiet
        (a reader without a fence still gets one within ``max_quiet_s``)."""
        last = self._last[channel]
        if channel not in self._floor or channel in self._wanted:
            return True
        if now - self._ticked_at.get(channel, -math.inf) >= self._max_quiet_s:
            return True
        if self._own_written.get(channel, 0) > last:
            return True
        return any(
            r.written is None or r.written.get(channel, 0) > last for r in self._reports.values()
        )
