"""A field's default value between schema.proto's ``ValueField`` and a Python scalar.

pymilvus picks the ``ValueField`` member from the field's type (``int_data`` for Int8..Int32,
``long_data`` for Int64, ...); a member that does not fit the field's type is refused as
Milvus refuses it, instead of being coerced.
"""

from __future__ import annotations

from pymilvus.grpc_gen import schema_pb2

from vectide.services.common import errors, geometry, timestamptz
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.schema import FieldSchema

#: the ValueField member carrying each type's default value
MEMBER_OF: dict[DataType, str] = {
    DataType.BOOL: "bool_data",
    DataType.INT8: "int_data",
    DataType.INT16: "int_data",
    DataType.INT32: "int_data",
    DataType.INT64: "long_data",
    DataType.FLOAT: "float_data",
    DataType.DOUBLE: "double_data",
    DataType.VARCHAR: "string_data",
    DataType.GEOMETRY: "string_data",  # WKT, normalized as rows are
    DataType.TIMESTAMPTZ: "string_data",  # ISO text in, microseconds kept, ISO text out
}
#: members a client may use for a type besides its own (an int literal for Int64, ...)
_ALSO_ACCEPTED: dict[DataType, frozenset[str]] = {
    DataType.INT64: frozenset({"int_data"}),
    DataType.DOUBLE: frozenset({"float_data"}),
    DataType.TIMESTAMPTZ: frozenset({"timestamptz_data"}),
}


def default_from_proto(
    f: schema_pb2.FieldSchema, zone: str = timestamptz.DEFAULT_TIMEZONE
) -> bool | int | float | str | None:
    """The default value a client set on ``f``, or None; a TIMESTAMPTZ default's naive
    text is in ``zone`` (the collection's)."""
    if not f.HasField("default_value"):
        return None
    member = f.default_value.WhichOneof("data")
    if member is None:
        return None
    data_type = DataType(f.data_type)
    expected = MEMBER_OF.get(data_type)
    if expected is None:
        raise errors.MilvusError(
            errors.Code.COLLECTION_ILLEGAL_SCHEMA,
            f"field {f.name}: {data_type.name} fields cannot have a default value",
        )
    if member != expected and member not in _ALSO_ACCEPTED.get(data_type, ()):
        raise errors.MilvusError(
            errors.Code.COLLECTION_ILLEGAL_SCHEMA,
            f"field {f.name}: the default value's type ({member}) does not match the field's "
            f"type {data_type.name}",
        )
    value = getattr(f.default_value, member)
    if not isinstance(value, str):
        return value
    try:  # text stored in another form: normalized WKT, microseconds
        if data_type == DataType.GEOMETRY:
            return geometry.normalized([value])[0]
        if data_type == DataType.TIMESTAMPTZ:
            return timestamptz.parse(value, zone)
    except (geometry.GeometryError, timestamptz.TimestamptzError) as exc:
        raise errors.MilvusError(
            errors.Code.COLLECTION_ILLEGAL_SCHEMA, f"field {f.name}: default value: {exc}"
        ) from None
    return value


def default_to_proto(
    field: FieldSchema, zone: str = timestamptz.DEFAULT_TIMEZONE
) -> schema_pb2.ValueField | None:
    """The field's default value as DescribeCollection reports it (a TIMESTAMPTZ one as
    text in ``zone``, the collection's)."""
    if field.default_value is None:
        return None
    value = schema_pb2.ValueField()
    if field.data_type == DataType.TIMESTAMPTZ:
        value.string_data = timestamptz.render(int(field.default_value), zone)
        return value
    setattr(value, MEMBER_OF[field.data_type], field.default_value)
    return value
