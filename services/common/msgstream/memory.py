"""The channel layer in memory: a broker, a producer and a tick-aligned consumer in one process.

The same contract as services/common/msgstream/kafka.py, so cores and fault tests run without
Kafka: a channel is an append-only log of encoded records with offsets from 0; a producer
appends and gets offsets back; a consumer reads from explicit positions, skips records that do
not decode (counted in ``poison_count``), and returns complete MsgPacks through the same
``TickAligner``. Nothing runs on a thread of its own: a ``poll`` takes what is there now (or
waits up to its timeout for a write from another thread), so a test decides when a message
arrives.

Faults a test sets per channel (``MemoryBroker.faults``), applied as a broker or a network
would misbehave, each deterministic:

- ``pause``: consumers see nothing of the channel past the offset it had when paused
  (writes still succeed); ``resume`` delivers the rest in order;
- ``drop``: the next n writes that match are acknowledged but never stored (a lost record);
- ``duplicate``: the next n writes that match are stored twice (a producer retry);
- ``reorder``: the next n writes that match are held back and stored in reverse order once
  the n-th arrives (their offsets are in reverse write order).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from vectide.services.common.msgstream import codec
from vectide.services.common.msgstream.message import Message, MsgPack, Position, TimeTickMsg
from vectide.services.common.msgstream.tick_aligner import PendingFences, TickAligner

#: which messages a fault applies to (None: every one)
Match = Callable[[Message], bool] | None


@dataclass
class _Rule:
    count: int
    match: Match = None

    def takes(self, msg: Message) -> bool:
        return self.count > 0 and (self.match is None or self.match(msg))


@dataclass
class ChannelFaults:
    """The faults set on one channel (see the module docstring)."""

    paused_at: int | None = None
    drop: _Rule = field(default_factory=lambda: _Rule(0))
    duplicate: _Rule = field(default_factory=lambda: _Rule(0))
    reorder: _Rule = field(default_factory=lambda: _Rule(0))
    #: writes held back by ``reorder`` until it has them all
    held: list[bytes] = field(default_factory=list)
    #: how many writes each fault has changed so far
    dropped: int = 0
    duplicated: int = 0
    reordered: int = 0


class MemoryBroker:
    """Channels as lists of encoded records; thread-safe, so a reader may wait in ``poll``."""

    def __init__(self) -> None:
        self._logs: dict[str, list[bytes]] = {}
        self._faults: dict[str, ChannelFaults] = {}
        self._cond = threading.Condition()

    # -- topics ------------------------------------------------------------------------------

    def ensure_topics(self, topics: Iterable[str]) -> list[str]:
        """Create missing channels; returns the ones it created (as ``kafka.ensure_topics``)."""
        with self._cond:
            missing = [t for t in dict.fromkeys(topics) if t not in self._logs]
            for topic in missing:
                self._logs[topic] = []
            return missing

    def channels(self) -> list[str]:
        with self._cond:
            return sorted(self._logs)

    def end_offset(self, channel: str) -> int:
        """The offset the next stored record gets."""
        with self._cond:
            return len(self._logs.get(channel, ()))

    def records(self, channel: str) -> list[bytes]:
        """Every stored record of the channel (what a test inspects)."""
        with self._cond:
            return list(self._logs.get(channel, ()))

    # -- writes ------------------------------------------------------------------------------

    def append(self, channel: str, value: bytes, msg: Message | None = None) -> int:
        """Store ``value`` (the encoding of ``msg``; None: raw bytes, no fault matches it) and
        return its offset, or -1 for a write a fault dropped or holds back."""
        with self._cond:
            log = self._logs.setdefault(channel, [])
            faults = self._faults.get(channel)
            offset = self._apply_faults(log, faults, value, msg) if faults else _store(log, value)
            self._cond.notify_all()
            return offset

    @staticmethod
    def _apply_faults(
        log: list[bytes], faults: ChannelFaults, value: bytes, msg: Message | None
    ) -> int:
        if msg is not None and faults.drop.takes(msg):
            faults.drop.count -= 1
            faults.dropped += 1
            return -1
        if msg is not None and faults.reorder.takes(msg):
            faults.reorder.count -= 1
            faults.held.append(value)
            if faults.reorder.count > 0:
                return -1
            faults.reordered += len(faults.held)
            offsets = [_store(log, held) for held in reversed(faults.held)]
            faults.held.clear()
            return offsets[0]
        offset = _store(log, value)
        if msg is not None and faults.duplicate.takes(msg):
            faults.duplicate.count -= 1
            faults.duplicated += 1
            _store(log, value)
        return offset

    # -- faults ------------------------------------------------------------------------------

    def faults(self, channel: str) -> ChannelFaults:
        """The channel's fault settings (created empty)."""
        with self._cond:
            return self._faults.setdefault(channel, ChannelFaults())

    def pause(self, channel: str) -> None:
        with self._cond:
            faults = self._faults.setdefault(channel, ChannelFaults())
            if faults.paused_at is None:
                faults.paused_at = len(self._logs.setdefault(channel, []))

    def resume(self, channel: str) -> None:
        with self._cond:
            self._faults.setdefault(channel, ChannelFaults()).paused_at = None
            self._cond.notify_all()

    def drop(self, channel: str, count: int = 1, match: Match = None) -> None:
        with self._cond:
            self._faults.setdefault(channel, ChannelFaults()).drop = _Rule(count, match)

    def duplicate(self, channel: str, count: int = 1, match: Match = None) -> None:
        with self._cond:
            self._faults.setdefault(channel, ChannelFaults()).duplicate = _Rule(count, match)

    def reorder(self, channel: str, count: int = 2, match: Match = None) -> None:
        if count < 2:
            raise ValueError("reordering needs at least two writes")
        with self._cond:
            self._faults.setdefault(channel, ChannelFaults()).reorder = _Rule(count, match)

    # -- reads -------------------------------------------------------------------------------

    def read(
        self, positions: Mapping[str, int], max_records: int, timeout_s: float = 0.0
    ) -> list[tuple[str, int, bytes]]:
        """Records at or after each channel's offset, channel by channel, at most
        ``max_records``; waits up to ``timeout_s`` for the first one."""
        with self._cond:
            found = self._available(positions, max_records)
            if not found and timeout_s > 0:
                self._cond.wait_for(lambda: self._available(positions, 1), timeout_s)
                found = self._available(positions, max_records)
            return found

    def _available(self, positions: Mapping[str, int], limit: int) -> list[tuple[str, int, bytes]]:
        found: list[tuple[str, int, bytes]] = []
        for channel, start in positions.items():
            log = self._logs.get(channel, [])
            faults = self._faults.get(channel)
            end = len(log)
            if faults is not None and faults.paused_at is not None:
                end = min(end, faults.paused_at)
            for offset in range(max(start, 0), end):
                if len(found) >= limit:
                    return found
                found.append((channel, offset, log[offset]))
        return found


