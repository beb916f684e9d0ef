"""Insert and Delete messages in Avro's binary encoding, written and read without fastavro.

The bytes are exactly what fastavro writes for the schemas in ``schemas/*.avsc`` (the wire
format does not change: the Spark data node and external producers read and write the same
records). What changes is the cost of a message that is mostly column bytes: fastavro
copies every ``bytes`` field into its output buffer (which grows by reallocation), then
into the returned ``bytes``, and on reading copies each field out again. Here a message is
one ``bytes.join`` of its header fields and the columns' own buffers (one copy of each
column), and reading gives numpy arrays that are views of the record's bytes (no copy).

Only messages whose every column is fixed-width (numbers, dense vectors) and whose keys are
int64 take this path; string and sparse columns, and varchar keys, go through fastavro,
whose compiled per-item loop is faster than Python's for them. ``encode`` and ``decode``
return None for a message they leave to fastavro.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vectide.services.common.msgstream.message import (
    FIXED_DTYPES,
    DataType,
    DeleteMsg,
    FieldColumn,
    InsertMsg,
    row_width,
)

#: branch numbers of the top-level union (``codec.MESSAGE_RECORDS`` order)
INSERT_BRANCH, DELETE_BRANCH = 0, 1
_INT64 = np.dtype("<i8")
_BOOL = np.dtype("?")
_NULL = b"\x00"  # union branch 0: null
_SOME = b"\x02"  # union branch 1: the value (zigzag 1)
_END = b"\x00"  # an array's closing empty block


class NotHere(Exception):
    """The record holds something this module leaves to fastavro (or is not valid)."""


# -- writing -----------------------------------------------------------------------------


def _long(n: int) -> bytes:
    """Avro ``long``/``int``: zigzag, then base-128 little-endian groups."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(text: str) -> list[bytes]:
    raw = text.encode()
    return [_long(len(raw)), raw]


def _buffer(values: Any, dtype: np.dtype) -> list[Any]:
    """An Avro ``bytes`` of ``values`` as little-endian ``dtype``: its length, then the
    array's own memory (copied once, by the join)."""
    array = np.ascontiguousarray(values, dtype=dtype)
    return [_long(array.nbytes), array.reshape(-1).view(np.uint8)]


def _int_keys(pks: Any) -> list[Any]:
    """The PrimaryKeys record of int64 keys: ``int_ids`` set, ``str_ids`` null."""
    return [_SOME, *_buffer(pks, _INT64), _NULL]


def _column(col: FieldColumn) -> list[Any]:
    parts = [_long(col.field_id), *_string(col.name), _long(int(col.data_type)), _long(col.dim)]
    parts += [_SOME, *_buffer(col.data, FIXED_DTYPES[col.data_type]), _NULL, _NULL]
    if col.valid is None:
        parts.append(_NULL)
    else:
        parts += [_SOME, *_buffer(col.valid, _BOOL)]
    return parts


def _fixed_only(msg: InsertMsg | DeleteMsg) -> bool:
    if not isinstance(msg.pks, np.ndarray):
        return False
    fields = msg.fields if isinstance(msg, InsertMsg) else []
    return all(c.data_type in FIXED_DTYPES and isinstance(c.data, np.ndarray) for c in fields)


def encode(msg: InsertMsg | DeleteMsg) -> bytes | None:
    """The message's Avro datum (a branch of the message union), or None: fastavro's job."""
    if not _fixed_only(msg):
        return None
    if isinstance(msg, DeleteMsg):
        parts = [_long(DELETE_BRANCH), *map(_long, _delete_header(msg)), *_string(msg.shard)]
        parts += [_long(msg.num_rows), *_int_keys(msg.pks), *_buffer(msg.timestamps, _INT64)]
        return b"".join(parts)
    parts = [_long(INSERT_BRANCH), *map(_long, _insert_header(msg)), *_string(msg.shard)]
    parts += [_long(msg.num_rows), *_int_keys(msg.pks)]
    parts += [*_buffer(msg.row_ids, _INT64), *_buffer(msg.timestamps, _INT64)]
    if msg.fields:
        parts.append(_long(len(msg.fields)))
        for col in msg.fields:
            parts += _column(col)
    parts.append(_END)
    return b"".join(parts)


def _insert_header(msg: InsertMsg) -> tuple[int, ...]:
    return (
        msg.msg_id,
        msg.ts,
        msg.source_id,
        msg.collection_id,
        msg.partition_id,
        msg.segment_id,
    )


