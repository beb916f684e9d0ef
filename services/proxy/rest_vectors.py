"""REST v2's JSON forms of the vector types beyond float32, as Milvus's REST server reads
and writes them (``internal/distributed/proxy/httpserver``):

- BinaryVector: an array of ``dim / 8`` byte values, or their base64 text; returned as
  base64 (Go's JSON form of bytes);
- Float16Vector, BFloat16Vector: an array of ``dim`` numbers (narrowed from float32), or
  the base64 text of their ``2 * dim`` bytes; returned as base64;
- Int8Vector: an array of ``dim`` integers in [-128, 127] (or base64 of the bytes);
  returned as an array of integers;
- SparseFloatVector: an object ``{"index": value}`` or ``{"indices": [...], "values":
  [...]}``; returned as the first.

Search ``data`` takes the same forms, one per query. Pure conversions: errors are
ValueError, which the callers turn into Milvus's codes.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
from pymilvus.grpc_gen import common_pb2, schema_pb2

from vectide.services.common import field_values, vector_types
from vectide.services.common.msgstream.message import DataType

DT = schema_pb2.DataType
#: the VectorField member and the placeholder type of each byte-packed vector type
_BYTES = {
    DT.BinaryVector: ("binary_vector", common_pb2.PlaceholderType.BinaryVector),
    DT.Float16Vector: ("float16_vector", common_pb2.PlaceholderType.Float16Vector),
    DT.BFloat16Vector: ("bfloat16_vector", common_pb2.PlaceholderType.BFloat16Vector),
    DT.Int8Vector: ("int8_vector", common_pb2.PlaceholderType.Int8Vector),
}
TYPES = frozenset({*_BYTES, DT.SparseFloatVector})


def _dim(field: schema_pb2.FieldSchema) -> int:
    return int(next((kv.value for kv in field.type_params if kv.key == "dim"), "0") or 0)


def row_bytes(field: schema_pb2.FieldSchema, value: Any) -> bytes:
    """One vector of ``field`` in its wire form (bytes for dense types, Milvus's sparse row
    layout for sparse ones); the forms are ``field_values``', shared with Kafka ingest."""
    if field.data_type == DT.SparseFloatVector:
        return field_values.sparse_row_bytes(value)
    return field_values.dense_row_bytes(DataType(field.data_type), _dim(field), value)


def write_column(fd: schema_pb2.FieldData, field: schema_pb2.FieldSchema, values: list) -> None:
    """Rows of ``field`` into ``fd`` as pymilvus would send them."""
    rows = [row_bytes(field, v) for v in values]
    if field.data_type == DT.SparseFloatVector:
        fd.vectors.sparse_float_vector.contents.extend(rows)
        return
    fd.vectors.dim = _dim(field)
    setattr(fd.vectors, _BYTES[field.data_type][0], b"".join(rows))


def placeholder(field: schema_pb2.FieldSchema, data: list) -> common_pb2.PlaceholderValue:
    """Search ``data`` of ``field`` as the placeholder pymilvus would send."""
    kind = (
        common_pb2.PlaceholderType.SparseFloatVector
        if field.data_type == DT.SparseFloatVector
        else _BYTES[field.data_type][1]
    )
    values = [row_bytes(field, v) for v in data]
    return common_pb2.PlaceholderValue(tag="$0", type=kind, values=values)


def render_column(fd: schema_pb2.FieldData) -> list[Any]:
    """A result column's rows in Milvus's REST form."""
    if fd.type == DT.SparseFloatVector:
        return [_sparse_object(row) for row in fd.vectors.sparse_float_vector.contents]
    raw = getattr(fd.vectors, _BYTES[fd.type][0])
    dim = fd.vectors.dim
    if fd.type == DT.Int8Vector:  # Go's JSON form of []int8: numbers, not base64
        return np.frombuffer(raw, dtype=np.int8).reshape(-1, dim).tolist() if dim else []
    width = field_values.row_width_bytes(DataType(fd.type), dim)
    return [base64.b64encode(raw[i : i + width]).decode() for i in range(0, len(raw), width)]


def _sparse_object(row: bytes) -> dict[str, float]:
    indices, weights = vector_types.sparse_entries(row)
    shortest = weights.astype(str).astype(np.float64).tolist()  # float32's shortest text
    return dict(zip(map(str, indices.tolist()), shortest, strict=True))
