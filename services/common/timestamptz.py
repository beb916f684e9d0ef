"""TIMESTAMPTZ values (Milvus 2.6.6): instants stored as int64 microseconds since the Unix
epoch (UTC), written and read as ISO 8601 text in a time zone.

Text is read as Milvus's proxy reads it (Go layouts, ``pkg/util/timestamptz``): an instant
with its offset (``2025-05-01T23:59:59+08:00``, ``...Z``; with a space instead of the ``T``
the offset may also be ``+08``), or a naive one (``2025-05-01 23:59:59``, ``T`` or space,
fractions of a second optional) taken in a default zone: the request's ``timezone``, else the
collection's, else the database's, else UTC. An explicit offset must lie in [-12, +14]
hours. Instants are written back as Go's RFC 3339 in the zone, to the microsecond with
trailing zeros cut (``2025-01-01T16:00:00.5Z``; an offset of zero is ``Z``).

``INTERVAL 'P1Y2M3DT4H5M6S'`` arithmetic follows segcore: the fields are added to the
instant's UTC calendar date and time and the result normalized as ``timegm`` does
(January 31 plus one month is March 3, or 2 in a leap year).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np

#: the collection, database and request key of a zone (Milvus's ``common.TimezoneKey``)
TIMEZONE_KEY = "timezone"
#: the query and search key of the components to extract instead of the text
TIME_FIELDS_KEY = "time_fields"
DEFAULT_TIMEZONE = "UTC"
#: what ``time_fields`` may name, and how each is read off a local date and time
COMPONENTS = ("year", "month", "day", "hour", "minute", "second", "microsecond")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_MAX_OFFSET_S, _MIN_OFFSET_S = 14 * 3600, -12 * 3600
_INSTANT = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})([T ])(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(Z|[+-]\d{2}:\d{2}|[+-]\d{2})?"
)
_DURATION = re.compile(r"P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?")


class TimestamptzError(ValueError):
    """Text that is no instant, duration or time zone Milvus would accept."""


@lru_cache(maxsize=256)
def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name`` (``Asia/Shanghai``, ``UTC``)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise TimestamptzError(f"unknown or invalid IANA Time Zone ID: {name}") from None


def check_zone(name: str) -> str:
    zone(name)
    return name


def zone_of(properties: Mapping[str, str]) -> str:
    """A collection's zone: its ``timezone`` property (checked when set), else UTC."""
    return properties.get(TIMEZONE_KEY) or DEFAULT_TIMEZONE


def parse(text: str, default_zone: str = DEFAULT_TIMEZONE) -> int:
    """``text`` as microseconds since the epoch; a naive instant is in ``default_zone``."""
    match = _INSTANT.fullmatch(text.strip()) if isinstance(text, str) else None
    short_offset = match is not None and match[9] is not None and len(match[9]) == 3
    if match is None or (match[4] == "T" and short_offset):  # "+08" only after a space
        raise TimestamptzError(
            f"invalid timestamp string: {text!r}. Does not match any known format"
        )
    year, month, day, _, hour, minute, second, fraction, offset = match.groups()
    tz = zone(default_zone) if offset is None else _offset(offset)
    try:
        moment = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=tz
        )
    except ValueError as exc:
        raise TimestamptzError(f"invalid timestamp string: {text!r}: {exc}") from None
    micros = int((fraction or "0").ljust(9, "0")[:6])
    return (moment - _EPOCH) // _MICROSECOND + micros


def _offset(text: str) -> timezone:
    if text == "Z":
        return UTC
    sign = -1 if text[0] == "-" else 1
    hours, _, minutes = text[1:].partition(":")
    seconds = sign * (int(hours) * 3600 + int(minutes or 0) * 60)
    if not _MIN_OFFSET_S <= seconds <= _MAX_OFFSET_S:
        raise TimestamptzError(
            f"UTC offset hour {int(seconds / 3600)} is out of the valid range [-12, 14]"
        )
    return timezone(timedelta(seconds=seconds))


def parse_column(texts: Iterable[str], default_zone: str) -> np.ndarray:
    return np.fromiter((parse(text, default_zone) for text in texts), dtype=np.int64)


def _local(micros: int, tz: ZoneInfo) -> datetime:
    return (_EPOCH + micros * _MICROSECOND).astimezone(tz)


def render(micros: int, zone_name: str = DEFAULT_TIMEZONE) -> str:
    """An instant as Go's RFC 3339 text in the zone, microseconds without trailing zeros."""
    local = _local(micros, zone(zone_name))
    text = local.replace(microsecond=0, tzinfo=None).isoformat()  # the year in four digits
    if local.microsecond:
        text += f".{local.microsecond:06d}".rstrip("0")
    offset_min = int(local.utcoffset().total_seconds()) // 60  # type: ignore[union-attr]
    if offset_min == 0:
        return text + "Z"
    sign = "-" if offset_min < 0 else "+"
    return text + f"{sign}{abs(offset_min) // 60:02d}:{abs(offset_min) % 60:02d}"


def render_column(micros: Sequence[int], zone_name: str) -> list[str]:
    return [render(value, zone_name) for value in micros]


def components(text: str) -> list[str]:
    """``time_fields`` ("year, month day") as component names, in order."""
    names = [name.lower() for name in re.split(r"[,\s]+", text.strip()) if name]
    unknown = next((name for name in names if name not in COMPONENTS), None)
    if unknown is not None or not names:
        raise TimestamptzError(
            f"unsupported field for extraction: {unknown or text!r}, fields should be "
            "separated by ',' or ' '"
        )
    return names


def extract(micros: Sequence[int], zone_name: str, names: Sequence[str]) -> list[list[int]]:
    """Each instant's ``names`` components in the zone's local time."""
    tz = zone(zone_name)
    return [[getattr(local, name) for name in names] for local in (_local(v, tz) for v in micros)]


@dataclass(frozen=True, slots=True)
class Interval:
    """An ISO 8601 duration's fields, each added to its own calendar field."""

    years: int = 0
    months: int = 0
    days: int = 0
    hours: int = 0
    minutes: int = 0
    seconds: int = 0

    @staticmethod
    def parse(text: str) -> Interval:
        match = _DURATION.fullmatch(text.strip())
        if match is None or text.strip() in ("P", "") or text.strip().endswith("T"):
            raise TimestamptzError(f"invalid ISO 8601 duration: {text!r}")
        return Interval(*(int(part or 0) for part in match.groups()))

    def shift(self, micros: np.ndarray, sign: int) -> np.ndarray:
        """``micros`` plus (``sign`` 1) or minus (-1) this interval, in UTC's calendar."""
        micros = np.asarray(micros, dtype=np.int64)
        fixed = (((self.days * 24 + self.hours) * 60 + self.minutes) * 60 + self.seconds) * 10**6
        months = self.years * 12 + self.months
        if months:
            instants = micros.astype("datetime64[us]")
            month_starts = instants.astype("datetime64[M]")
            into_month = instants - month_starts.astype("datetime64[us]")
            shifted = (month_starts + sign * months).astype("datetime64[us]") + into_month
            micros = shifted.astype(np.int64)
        return micros + sign * fixed
