"""The vector types beyond float32, as plain numpy: how their rows are held and scored.

- **Float16Vector** rows are numpy float16; **BFloat16Vector** rows keep their raw 16 bits
  (numpy has no bfloat16: a bfloat16 is the upper half of a float32, so widening is a shift).
  Both are searched as float32, with the float metrics and indexes.
- **Int8Vector** rows are numpy int8 (Milvus 2.6), widened to float32 exactly, and searched
  as float vectors too.
- **BinaryVector** rows are ``dim / 8`` bytes, bit ``i`` of the vector in byte ``i // 8``
  (most significant bit first, as ``np.packbits``); scored by HAMMING (differing bits) or
  JACCARD (``1 - |a & b| / |a | b|``), both distances.
- **SparseFloatVector** rows travel in Milvus's layout: (uint32 index, float32 value) pairs,
  little-endian, indices ascending; see :mod:`services.querynode.sparse` for their search.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from vectide.services.common.msgstream.message import DataType

FLOAT_METRICS = frozenset({"L2", "IP", "COSINE"})
BINARY_METRICS = frozenset({"HAMMING", "JACCARD"})
#: BM25 only for a BM25 function's output field (the proxy checks which field it is)
SPARSE_METRICS = frozenset({"IP", "BM25"})
FLOAT_TYPES = frozenset(
    {
        DataType.FLOAT_VECTOR,
        DataType.FLOAT16_VECTOR,
        DataType.BFLOAT16_VECTOR,
        DataType.INT8_VECTOR,
    }
)
#: index types per kind of vector (AUTOINDEX picks HNSW for float vectors)
FLOAT_INDEXES = frozenset({"FLAT", "IVF_FLAT", "HNSW", "AUTOINDEX"})
BINARY_INDEXES = frozenset({"BIN_FLAT", "BIN_IVF_FLAT", "AUTOINDEX"})
SPARSE_INDEXES = frozenset({"SPARSE_INVERTED_INDEX", "SPARSE_WAND", "AUTOINDEX"})
_SPARSE_ROW = np.dtype([("index", "<u4"), ("value", "<f4")])
#: set bits of every byte value
_POPCOUNT = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1)
#: rows scored at once by the binary metrics (bounds the nq x rows x bytes temporary)
_BINARY_BLOCK = 4096


@dataclass(frozen=True)
class VectorKind:
    """What a kind of vector field can be indexed and searched with."""

    metrics: frozenset[str]
    indexes: frozenset[str]
    #: the metric of a search without an index, and of an index that names none
    default_metric: str


_FLOAT = VectorKind(FLOAT_METRICS, FLOAT_INDEXES, "L2")
_KINDS = {
    DataType.BINARY_VECTOR: VectorKind(BINARY_METRICS, BINARY_INDEXES, "HAMMING"),
    DataType.SPARSE_FLOAT_VECTOR: VectorKind(SPARSE_METRICS, SPARSE_INDEXES, "IP"),
}


def kind_of(data_type: DataType) -> VectorKind:
    return _KINDS.get(data_type, _FLOAT)


# -- half-precision floats -------------------------------------------------------------------


def as_float32(data_type: DataType, rows: np.ndarray) -> np.ndarray:
    """Dense rows of any of the float vector types as float32 (exact: both half formats
    and int8 widen without rounding)."""
    if data_type == DataType.BFLOAT16_VECTOR:
        return (np.asarray(rows, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    return np.asarray(rows, dtype=np.float32)


def bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (to nearest, ties to even, as ml_dtypes does),
    as their 16 bits; NaN stays NaN."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = bits + (np.uint32(0x7FFF) + ((bits >> 16) & 1))
    rounded = np.where(np.isnan(values), bits | 0x00400000, rounded)
    return (rounded >> 16).astype(np.uint16)


# -- binary vectors --------------------------------------------------------------------------


def binary_scores(queries: np.ndarray, rows: np.ndarray, metric: str) -> np.ndarray:
    """``nq x n`` distances between packed binary vectors: HAMMING counts differing bits,
    JACCARD is ``1 - |q & r| / |q | r|`` (0 between two all-zero vectors)."""
    out = np.empty((len(queries), len(rows)), dtype=np.float32)
    q = queries[:, None, :]
    for start in range(0, len(rows), _BINARY_BLOCK):
        block = rows[None, start : start + _BINARY_BLOCK, :]
        if metric == "HAMMING":
            out[:, start : start + block.shape[1]] = _POPCOUNT[q ^ block].sum(axis=2)
            continue
        inter = _POPCOUNT[q & block].sum(axis=2)
        union = _POPCOUNT[q | block].sum(axis=2)
        similarity = np.divide(inter, union, out=np.ones(inter.shape), where=union > 0)
        out[:, start : start + block.shape[1]] = 1.0 - similarity
    return out


# -- sparse vectors --------------------------------------------------------------------------


def sparse_row(entries: Mapping[int, float]) -> bytes:
    """A sparse vector in Milvus's row layout (indices ascending)."""
    n = len(entries)
    indices = np.fromiter(entries.keys(), dtype=np.int64, count=n)
    values = np.fromiter(entries.values(), dtype=np.float32, count=n)
    order = np.argsort(indices, kind="stable")
    row = np.empty(n, dtype=_SPARSE_ROW)
    row["index"], row["value"] = indices[order], values[order]
    return row.tobytes()


def sparse_entries(row: bytes) -> tuple[np.ndarray, np.ndarray]:
    """A row's (indices uint32, values float32); ValueError for a malformed row."""
    if len(row) % _SPARSE_ROW.itemsize:
        raise ValueError(f"a sparse row of {len(row)} bytes is not (uint32, float32) pairs")
    pairs = np.frombuffer(row, dtype=_SPARSE_ROW)
    return pairs["index"], pairs["value"]


def check_sparse(row: bytes) -> None:
    """Milvus's rules for a sparse row: indices strictly ascending and below 2^32 - 1,
    values finite (a row may be empty)."""
    indices, values = sparse_entries(row)
    if len(indices) and (np.diff(indices.astype(np.int64)) <= 0).any():
        raise ValueError("sparse vector indices must be unique and ascending")
    if len(indices) and int(indices.max()) == 0xFFFFFFFF:
        raise ValueError("sparse vector index 4294967295 is out of range")
    if not np.isfinite(values).all():
        raise ValueError("sparse vector values must be finite")


def drop_ratio(params: Mapping[str, object]) -> float:
    """``drop_ratio_search`` in [0, 1); ValueError otherwise."""
    value = params.get("drop_ratio_search", 0) or 0
    try:
        ratio = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"drop_ratio_search must be a number, got {value!r}") from None
    if not 0 <= ratio < 1:
        raise ValueError(f"drop_ratio_search must be in [0, 1), got {ratio}")
    return ratio
