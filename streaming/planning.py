"""Driver-side planning of the data node's micro-batches: which offset range of each channel
the next batch covers. Pure: records seen on the channels go in, end offsets come out; the
Kafka scanning lives in ``source.py`` and the work on the ranges in ``flush.py``.

Why a planner at all, when Kafka has watermarks: Tansu's high watermark lags the true end of
a topic, so the driver ends a batch right after a record it knows exists. It learns of records
in one of two ways: from the tick index (``msgstream/tick_index.py``: the rootcoord publishes
where each tick landed, so the driver knows the ticks only, and every offset below a known
tick exists), or, where there is no index, by reading the channels forward itself (every
record, its size and whether it is a tick). It only keeps offsets, sizes and tick stamps,
never payloads.

A batch is cut where it should be:

- a channel's range is capped by ``max_records`` offsets and, for records the driver read,
  ``max_bytes`` (a backlog never makes one huge batch; the rest follows in the next ones;
  executors also write a long range in pieces, see ``source.py``). The cap may fall between
  two ticks:
  the executor writes every record of its range and checkpoints the last tick in it, so a
  channel with any number of records between ticks still advances;
- a batch runs when data arrived, when a flush waits for a stamp the channels' checkpoints
  have not reached, or every ``idle_advance_s`` when only ticks arrived (moving a checkpoint
  is not worth a Spark job per trigger on an idle data node). Such a batch needs no read:
  the driver knows each range's last tick, so one task reports every channel's checkpoint
  (``last_tick``) instead of a task per channel reading ticks back from the broker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Seen:
    """One record the driver read: where it is, how big, and its stamp if it is a tick."""

    offset: int
    size: int
    tick_ts: int | None = None


@dataclass
class ChannelScan:
    """What the driver knows of one channel from the batch start on."""

    start: int
    #: the next offset the scanner delivers (records before it are in ``seen``)
    scanned_to: int
    seen: list[Seen] = field(default_factory=list)

    def rebase(self, start: int) -> bool:
        """Move to a new batch start; False when the scan must restart there (Spark moved
        somewhere the scanner has not been, e.g. a restart from the checkpoint)."""
        if not self.start <= start <= self.scanned_to:
            self.start = self.scanned_to = start
            self.seen = []
            return False
        self.start = start
        self.seen = [s for s in self.seen if s.offset >= start]
        return True

    def observe(self, record: Seen) -> None:
        if record.offset < self.scanned_to:
            return  # already known (a re-delivery after a seek)
        self.seen.append(record)
        self.scanned_to = record.offset + 1

    def cut(self, max_records: int, max_bytes: int) -> tuple[int, bool, int]:
        """(end offset, whether data lies in [start, end), highest tick stamp in it).

        Counts offsets, not records seen: the driver may know only the ticks (from the tick
        index), and every offset below ``scanned_to`` exists. An offset it knows nothing of
        is taken for data (the executor reads the range and finds out). Bytes are only
        known of records the driver read itself."""
        cap = self.start + max_records
        end, tick_ts, ticks, size, by_bytes = self.start, 0, 0, 0, False
        for record in self.seen:
            if record.offset >= cap:
                break
            size += record.size
            if size > max_bytes and end > self.start:
                by_bytes = True
                break
            end = record.offset + 1
            if record.tick_ts is not None:
                tick_ts = max(tick_ts, record.tick_ts)
                ticks += 1
        if not by_bytes and end < cap < self.scanned_to:
            end = cap  # the records up to the cap exist (a later one was seen)
        return end, end - self.start > ticks, tick_ts

    def last_tick(self, start: int, end: int) -> tuple[int, int] | None:
        """(offset after the last tick, its stamp) when the driver knows every offset of
        ``[start, end)`` holds a tick; None when it holds data or offsets it does not know."""
        if start != self.start or end > self.scanned_to or end <= start:
            return None
        last: Seen | None = None
        ticks = 0
        for record in self.seen:
            if record.offset >= end:
                break
            if record.tick_ts is None:
                return None
            last, ticks = record, ticks + 1
        if last is None or last.tick_ts is None or ticks != end - start:
            return None
        return last.offset + 1, last.tick_ts


@dataclass
class PlanLimits:
    #: records of one channel in one batch (one executor task holds its range in memory)
    max_records: int = 2_000
    #: bytes of one channel in one batch
    max_bytes: int = 256 * 1024 * 1024
    #: with only ticks arriving, move the checkpoints this often (``data.idle_checkpoint_s``)
    idle_advance_s: float = 30.0


class OffsetPlanner:
    """Plans each batch's end offsets per channel from what the scanner saw."""

    def __init__(
        self,
        channels: Iterable[str],
        limits: PlanLimits | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        import time

        self.limits = limits or PlanLimits()
        self._clock = clock or time.monotonic
        self.scans = {c: ChannelScan(0, 0) for c in channels}
        self._last_advance = float("-inf")
        #: per channel, the highest tick stamp a planned batch included
        self._planned_ts: dict[str, int] = dict.fromkeys(self.scans, 0)

    def rebase(self, start: dict[str, int]) -> dict[str, int]:
        """Adopt the batch start Spark gives; returns the channels the scanner must seek
        (to the offset given) because it has not read from there."""
        seeks = {}
        for channel, scan in self.scans.items():
            if not scan.rebase(int(start.get(channel, 0))):
                seeks[channel] = scan.start
        return seeks

    def observe(self, channel: str, record: Seen) -> None:
        scan = self.scans.get(channel)
        if scan is not None:  # an index entry may name channels this job does not read
            scan.observe(record)

    def last_tick(self, channel: str, start: int, end: int) -> tuple[int, int] | None:
        """See ``ChannelScan.last_tick``: a range known to hold only ticks needs no read."""
        scan = self.scans.get(channel)
        return scan.last_tick(start, end) if scan is not None else None

    def plan(self, flush_wanted_ts: int = 0) -> dict[str, int]:
        """End offsets of the next batch; the start offsets when it should not run now."""
        start = {c: s.start for c, s in self.scans.items()}
        end, data, ticks = {}, False, {}
        for channel, scan in self.scans.items():
            end[channel], has_data, ticks[channel] = scan.cut(
                self.limits.max_records, self.limits.max_bytes
            )
            data = data or has_data
        if end == start:
            return start
        now = self._clock()
        behind_flush = flush_wanted_ts > 0 and any(
            self._planned_ts[c] < flush_wanted_ts and ticks[c] > self._planned_ts[c]
            for c in self.scans
        )
        if not (data or behind_flush or now - self._last_advance >= self.limits.idle_advance_s):
            return start
        self._last_advance = now
        for channel, ts in ticks.items():
            self._planned_ts[channel] = max(self._planned_ts[channel], ts)
        return end
