"""The messages that travel on the DML channels, and the packs consumers receive.

Columns stay numpy arrays end to end: a message is decoded into arrays without a Python
object per row, which is what keeps ingest cheap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum, StrEnum

import numpy as np


class DataType(IntEnum):
    """Milvus's DataType codes (schema.proto), so schemas map one to one."""

    BOOL = 1
    INT8 = 2
    INT16 = 3
    INT32 = 4
    INT64 = 5
    FLOAT = 10
    DOUBLE = 11
    VARCHAR = 21
    ARRAY = 22
    JSON = 23
    #: Well-Known Text rows (services/common/geometry.py)
    GEOMETRY = 24
    #: microseconds since the Unix epoch, read and written as ISO text
    #: (services/common/timestamptz.py)
    TIMESTAMPTZ = 26
    BINARY_VECTOR = 100
    FLOAT_VECTOR = 101
    FLOAT16_VECTOR = 102
    BFLOAT16_VECTOR = 103
    SPARSE_FLOAT_VECTOR = 104
    INT8_VECTOR = 105


#: numpy dtype (little-endian) of each fixed-width type; the rest travel as strings.
FIXED_DTYPES: dict[DataType, np.dtype] = {
    DataType.BOOL: np.dtype("?"),
    DataType.INT8: np.dtype("<i1"),
    DataType.INT16: np.dtype("<i2"),
    DataType.INT32: np.dtype("<i4"),
    DataType.INT64: np.dtype("<i8"),
    DataType.TIMESTAMPTZ: np.dtype("<i8"),
    DataType.FLOAT: np.dtype("<f4"),
    DataType.DOUBLE: np.dtype("<f8"),
    DataType.FLOAT_VECTOR: np.dtype("<f4"),
    # one bit per dimension, eight to a byte (Milvus's wire layout)
    DataType.BINARY_VECTOR: np.dtype("u1"),
    DataType.FLOAT16_VECTOR: np.dtype("<f2"),
    # bfloat16 kept as its raw 16 bits (numpy has no bfloat16); see vector_types
    DataType.BFLOAT16_VECTOR: np.dtype("<u2"),
    DataType.INT8_VECTOR: np.dtype("i1"),
}

#: dense vector types: fixed-width rows of ``row_width(data_type, dim)`` elements
DENSE_VECTORS = frozenset(
    {
        DataType.FLOAT_VECTOR,
        DataType.BINARY_VECTOR,
        DataType.FLOAT16_VECTOR,
        DataType.BFLOAT16_VECTOR,
        DataType.INT8_VECTOR,
    }
)
VECTOR_TYPES = DENSE_VECTORS | {DataType.SPARSE_FLOAT_VECTOR}


def row_width(data_type: DataType, dim: int) -> int:
    """Elements per row of a fixed-width column: ``dim`` for float vectors, ``dim / 8``
    bytes for binary ones, 0 (one value per row) for scalars."""
    if data_type == DataType.BINARY_VECTOR:
        return dim // 8
    return dim if data_type in DENSE_VECTORS else 0


#: Primary keys: int64 array or a list of str.
PrimaryKeys = np.ndarray | list[str]


@dataclass(slots=True)
class FieldColumn:
    field_id: int
    name: str
    data_type: DataType
    #: fixed-width types: array of shape (rows,) or (rows, row_width); VarChar, JSON and
    #: ARRAY (as JSON text): list of str; sparse vectors: list of bytes (Milvus's row layout)
    data: np.ndarray | list[str] | list[bytes]
    dim: int = 0
    #: nullable fields: True where the row has a value; ``data`` holds a placeholder (0, "")
    #: at the other rows. None means every row has a value.
    valid: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.data)

    def rows(self, index: np.ndarray | slice) -> FieldColumn:
        """The column restricted to ``index`` (row offsets, or a range: then a view, no
        copy), validity included."""
        data = (
            self.data[index]
            if isinstance(self.data, np.ndarray) or isinstance(index, slice)
            else [self.data[i] for i in index.tolist()]
        )
        valid = None if self.valid is None else self.valid[index]
        return FieldColumn(self.field_id, self.name, self.data_type, data, self.dim, valid)


@dataclass(slots=True)
class InsertMsg:
    msg_id: int
    ts: int
    source_id: int
    collection_id: int
    partition_id: int
    segment_id: int
    shard: str
    pks: PrimaryKeys
    row_ids: np.ndarray
    timestamps: np.ndarray
    fields: list[FieldColumn] = field(default_factory=list)

    @property
    def num_rows(self) -> int:
        return len(self.pks)

    def identity(self) -> tuple[int, int, int, int]:
        """What one record's copies share: a producer that retried a write stored the same
        message twice, and a consumer applies it once. (source, id, stamp, keys)"""
        keys = self.pks.tobytes() if isinstance(self.pks, np.ndarray) else tuple(self.pks)
        return self.source_id, self.msg_id, self.ts, hash(keys)


@dataclass(slots=True)
class DeleteMsg:
    msg_id: int
    ts: int
    source_id: int
    collection_id: int
    partition_id: int
    shard: str
    pks: PrimaryKeys
    timestamps: np.ndarray

    @property
    def num_rows(self) -> int:
        return len(self.pks)


@dataclass(slots=True)
class TimeTickMsg:
    msg_id: int
    ts: int
    source_id: int


class DDLOp(StrEnum):
    CREATE_COLLECTION = "CREATE_COLLECTION"
    DROP_COLLECTION = "DROP_COLLECTION"
    CREATE_PARTITION = "CREATE_PARTITION"
    DROP_PARTITION = "DROP_PARTITION"
    #: AddCollectionField: ``schema`` holds the new field (``FieldSchema.to_json``)
    ADD_FIELD = "ADD_FIELD"


@dataclass(slots=True)
class CollectionDDLMsg:
    msg_id: int
    ts: int
    source_id: int
    op: DDLOp
    collection_id: int
    collection_name: str
    partition_id: int = -1
    partition_name: str = ""
    schema: bytes = b""


Message = InsertMsg | DeleteMsg | TimeTickMsg | CollectionDDLMsg
DataMessage = InsertMsg | DeleteMsg | CollectionDDLMsg


@dataclass(frozen=True, slots=True)
class Position:
    """Where to resume a channel: read from ``offset`` and skip what has ``ts <= ts``.

    Everything up to and including ``ts`` on this channel has been delivered; every message
    at or after ``offset`` with a larger timestamp has not. (Messages between two ticks can
    arrive out of timestamp order, so an offset alone is not a resume point.)
    """

    channel: str
    offset: int
    ts: int


@dataclass(slots=True)
class MsgPack:
    """Every message with ``begin_ts < ts <= end_ts`` on the consumed channels.

    Released only once each channel has delivered a TimeTick >= ``end_ts``, so the pack is
    complete: no message with a timestamp in its range can arrive later.
    """

    begin_ts: int
    end_ts: int
    msgs: list[DataMessage]
    #: per channel, the resume point after this pack
    end_positions: dict[str, Position]
