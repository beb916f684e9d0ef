"""Milvus's protobuf columns of vectors and ARRAY fields, to and from Vectide's columns.

Dense vectors arrive as packed bytes (binary, float16, bfloat16) or packed floats (float32)
and stay numpy arrays of their storage type (see ``services/common/vector_types.py``);
sparse vectors stay rows of bytes in Milvus's layout; an ARRAY field's rows become JSON
text (a list), which the query nodes filter like a JSON field.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from pymilvus.grpc_gen import common_pb2, schema_pb2

from vectide.services.common import errors, field_values, vector_types
from vectide.services.common.msgstream.message import FIXED_DTYPES, DataType, row_width
from vectide.services.common.schema import FieldSchema
from vectide.services.proxy.default_values import MEMBER_OF

#: the VectorField member carrying each dense byte-packed type
_BYTES_MEMBER = {
    DataType.BINARY_VECTOR: "binary_vector",
    DataType.FLOAT16_VECTOR: "float16_vector",
    DataType.BFLOAT16_VECTOR: "bfloat16_vector",
    DataType.INT8_VECTOR: "int8_vector",
}
#: the placeholder type a search on each vector type sends
PLACEHOLDER_TYPES = {
    DataType.FLOAT_VECTOR: common_pb2.PlaceholderType.FloatVector,
    DataType.BINARY_VECTOR: common_pb2.PlaceholderType.BinaryVector,
    DataType.FLOAT16_VECTOR: common_pb2.PlaceholderType.Float16Vector,
    DataType.BFLOAT16_VECTOR: common_pb2.PlaceholderType.BFloat16Vector,
    DataType.INT8_VECTOR: common_pb2.PlaceholderType.Int8Vector,
    DataType.SPARSE_FLOAT_VECTOR: common_pb2.PlaceholderType.SparseFloatVector,
}
#: ARRAY element types: the ScalarField member holding them, named as the ValueField members
#: of default values (their values' checks: ``field_values.check_array``)
ARRAY_ELEMENTS: dict[DataType, str] = MEMBER_OF


# -- vectors in -------------------------------------------------------------------------------


def vectors(fd: schema_pb2.FieldData, field: FieldSchema) -> np.ndarray | list[bytes]:
    """A vector column of any type, checked against the field."""
    if field.data_type == DataType.FLOAT_VECTOR:
        return float_vectors(fd, field)
    if field.data_type == DataType.SPARSE_FLOAT_VECTOR:
        return sparse_vectors(fd, field)
    return byte_vectors(fd, field)


def float_vectors(fd: schema_pb2.FieldData, field: FieldSchema) -> np.ndarray:
    dim = fd.vectors.dim or field.dim
    if dim != field.dim:
        raise errors.invalid(f"vector field {field.name}: dim {dim}, expected {field.dim}")
    flat = _read_packed_floats(fd.vectors.float_vector)
    if len(flat) % dim:
        raise errors.invalid(f"vector field {field.name}: data is not a multiple of dim")
    check_finite(flat, f"vector field {field.name}")
    return flat.reshape(-1, dim)


def byte_vectors(fd: schema_pb2.FieldData, field: FieldSchema) -> np.ndarray:
    """A binary, float16 or bfloat16 column as ``rows x row_width`` of its storage type."""
    dim = fd.vectors.dim or field.dim
    if dim != field.dim:
        raise errors.invalid(f"vector field {field.name}: dim {dim}, expected {field.dim}")
    raw = getattr(fd.vectors, _BYTES_MEMBER[field.data_type])
    dtype, width = FIXED_DTYPES[field.data_type], row_width(field.data_type, dim)
    row_bytes = width * dtype.itemsize
    if len(raw) % row_bytes:
        raise errors.invalid(
            f"vector field {field.name}: {len(raw)} bytes is not a multiple of {row_bytes} "
            f"({field.data_type.name}, dim {dim})"
        )
    rows = np.frombuffer(raw, dtype=dtype).reshape(-1, width)
    if (
        field.data_type != DataType.BINARY_VECTOR
        and not np.isfinite(vector_types.as_float32(field.data_type, rows)).all()
    ):
        raise errors.invalid(f"vector field {field.name} contains NaN or infinity")
    return rows


def sparse_vectors(fd: schema_pb2.FieldData, field: FieldSchema) -> list[bytes]:
    rows = list(fd.vectors.sparse_float_vector.contents)
    for row in rows:
        try:
            vector_types.check_sparse(row)
        except ValueError as exc:
            raise errors.invalid(f"vector field {field.name}: {exc}") from None
    return rows


# -- vectors out ------------------------------------------------------------------------------


def vectors_to_proto(fd: schema_pb2.FieldData, field: FieldSchema, values: Any) -> None:
    """Fill ``fd`` with a vector column, as Milvus returns it."""
    if field.data_type == DataType.FLOAT_VECTOR:
        fd.vectors.dim = field.dim
        fd.vectors.float_vector.CopyFrom(_packed_float_array(np.asarray(values)))
        return
    if field.data_type == DataType.SPARSE_FLOAT_VECTOR:
        rows = list(values)
        fd.vectors.sparse_float_vector.contents.extend(rows)
        fd.vectors.sparse_float_vector.dim = max(map(_sparse_dim, rows), default=0)
        fd.vectors.dim = fd.vectors.sparse_float_vector.dim
        return
    fd.vectors.dim = field.dim
    data = np.ascontiguousarray(values, dtype=FIXED_DTYPES[field.data_type]).tobytes()
    setattr(fd.vectors, _BYTES_MEMBER[field.data_type], data)


def _sparse_dim(row: bytes) -> int:
    indices, _ = vector_types.sparse_entries(row)
    return int(indices[-1]) + 1 if len(indices) else 0


# -- search vectors ---------------------------------------------------------------------------


def read_queries(placeholder_group: Any, field: FieldSchema) -> np.ndarray | list[bytes]:
    """A search's query vectors for ``field``: dense ones as ``nq x row_width`` of the
    field's storage type (float32 for float vectors), sparse ones as rows of bytes."""
    group = placeholder_group
    if not group.placeholders:
        raise errors.invalid("search request carries no vectors")
    holder = group.placeholders[0]
    expected = PLACEHOLDER_TYPES[field.data_type]
    if holder.type != expected:
        got = common_pb2.PlaceholderType.Name(holder.type) if holder.type in _NAMES else holder.type
        raise errors.invalid(
            f"vector field {field.name} is {field.data_type.name}: search it with "
            f"{common_pb2.PlaceholderType.Name(expected)} vectors, got {got}"
        )
    if field.data_type == DataType.SPARSE_FLOAT_VECTOR:
        for row in holder.values:
            try:
                vector_types.check_sparse(row)
            except ValueError as exc:
                raise errors.invalid(f"query vector: {exc}") from None
        return list(holder.values)
    dtype, width = FIXED_DTYPES[field.data_type], row_width(field.data_type, field.dim)
    rows = list(holder.values)
    if any(len(v) != width * dtype.itemsize for v in rows):
        raise errors.invalid(f"query vector dim does not match the field's dim {field.dim}")
    # every row in one read-only buffer (nothing writes to query vectors); one query (most
    # searches) is its own buffer, without a join's copy
    raw = rows[0] if len(rows) == 1 else b"".join(rows)
    vectors = np.frombuffer(raw, dtype=dtype).reshape(len(rows), width)
    if field.data_type in vector_types.FLOAT_TYPES:
        vectors = vector_types.as_float32(field.data_type, vectors)
        check_finite(vectors, "query vector")
    return vectors


