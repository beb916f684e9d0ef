"""Time travel within the retention window: which snapshot a read travels to, whether that
snapshot is still kept, and up to where compaction may purge deleted rows.

Every row a query node holds keeps its insert stamp and the stamp of the delete that hit
it, so a read at any snapshot ``T`` is exact as long as nothing alive at ``T`` was purged.
Compaction purges rows deleted at or before a plan's ``delete_ts``; with a retention of
``R`` seconds that stamp never passes ``now - R`` (minus :data:`PURGE_SLACK_MS`), so every
snapshot of the last ``R`` seconds stays exact. Pure: stamps and clocks in, answers out.

How a client asks (pymilvus 2.6 sends no ``travel_timestamp``, Milvus 2.3+ ignores it):

- ``consistency_level="Customized"`` with ``guarantee_timestamp=T``: with retention on,
  the read is at exactly ``T`` (Milvus's own query iterators read at their guarantee stamp
  the same way); with retention off it keeps its meaning of a guarantee (read at least ``T``);
- the request's ``travel_timestamp`` field (raw gRPC, pymilvus 2.2's ``travel_timestamp``).

A stamp in the future waits like a guarantee, up to the read's usual timeout.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from vectide.services.common import errors, timestamp
from vectide.services.common.schema import ConsistencyLevel

#: pymilvus's stamp for "no guarantee" (Eventually, or Customized without a stamp)
EVENTUALLY_TS = 1
#: compaction keeps deletes this much longer than the window: a proxy's clock may lag the
#: TSO the cap is computed from, and a read at the window's very edge must stay exact
PURGE_SLACK_MS = 60_000


@dataclass(frozen=True)
class Retention:
    """``data.retention_s``: how far back reads may travel (0: time travel is off)."""

    seconds: float = 0.0

    @property
    def enabled(self) -> bool:
        return self.seconds > 0

    def requested(
        self,
        level: ConsistencyLevel,
        use_default_consistency: bool,
        guarantee_ts: int,
        travel_ts: int = 0,
    ) -> int:
        """The snapshot a read asks to travel to; 0 for an ordinary read (at the tsafe)."""
        if travel_ts:
            return travel_ts
        customized = not use_default_consistency and level == ConsistencyLevel.CUSTOMIZED
        if self.enabled and customized and guarantee_ts > EVENTUALLY_TS:
            return guarantee_ts
        return 0

    def window_start(self, now_ms: int) -> int:
        """The oldest stamp a read may travel to at wall-clock ``now_ms``."""
        return timestamp.compose(max(now_ms - int(self.seconds * 1000), 0))

    def check(self, travel_ts: int, now_ms: int) -> None:
        """Refuse a travel stamp the window no longer keeps, naming the window."""
        if not self.enabled:
            raise errors.invalid(
                f"time travel to {travel_ts} ({_iso(travel_ts)}) is off: "
                "data.retention_s is 0 (set it to keep snapshots that long)",
            )
        start = self.window_start(now_ms)
        if travel_ts < start:
            raise errors.invalid(
                f"travel timestamp {travel_ts} ({_iso(travel_ts)}) is older than the retention "
                f"window: data.retention_s = {self.seconds:g} keeps snapshots from "
                f"{start} ({_iso(start)}) on",
            )

    def purge_ts(self, now_ts: int) -> int | None:
        """The newest delete stamp compaction may purge at TSO stamp ``now_ts`` (None:
        no limit, retention is off)."""
        if not self.enabled:
            return None
        keep_ms = int(self.seconds * 1000) + PURGE_SLACK_MS
        return timestamp.add_physical_ms(now_ts, -keep_ms)


def _iso(ts: int) -> str:
    """A stamp's wall-clock time, for humans reading an error."""
    seconds = timestamp.to_unix_seconds(ts)
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")
