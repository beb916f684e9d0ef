"""Which time zone a request reads and writes TIMESTAMPTZ text in, and the replies' columns
rendered in it (services/common/timestamptz.py holds the conversions).

As Milvus's proxy resolves it: the request's ``timezone`` parameter, else the collection's
``timezone`` property (a collection created in a database with a ``timezone`` property and
none of its own takes the database's), else UTC. Query nodes see microseconds only; the
proxy turns them into text, or into the components ``time_fields`` names, last.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pymilvus.grpc_gen import schema_pb2

from vectide.services.common import errors, timestamptz
from vectide.services.common.collection_properties import checked_zone
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.schema import CollectionInfo


def collection_zone(info: CollectionInfo) -> str:
    return timestamptz.zone_of(info.properties)


def read_zone(info: CollectionInfo, requested: str) -> str:
    """The zone of a read's ISO literals and of its TIMESTAMPTZ output: the request's
    ``timezone`` (``requested``, "" for none), else the collection's."""
    return checked_zone(requested) if requested else collection_zone(info)


def read_params(params: list[Any]) -> dict[str, str]:
    """A query's or search's ``timezone`` and ``time_fields`` (among its ``query_params``,
    ``search_params``, or a hybrid search's ``rank_params``) as ReadSpec fields."""
    found = {
        kv.key: kv.value
        for kv in params
        if kv.key in (timestamptz.TIMEZONE_KEY, timestamptz.TIME_FIELDS_KEY)
    }
    return {
        "timezone": found.get(timestamptz.TIMEZONE_KEY, ""),
        "time_fields": found.get(timestamptz.TIME_FIELDS_KEY, ""),
    }


def time_components(text: str) -> list[str]:
    """The components a request's ``time_fields`` asks for (none: the instants as text)."""
    if not text.strip():
        return []
    try:
        return timestamptz.components(text)
    except timestamptz.TimestamptzError as exc:
        raise errors.invalid(str(exc)) from None


def render(
    fields_data: Iterable[schema_pb2.FieldData], zone: str, components: Sequence[str]
) -> None:
    """Every TIMESTAMPTZ column of a reply, from microseconds (``timestamptz_data``) to ISO
    text in ``zone`` (``string_data``), or to an Int64 ARRAY of each row's ``components``
    (the column then says ARRAY, as Milvus's does)."""
    for fd in fields_data:
        if fd.type != DataType.TIMESTAMPTZ:
            continue
        micros = list(fd.scalars.timestamptz_data.data)
        fd.scalars.ClearField("timestamptz_data")
        if not components:
            fd.scalars.string_data.data.extend(timestamptz.render_column(micros, zone))
            continue
        rows = fd.scalars.array_data
        rows.element_type = DataType.INT64
        for values in timestamptz.extract(micros, zone, components):
            rows.data.add().long_data.data.extend(values)
        fd.type = DataType.ARRAY