_NAMES = frozenset(v for _, v in common_pb2.PlaceholderType.items())


# -- packed float32, without a Python float per element --------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_packed_floats(message: Any) -> np.ndarray:
    """Field 1 of a FloatArray as float32, without a Python float per element."""
    raw = message.SerializeToString()
    if not raw:
        return np.empty(0, dtype=np.float32)
    pos, length, shift = 1, 0, 0
    while True:
        byte = raw[pos]
        length |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            break
        shift += 7
    return np.frombuffer(raw, dtype="<f4", count=length // 4, offset=pos)


def _packed_float_array(values: np.ndarray) -> schema_pb2.FloatArray:
    data = np.ascontiguousarray(values, dtype="<f4").tobytes()
    return (
        schema_pb2.FloatArray.FromString(b"\x0a" + _varint(len(data)) + data)
        if data
        else (schema_pb2.FloatArray())
    )


def check_finite(vectors: np.ndarray, what: str) -> None:
    """Milvus refuses NaN and infinite components (typeutil.VerifyFloats): they make every
    distance NaN, and an index built over them answers nothing useful."""
    if vectors.size and not np.isfinite(vectors).all():
        raise errors.invalid(f"{what} contains NaN or infinity")


# -- ARRAY fields -----------------------------------------------------------------------------


def array_values(fd: schema_pb2.FieldData, field: FieldSchema) -> list[str]:
    """An ARRAY column's rows as JSON text, each checked against the element type,
    ``max_capacity`` and (VarChar elements) ``max_length``."""
    element = DataType(field.element_type)
    member = ARRAY_ELEMENTS[element]
    out = []
    for row in fd.scalars.array_data.data:
        values = list(getattr(row, member).data)
        try:
            field_values.check_array(element, values, field.max_capacity, field.max_length)
        except ValueError as exc:
            raise errors.invalid(f"field {field.name}: {exc}") from None
        out.append(json.dumps(values))
    return out


def array_to_proto(fd: schema_pb2.FieldData, field: FieldSchema, values: list[Any]) -> None:
    """Fill ``fd`` with ARRAY rows (JSON text, or None at a null row)."""
    element = DataType(field.element_type)
    member = ARRAY_ELEMENTS[element]
    array = fd.scalars.array_data
    array.element_type = int(element)
    for text in values:
        row = array.data.add()
        getattr(row, member).data.extend(json.loads(text) if text else [])


def check_array_field(field: FieldSchema) -> str | None:
    """What is wrong with an ARRAY field's schema, or None."""
    if field.element_type not in {int(t) for t in ARRAY_ELEMENTS}:
        name = _type_name(field.element_type)
        return f"array field {field.name}: element type {name} is not supported"
    if not 1 <= field.max_capacity <= 4096:
        return f"array field {field.name} needs max_capacity in [1, 4096]"
    if field.element_type == DataType.VARCHAR and not 1 <= field.max_length <= 65535:
        return f"array field {field.name} of VarChar needs max_length in [1, 65535]"
    return None


def _type_name(code: int) -> str:
    try:
        return schema_pb2.DataType.Name(code)
    except ValueError:
        return str(code)
