"""Timetick-aligned consumption across channels (the seeds' bufMsgPack), as a pure core.

Messages of one channel arrive in log order, which is not timestamp order: two proxies can
write ts=7 after ts=9, and a message just before ``TimeTick(T)`` may have ts > T. The tick
promises only that everything after it has ts > T. So a pack ``(prev, T]`` is complete once
every channel has delivered a tick >= T; messages beyond T wait in the buffer for a later pack.

Feed it ``(channel, offset, message)`` in the order each channel yields them; it returns the
packs that became complete. No I/O: the Kafka consumer drives it.

A *fence* is a tick nobody wrote: ``Position(channel, end, ts)`` from the rootcoord says
that every message with a stamp ``<= ts`` lies below offset ``end`` (every writer's
promise covers ``ts`` and its acknowledged writes end there). Once a consumer has read up
to ``end``, the fence completes packs exactly as a TimeTick at ``end - 1`` would. Strong
and Bounded reads travel with fences instead of waiting for a TimeTick written into every
channel (for each Strong read, before fences): a broker whose cost grows with a topic's
record count (Tansu) is not fed a record per read.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from vectide.services.common.msgstream.message import (
    DataMessage,
    Message,
    MsgPack,
    Position,
    TimeTickMsg,
)


@dataclass
class _ChannelState:
    name: str
    #: resume point of the last released pack
    position: Position
    #: highest tick seen
    tick_ts: int = -1
    #: ticks seen but not yet released: (tick ts, offset after the tick)
    ticks: deque[tuple[int, int]] = field(default_factory=deque)
    #: undelivered messages in log order, with their offsets
    buffer: list[tuple[int, DataMessage]] = field(default_factory=list)


class TickAligner:
    def __init__(
        self, channels: Iterable[str], start: Mapping[str, Position] | None = None
    ) -> None:
        start = dict(start or {})
        self._channels: dict[str, _ChannelState] = {}
        for name in channels:
            pos = start.get(name, Position(name, 0, 0))
            self._channels[name] = _ChannelState(name, pos)
        if not self._channels:
            raise ValueError("a TickAligner needs at least one channel")
        #: end ts of the last released pack; packs start above the slowest resume point
        self._released_ts = min(s.position.ts for s in self._channels.values())

    @property
    def released_ts(self) -> int:
        return self._released_ts

    def positions(self) -> dict[str, Position]:
        return {name: s.position for name, s in self._channels.items()}

    def feed(self, channel: str, offset: int, msg: Message) -> list[MsgPack]:
        state = self._channels[channel]
        if isinstance(msg, TimeTickMsg):
            if msg.ts > state.tick_ts:
                state.tick_ts = msg.ts
                state.ticks.append((msg.ts, offset + 1))
                return self._release()
            return []
        if msg.ts > state.position.ts:  # at or below it: delivered before a restart
            state.buffer.append((offset, msg))
        return []

    def _release(self) -> list[MsgPack]:
        end_ts = min(s.tick_ts for s in self._channels.values())
        if end_ts <= self._released_ts:
            return []
        msgs: list[DataMessage] = []
        for state in self._channels.values():
            if state.buffer:
                msgs += [m for _, m in state.buffer if m.ts <= end_ts]
                state.buffer = [(o, m) for o, m in state.buffer if m.ts > end_ts]
            state.position = Position(state.name, self._resume_offset(state, end_ts), end_ts)
        pack = MsgPack(self._released_ts, end_ts, msgs, self.positions())
        self._released_ts = end_ts
        return [pack]

    def fence(self, fence: Position) -> list[MsgPack]:
        """Apply a fence once its channel was read up to ``fence.offset`` (the caller's
        part: see :class:`PendingFences`)."""
        return self.feed(fence.channel, fence.offset - 1, TimeTickMsg(0, fence.ts, 0))

    @staticmethod
    def _resume_offset(state: _ChannelState, end_ts: int) -> int:
        """After the last tick <= end_ts, but never past an undelivered message: a message
        written just before a tick may carry a larger stamp than the tick (its writer was
        stamped after the tick's minimum was taken)."""
        offset = state.position.offset
        while state.ticks and state.ticks[0][0] <= end_ts:
            offset = state.ticks.popleft()[1]
        if state.buffer:
            offset = min(offset, state.buffer[0][0])
        return offset


class PendingFences:
    """Fences handed over by reads (any thread) until the reading thread got to them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[Position] = []

    def add(self, fence: Position) -> None:
        with self._lock:
            self._pending.append(fence)

    def __bool__(self) -> bool:
        return bool(self._pending)

    def due(self, next_offsets: Mapping[str, int]) -> list[Position]:
        """The fences whose channel was read up to their offset (and forget them)."""
        if not self._pending:
            return []
        with self._lock:
            due = [f for f in self._pending if next_offsets.get(f.channel, -1) >= f.offset]
            self._pending = [f for f in self._pending if f not in due]
        return sorted(due, key=lambda f: f.ts)
