"""The proxy's per-channel write bookkeeping behind the timetick protocol.

A write is stamped and registered as pending in one step under one lock, and leaves the
pending set only once the broker acknowledged it. A report gives, per pchannel, the stamp
below which this proxy will write nothing more: its oldest pending stamp minus one, or a
fresh stamp when nothing is pending (taken under the same lock, so every later write is
stamped above it).

A finished write or a Strong read makes the next report *urgent*: someone waits for a tick
that covers it, so the rootcoord ticks at once instead of at its (idle-paced) period. The
report says which channels need one: those written since (the stamp of the latest finished
write per channel) and those a reader without a fence or a flush waits on (``wake``).

With its promise the proxy says where its acknowledged writes end per channel, so that the
rootcoord can answer a Strong read with fences instead of TimeTicks (``TimeTickSync``).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from vectide.services.common.msgstream.message import Message

#: a channel writer's ``write``: the offsets of the acknowledged messages
Write = Callable[[Sequence[tuple[str, Message]]], list[int]]


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
        #: per channel, the offset after the last acknowledged write
        self._ends: dict[str, int] = {}
        #: channels whose last write failed: some of it may be on the channel, where unknown
        self._unsure: set[str] = set()
        #: per channel, the stamp of the latest finished write (failed ones too)
        self._written: dict[str, int] = {}
        #: per channel, a stamp a reader waits for a TimeTick to reach (until reported)
        self._wanted: dict[str, int] = {}

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
                self._written[ch] = max(self._written.get(ch, 0), ts)
        self.wake()

    def wake(self, wanted: Mapping[str, int] | None = None) -> None:
        """A reader waits for a tick covering what was stamped so far: report now, urgently;
        ``wanted``: channels that need one though nothing was written there since their last
        tick (a read without a fence, a flush), with the stamp it must reach."""
        with self._lock:
            self._urgent = True
            for ch, ts in (wanted or {}).items():
                self._wanted[ch] = max(self._wanted.get(ch, 0), ts)
        self.on_done()

    def take_urgent(self) -> tuple[bool, dict[str, int]]:
        """Whether a wake-up happened since the last call, and the ticks asked for with it
        (and forget both)."""
        with self._lock:
            urgent, self._urgent = self._urgent, False
            wanted, self._wanted = self._wanted, {}
            return urgent, wanted

    def written(self) -> dict[str, int]:
        """Per channel, the stamp of the latest finished write (a channel never written:
        left out): the rootcoord ticks a channel whose last tick lies below it."""
        with self._lock:
            return dict(self._written)

    def acked(self, channels: Sequence[str], offsets: Sequence[int]) -> None:
        """Writes to ``channels`` were acknowledged at ``offsets`` (before ``done``)."""
        with self._lock:
            for ch, offset in zip(channels, offsets, strict=True):
                self._ends[ch] = max(self._ends.get(ch, 0), offset + 1)
                self._unsure.discard(ch)

    def failed(self, channels: Iterable[str]) -> None:
        """A write to ``channels`` failed: part of it may have been written, at offsets
        unknown, until a later acknowledged write ends beyond them."""
        with self._lock:
            self._unsure.update(channels)

    def promise(self, at_ts: int | None = None) -> tuple[dict[str, int], dict[str, int]]:
        """Per channel, the stamp below which this proxy will write nothing more, and the
        offset after its last acknowledged write (0: none; left out: unknown). A channel
        with no write in flight is promised ``at_ts``, a stamp allocated before this call
        (every later write is stamped above it), or else a fresh stamp."""
        with self._lock:
            fresh = at_ts
            out: dict[str, int] = {}
            for ch, pending in self._pending.items():
                if pending:
                    out[ch] = min(pending) - 1
                else:
                    fresh = self._alloc_ts() if fresh is None else fresh
                    out[ch] = fresh
            ends = {ch: self._ends.get(ch, 0) for ch in self._pchannels if ch not in self._unsure}
            return out, ends

    def pending(self) -> int:
        with self._lock:
            return sum(sum(c.values()) for c in self._pending.values())


class AckedWriter:
    """The proxy's channel writer, telling the ticker where each write ended (or that it
    failed) before the write's task is done."""

    def __init__(self, write: Write, ticker: ChannelsTimeTicker) -> None:
        self._write = write
        self._ticker = ticker

    def write(self, messages: Sequence[tuple[str, Message]]) -> list[int]:
        channels = [ch for ch, _ in messages]
        try:
            offsets = self._write(messages)
        except BaseException:
            self._ticker.failed(channels)
            raise
        self._ticker.acked(channels, offsets)
        return offsets
