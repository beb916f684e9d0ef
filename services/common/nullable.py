"""Nullable fields and default values: Milvus 2.5's rules, kept apart from protobuf and storage.

A column of a nullable field travels as full-length data plus a validity mask
(``FieldColumn.valid``): a null row holds a placeholder (0, False, "", a zero vector) that
nothing reads as a value (searches leave null vectors out, indexes hold only the others). A
field with a default value never stores a null: a null (or a missing column) takes the
default when the proxy accepts the rows, as in Milvus.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vectide.services.common import errors
from vectide.services.common.msgstream.message import (
    FIXED_DTYPES,
    DataType,
    FieldColumn,
    row_width,
)
from vectide.services.common.schema import FieldSchema

#: the types a default value may have, as Milvus allows them (not JSON, not vectors)
DEFAULT_VALUE_TYPES: dict[DataType, tuple[type, ...]] = {
    DataType.BOOL: (bool,),
    DataType.INT8: (int,),
    DataType.INT16: (int,),
    DataType.INT32: (int,),
    DataType.INT64: (int,),
    DataType.FLOAT: (int, float),
    DataType.DOUBLE: (int, float),
    DataType.VARCHAR: (str,),
    DataType.GEOMETRY: (str,),
    DataType.TIMESTAMPTZ: (int,),  # microseconds: the proxy parses the client's text
}


def placeholder(data_type: DataType) -> Any:
    """What a null row's slot holds: never read as a value (JSON's "" parses as no document)."""
    if data_type in FIXED_DTYPES:
        return FIXED_DTYPES[data_type].type(0)
    return ""


def row_placeholder(field: FieldSchema) -> Any:
    """A null row's slot in ``field``'s column: a zero vector for a vector field."""
    width = row_width(field.data_type, field.dim)
    if width:
        return np.zeros(width, dtype=FIXED_DTYPES[field.data_type])
    return placeholder(field.data_type)


def check_field(field: FieldSchema) -> None:
    """Milvus's schema rules for ``nullable`` and ``default_value``; raises with the field."""

    def bad(what: str) -> errors.MilvusError:
        return errors.MilvusError(
            errors.Code.COLLECTION_ILLEGAL_SCHEMA, f"field {field.name}: {what}"
        )

    if field.nullable and field.is_primary:
        raise bad("the primary key cannot be nullable")
    if field.nullable and field.data_type == DataType.SPARSE_FLOAT_VECTOR:
        raise bad("sparse vector fields cannot be nullable in Vectide yet")
    if field.nullable and field.is_partition_key:
        raise bad("the partition key cannot be nullable")
    value = field.default_value
    if value is None:
        return
    if field.is_primary:
        raise bad("the primary key cannot have a default value")
    kinds = DEFAULT_VALUE_TYPES.get(field.data_type)
    if kinds is None:
        raise bad(f"{field.data_type.name} fields cannot have a default value")
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise bad(f"default value {value!r} does not match the type {field.data_type.name}")
    if field.data_type == DataType.VARCHAR and len(value) > field.max_length:
        raise bad(f"default value is longer than max_length {field.max_length}")
    dtype = FIXED_DTYPES.get(field.data_type)
    if dtype is not None and dtype.kind == "i":
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise bad(f"default value {value} is out of range for {field.data_type.name}")


def spread(values: np.ndarray | list[Any], valid: np.ndarray, data_type: DataType) -> Any:
    """One value per valid row (what pymilvus sends) -> one per row, placeholders at nulls."""
    if isinstance(values, np.ndarray):
        shape = (len(valid), *values.shape[1:])
        out = np.full(shape, placeholder(data_type), dtype=values.dtype)
        out[valid] = values
        return out
    filler = placeholder(data_type)
    given = iter(values)
    return [next(given) if ok else filler for ok in valid.tolist()]


def settle(field: FieldSchema, column: FieldColumn) -> FieldColumn:
    """The column as it is stored: nulls take the field's default value, a null in a field
    that is neither nullable nor defaulted is refused, and a mask with no null is dropped."""
    valid = column.valid
    if valid is None or bool(valid.all()):
        column.valid = None
        return column
    if field.default_value is not None:
        column.data = _filled(column.data, valid, field.default_value)
        column.valid = None
        return column
    if not field.nullable:
        raise errors.invalid(f"field {field.name}: null value in a field that is not nullable")
    return column


def may_be_null(field: FieldSchema) -> bool:
    """Whether a row may leave ``field`` null or out: nullable fields, fields with a default."""
    return field.nullable or field.default_value is not None


def absent(field: FieldSchema, num_rows: int) -> FieldColumn | None:
    """The column of a field an insert left out: all nulls or all defaults; None when the
    field must be given."""
    if not may_be_null(field):
        return None
    filler = row_placeholder(field)
    data: Any = (
        np.full((num_rows, *np.shape(filler)), filler, dtype=FIXED_DTYPES[field.data_type])
        if field.data_type in FIXED_DTYPES
        else [filler] * num_rows
    )
    column = FieldColumn(
        field.field_id, field.name, field.data_type, data, 0, np.zeros(num_rows, dtype=bool)
    )
    return settle(field, column)


def with_nulls(values: np.ndarray | list[Any], valid: np.ndarray | None) -> Any:
    """Output values with None at null rows: a nullable field's results are always a list,
    so parts from several segments concatenate alike whether or not they hold a null."""
    if valid is None:
        return values
    items = values.tolist() if isinstance(values, np.ndarray) else values
    return [v if ok else None for v, ok in zip(items, valid.tolist(), strict=True)]


def _filled(data: np.ndarray | list[Any], valid: np.ndarray, value: Any) -> Any:
    if isinstance(data, np.ndarray):
        out = data.copy()
        out[~valid] = value
        return out
    return [v if ok else value for v, ok in zip(data, valid.tolist(), strict=True)]
