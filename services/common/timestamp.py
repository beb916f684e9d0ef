"""Hybrid timestamps: ``(physical_ms << 18) | logical``, Milvus's layout.

Keeping Milvus's layout means timestamps that pymilvus sees (``guarantee_timestamp``,
insert results) mean the same thing here, and a hybrid stamp can be turned back into a
wall-clock time for humans and for Bounded consistency.
"""

from __future__ import annotations

import time

LOGICAL_BITS = 18
LOGICAL_MASK = (1 << LOGICAL_BITS) - 1
MAX_LOGICAL = LOGICAL_MASK
#: Largest physical part that still fits a signed 64-bit integer (Avro ``long``).
MAX_PHYSICAL_MS = (1 << (63 - LOGICAL_BITS)) - 1


def compose(physical_ms: int, logical: int = 0) -> int:
    """Pack a physical time in milliseconds and a logical counter into one stamp."""
    if not 0 <= logical <= MAX_LOGICAL:
        raise ValueError(f"logical part {logical} outside [0, {MAX_LOGICAL}]")
    if not 0 <= physical_ms <= MAX_PHYSICAL_MS:
        raise ValueError(f"physical part {physical_ms} outside [0, {MAX_PHYSICAL_MS}]")
    return (physical_ms << LOGICAL_BITS) | logical


def parse(ts: int) -> tuple[int, int]:
    """Split a stamp into ``(physical_ms, logical)``."""
    if ts < 0:
        raise ValueError(f"timestamp {ts} is negative")
    return ts >> LOGICAL_BITS, ts & LOGICAL_MASK


def physical_ms(ts: int) -> int:
    return ts >> LOGICAL_BITS


def add_physical_ms(ts: int, delta_ms: int) -> int:
    """Shift a stamp by a wall-clock duration, keeping its logical part (may be negative)."""
    physical, logical = parse(ts)
    return compose(max(physical + delta_ms, 0), logical)


def from_unix_seconds(seconds: float) -> int:
    return compose(int(seconds * 1000))


def to_unix_seconds(ts: int) -> float:
    return physical_ms(ts) / 1000.0


def now_ms() -> int:
    """Wall-clock milliseconds; the one clock the TSO reads (tests inject their own)."""
    return time.time_ns() // 1_000_000