def _store(log: list[bytes], value: bytes) -> int:
    log.append(value)
    return len(log) - 1


class MemoryProducer:
    """Writes messages to a ``MemoryBroker``: the ``ChannelWriter`` port (``write``) and the
    ``ChannelProducer`` calls (``send``, ``send_raw``). A write is acknowledged at once."""

    def __init__(self, broker: MemoryBroker) -> None:
        self.broker = broker

    def write(self, messages: Sequence[tuple[str, Message]]) -> list[int]:
        return [self.broker.append(ch, codec.encode(msg), msg) for ch, msg in messages]

    send = write

    def send_raw(self, channel: str, value: bytes) -> None:
        """Write bytes as they are (a poison record)."""
        self.broker.append(channel, value)

    def close(self) -> None:
        """Nothing is buffered."""


class MemoryConsumer:
    """Reads channels of a ``MemoryBroker`` from explicit positions and yields complete,
    tick-aligned MsgPacks (``kafka.ChannelConsumer``'s contract, without threads)."""

    def __init__(
        self,
        broker: MemoryBroker,
        channels: Sequence[str],
        start: Mapping[str, Position] | None = None,
    ) -> None:
        start = dict(start or {})
        self._broker = broker
        self._aligner = TickAligner(channels, start)
        self._next = {ch: start[ch].offset if ch in start else 0 for ch in channels}
        self.poison_count = 0
        #: (channel, offset) of every record skipped as undecodable
        self.poisoned: list[tuple[str, int]] = []
        self.hurried = 0
        self._fences = PendingFences()

    @property
    def fast(self) -> bool:
        return True

    @property
    def positions(self) -> dict[str, Position]:
        """Resume points after the last released pack: persist these to restart exactly."""
        return self._aligner.positions()

    def hurry(self) -> None:
        """Kafka's consumer reads faster after this; here it is only counted."""
        self.hurried += 1

    def fence(self, fence: Position) -> None:
        """As ``kafka.ChannelConsumer.fence``: applied by the poll that reads up to it."""
        self._fences.add(fence)
        self.hurry()

    def _fenced(self) -> list[MsgPack]:
        return [p for f in self._fences.due(self._next) for p in self._aligner.fence(f)]

    def poll(self, timeout_s: float = 0.0, max_records: int = 1000) -> list[MsgPack]:
        """Take what is available (waiting at most ``timeout_s`` for it) and return the
        packs it completed."""
        packs = self._fenced()
        for channel, offset, value in self._broker.read(self._next, max_records, timeout_s):
            self._next[channel] = offset + 1
            try:
                msg = codec.decode(value)
            except codec.DecodeError:
                self.poison_count += 1
                self.poisoned.append((channel, offset))
                continue
            packs += self._aligner.feed(channel, offset, msg)
        return packs + self._fenced()

    def drain(self) -> list[MsgPack]:
        """Every pack the available records complete (polls until nothing is left)."""
        packs = self._fenced()
        while self._broker.read(self._next, 1):
            packs += self.poll()
        return packs

    def close(self) -> None:
        """Nothing to release."""


def is_tick(msg: Message) -> bool:
    """A fault ``match`` for TimeTick messages."""
    return isinstance(msg, TimeTickMsg)


def is_data(msg: Message) -> bool:
    """A fault ``match`` for everything but TimeTicks (inserts, deletes, DDL)."""
    return not isinstance(msg, TimeTickMsg)