def _delete_header(msg: DeleteMsg) -> tuple[int, ...]:
    return (msg.msg_id, msg.ts, msg.source_id, msg.collection_id, msg.partition_id)


# -- reading -----------------------------------------------------------------------------


class _Reader:
    """A cursor over one record's bytes."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.pos = 0

    def long(self) -> int:
        raw, pos, shift, n = self.raw, self.pos, 0, 0
        while True:
            byte = raw[pos]
            pos += 1
            n |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
            if shift > 63:
                raise NotHere("varint too long")
        self.pos = pos
        return (n >> 1) ^ -(n & 1)

    def _span(self) -> tuple[int, int]:
        size = self.long()
        start, self.pos = self.pos, self.pos + size
        if size < 0 or self.pos > len(self.raw):
            raise NotHere("a length past the end of the record")
        return start, size

    def string(self) -> str:
        start, size = self._span()
        return self.raw[start : start + size].decode()

    def array(self, dtype: np.dtype) -> np.ndarray:
        """An Avro ``bytes`` as a read-only numpy view of the record (no copy)."""
        start, size = self._span()
        if size % dtype.itemsize:
            raise NotHere(f"{size} bytes is not a whole number of {dtype}")
        return np.frombuffer(self.raw, dtype=dtype, count=size // dtype.itemsize, offset=start)

    def optional_array(self, dtype: np.dtype) -> np.ndarray | None:
        branch = self.long()
        if branch == 0:
            return None
        if branch != 1:
            raise NotHere(f"union branch {branch}")
        return self.array(dtype)

    def null(self) -> None:
        """A ``["null", ...]`` union this path expects to be null (else: fastavro's)."""
        if self.long() != 0:
            raise NotHere("a string or blob array")

    def int_keys(self) -> np.ndarray:
        keys = self.optional_array(_INT64)
        if keys is None:
            raise NotHere("varchar keys")
        self.null()
        return keys


def decode(raw: bytes) -> tuple[InsertMsg | DeleteMsg, int] | None:
    """The Insert or Delete in ``raw`` with arrays viewing ``raw``, and the row count the
    record states; or None: a record of another kind, or with strings, or one this reader
    doubts (fastavro decides)."""
    try:
        reader = _Reader(raw)
        branch = reader.long()
        if branch == INSERT_BRANCH:
            return _insert(reader)
        if branch == DELETE_BRANCH:
            return _delete(reader)
    except (NotHere, IndexError, ValueError, UnicodeDecodeError):
        pass
    return None


def _insert(r: _Reader) -> tuple[InsertMsg, int]:
    header = [r.long() for _ in range(6)]
    shard, num_rows = r.string(), r.long()
    pks = r.int_keys()
    row_ids, timestamps = r.array(_INT64), r.array(_INT64)
    fields: list[FieldColumn] = []
    while count := r.long():
        if count < 0:  # a block with its byte size (fastavro never writes one)
            raise NotHere("sized array block")
        fields += [_read_column(r) for _ in range(count)]
    if r.pos != len(r.raw):
        raise NotHere("bytes after the record")
    msg = InsertMsg(*header, shard, pks, row_ids, timestamps, fields)  # type: ignore[arg-type]
    return msg, num_rows


def _read_column(r: _Reader) -> FieldColumn:
    field_id, name, data_type, dim = r.long(), r.string(), DataType(r.long()), r.long()
    dtype = FIXED_DTYPES.get(data_type)
    if dtype is None:
        raise NotHere(f"{data_type.name} column")
    data = r.optional_array(dtype)
    if data is None:
        raise NotHere("a fixed-width column without values")
    r.null()
    r.null()
    valid = r.optional_array(_BOOL)
    width = row_width(data_type, dim)
    if width:
        if len(data) % width:
            raise NotHere(f"{len(data)} values is not a whole number of rows of {width}")
        data = data.reshape(-1, width)
    return FieldColumn(field_id, name, data_type, data, dim, valid)


def _delete(r: _Reader) -> tuple[DeleteMsg, int]:
    header = [r.long() for _ in range(5)]
    shard, num_rows = r.string(), r.long()
    pks, timestamps = r.int_keys(), r.array(_INT64)
    if r.pos != len(r.raw):
        raise NotHere("bytes after the record")
    return DeleteMsg(*header, shard, pks, timestamps), num_rows  # type: ignore[arg-type]
