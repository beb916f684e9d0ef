"""Client values of the typed fields, checked and turned into their stored form.

Shared by the REST API (``services/proxy/rest_vectors.py``, ``typed_fields.py``) and Kafka
ingest (``services/ingest/decode.py``), so a vector or an ARRAY row means the same thing
whichever way it came in. The forms are Milvus's REST forms, plus raw bytes (Avro ``bytes``):

- BinaryVector: ``dim / 8`` bytes, as an array of byte values (0-255), base64 text or bytes;
- Float16Vector, BFloat16Vector: an array of ``dim`` numbers (narrowed from float32), or the
  ``2 * dim`` bytes of the half floats (little-endian), as base64 text or bytes;
- Int8Vector: an array of ``dim`` integers in [-128, 127], or its ``dim`` bytes as base64
  text or bytes;
- SparseFloatVector: an object ``{"index": value}`` or ``{"indices": [...], "values": [...]}``
  (Milvus's REST takes both), rows in Milvus's layout (``vector_types.sparse_row``);
- ARRAY rows: a list of the element type, within ``max_capacity`` (and ``max_length`` for
  VarChar elements).

Pure: errors are ValueError with a reason; callers add the field's name and their code.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import numpy as np

from vectide.services.common import vector_types
from vectide.services.common.msgstream.message import FIXED_DTYPES, DataType, row_width

#: the dense types given as bytes: bytes per row for a dim
BYTE_VECTORS = frozenset(
    {
        DataType.BINARY_VECTOR,
        DataType.FLOAT16_VECTOR,
        DataType.BFLOAT16_VECTOR,
        DataType.INT8_VECTOR,
    }
)
HALF_FLOATS = frozenset({DataType.FLOAT16_VECTOR, DataType.BFLOAT16_VECTOR})
#: ARRAY element types and the Python type of a value
ARRAY_KINDS: dict[DataType, type | tuple[type, ...]] = {
    DataType.BOOL: bool,
    DataType.INT8: int,
    DataType.INT16: int,
    DataType.INT32: int,
    DataType.INT64: int,
    DataType.FLOAT: (int, float),
    DataType.DOUBLE: (int, float),
    DataType.VARCHAR: str,
}
_INT_RANGES = {
    DataType.INT8: np.iinfo(np.int8),
    DataType.INT16: np.iinfo(np.int16),
    DataType.INT32: np.iinfo(np.int32),
    DataType.INT64: np.iinfo(np.int64),
}


def is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def row_width_bytes(data_type: DataType, dim: int) -> int:
    return row_width(data_type, dim) * FIXED_DTYPES[data_type].itemsize


# -- dense vectors beyond float32 ---------------------------------------------------------------


def dense_row_bytes(data_type: DataType, dim: int, value: Any) -> bytes:
    """One binary, float16, bfloat16 or int8 vector as its row bytes (Milvus's wire form)."""
    width = row_width_bytes(data_type, dim)
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
        except binascii.Error:
            raise ValueError("a vector given as text must be base64") from None
    elif isinstance(value, bytes | bytearray):
        raw = bytes(value)
    elif data_type == DataType.BINARY_VECTOR:
        if not isinstance(value, list) or not all(_is_byte(v) for v in value):
            raise ValueError("a binary vector must be an array of byte values (0-255)")
        raw = bytes(value)
    elif data_type == DataType.INT8_VECTOR:
        if not isinstance(value, list) or not all(_is_int8(v) for v in value):
            raise ValueError("an int8 vector must be an array of integers in [-128, 127]")
        raw = np.asarray(value, dtype=np.int8).tobytes()
    else:
        raw = half_floats(data_type, _numbers(value, dim))
    if len(raw) != width:
        raise ValueError(f"vector of {len(raw)} bytes, expected {width} (dim {dim})")
    return raw


def _is_int8(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -128 <= v <= 127


def _is_byte(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 255


def _numbers(value: Any, dim: int) -> np.ndarray:
    if not isinstance(value, list) or not all(is_number(x) for x in value):
        raise ValueError("a vector must be an array of numbers or base64 text")
    if len(value) != dim:
        raise ValueError(f"vector of dim {len(value)}, expected {dim}")
    return np.asarray(value, dtype=np.float32)


def half_floats(data_type: DataType, wide: np.ndarray) -> bytes:
    """float32 values (one row or a matrix) narrowed to float16 or bfloat16, as bytes."""
    return narrow(data_type, wide).tobytes()


def narrow(data_type: DataType, wide: np.ndarray) -> np.ndarray:
    """float32 values narrowed to the storage type of a half-float vector type (float16, or
    bfloat16's 16 bits)."""
    if data_type == DataType.BFLOAT16_VECTOR:
        return vector_types.bfloat16_bits(wide).astype("<u2")
    with np.errstate(over="ignore"):  # beyond float16 becomes inf: the callers refuse it
        return np.asarray(wide, dtype=np.float32).astype("<f2")


# -- sparse vectors -----------------------------------------------------------------------------


def sparse_row_bytes(value: Any) -> bytes:
    """A sparse vector as a row in Milvus's layout, checked as Milvus checks it (indices in
    [0, 2^32 - 1), unique; values finite)."""
    if not isinstance(value, dict):
        raise ValueError("a sparse vector must be an object of index: number")
    if set(value) == {"indices", "values"} and isinstance(value["indices"], list):
        entries = _pairs(value["indices"], value["values"])
    else:
        if not all(is_number(v) for v in value.values()):
            raise ValueError("a sparse vector must be an object of index: number")
        try:
            entries = {int(k): v for k, v in value.items()}
        except ValueError:
            raise ValueError("sparse vector indices must be integers") from None
        if any(not 0 <= k < 0xFFFFFFFF for k in entries):
            raise ValueError("sparse vector indices must be integers in [0, 2^32 - 1)")
    row = vector_types.sparse_row(entries)
    vector_types.check_sparse(row)
    return row


def _pairs(indices: list[Any], values: Any) -> dict[int, float]:
    if not isinstance(values, list) or len(values) != len(indices):
        raise ValueError("a sparse vector's indices and values must be arrays of one length")
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in indices):
        raise ValueError("sparse vector indices must be integers")
    if not all(is_number(v) for v in values):
        raise ValueError("sparse vector values must be numbers")
    if any(not 0 <= i < 0xFFFFFFFF for i in indices):
        raise ValueError("sparse vector indices must be integers in [0, 2^32 - 1)")
    if len(set(indices)) != len(indices):
        raise ValueError("sparse vector indices must be unique")
    return dict(zip(indices, values, strict=True))


# -- ARRAY fields --------------------------------------------------------------------------------


def check_array(
    element: DataType, values: list[Any], max_capacity: int, max_length: int = 0
) -> None:
    """An ARRAY row against its element type, ``max_capacity`` and (VarChar elements)
    ``max_length``."""
    if len(values) > max_capacity:
        raise ValueError(f"array length {len(values)} exceeds max_capacity {max_capacity}")
    kind = ARRAY_KINDS[element]
    if not all(isinstance(v, kind) and (kind is bool or not isinstance(v, bool)) for v in values):
        raise ValueError(f"array elements must be {element.name}")
    limits = _INT_RANGES.get(element)
    if limits is not None and any(not limits.min <= v <= limits.max for v in values):
        raise ValueError(f"array element out of range for {element.name}")
    if element == DataType.VARCHAR:
        too_long = next((v for v in values if len(v) > max_length), None)
        if too_long is not None:
            raise ValueError(
                f"array element length {len(too_long)} exceeds max_length {max_length}"
            )
