"""Avro binary values read column-friendly: arrays of float or double become one numpy array.

fastavro builds a Python float per element of an array, which for a 128-d vector cost most of
a record's decoding. A reader compiled here for a writer schema takes an array of floats as
one ``np.frombuffer`` per block instead (a numpy array for vector fields, a list elsewhere),
and reads the rest (ints, strings, unions, maps, records) in small Python closures. It covers
the schemas producers of vectors write: a record of primitives, unions, arrays, maps and
nested records.
:func:`compile_reader` returns None for anything else (enums, fixed, logical types, named
references), and the caller keeps fastavro for those schemas.

Pure: no I/O. A malformed value raises :class:`AvroError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

#: reads one value at ``pos`` of ``buf``: (value, position after it)
Reader = Callable[[bytes, int], tuple[Any, int]]

_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")
_ARRAY_DTYPES = {"float": np.dtype("<f4"), "double": np.dtype("<f8")}


class AvroError(ValueError):
    """The bytes are not a value of the writer schema."""


class _Unsupported(Exception):
    """The schema uses a construct this reader does not compile."""


def compile_reader(
    schema: Any, numpy_fields: frozenset[str] = frozenset()
) -> Callable[[bytes], dict[str, Any]] | None:
    """A reader of whole values of a record ``schema`` (parsed or not), or None when the
    schema is outside the subset: the caller then reads with fastavro. The record's fields
    named in ``numpy_fields`` come back as numpy arrays when they are arrays of float or
    double (vectors); every other value as fastavro gives it."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return None
    try:
        read = _record(schema, numpy_fields)
    except _Unsupported:
        return None

    def read_value(buf: bytes) -> dict[str, Any]:
        try:
            value, pos = read(buf, 0)
        except (IndexError, ValueError, struct.error) as exc:  # truncated, bad UTF-8, ...
            raise AvroError(str(exc) or type(exc).__name__) from None
        if pos != len(buf):
            raise AvroError(f"{len(buf) - pos} bytes left over")
        return value

    return read_value


def _reader(schema: Any, as_numpy: bool = False) -> Reader:
    if isinstance(schema, str):
        return _primitive(schema)
    if isinstance(schema, list):
        return _union(schema, as_numpy)
    if not isinstance(schema, dict) or "logicalType" in schema:
        raise _Unsupported
    kind = schema.get("type")
    if kind == "record":
        return _record(schema)
    if kind == "array":
        return _array(schema["items"], as_numpy)
    if kind == "map":
        return _map(schema["values"])
    if isinstance(kind, str) and kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    raise _Unsupported


def read_long(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint (Avro's int and long)."""
    byte = buf[pos]
    pos += 1
    n = byte & 0x7F
    shift = 7
    while byte & 0x80:
        byte = buf[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        shift += 7
    return (n >> 1) ^ -(n & 1), pos


def _read_null(buf: bytes, pos: int) -> tuple[None, int]:
    return None, pos


def _read_boolean(buf: bytes, pos: int) -> tuple[bool, int]:
    return buf[pos] != 0, pos + 1


def _read_float(buf: bytes, pos: int) -> tuple[float, int]:
    return _FLOAT.unpack_from(buf, pos)[0], pos + 4


def _read_double(buf: bytes, pos: int) -> tuple[float, int]:
    return _DOUBLE.unpack_from(buf, pos)[0], pos + 8


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    size, pos = read_long(buf, pos)
    end = pos + size
    if size < 0 or end > len(buf):
        raise AvroError(f"a length of {size} bytes runs past the value")
    return bytes(buf[pos:end]), end


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    raw, pos = _read_bytes(buf, pos)
    return raw.decode(), pos


_PRIMITIVES: dict[str, Reader] = {
    "null": _read_null,
    "boolean": _read_boolean,
    "int": read_long,
    "long": read_long,
    "float": _read_float,
    "double": _read_double,
    "bytes": _read_bytes,
    "string": _read_string,
}


def _primitive(name: str) -> Reader:
    if name not in _PRIMITIVES:
        raise _Unsupported  # a reference to a named type
    return _PRIMITIVES[name]


def _record(schema: dict[str, Any], numpy_fields: frozenset[str] = frozenset()) -> Reader:
    fields = [
        (f["name"], _reader(f["type"], as_numpy=f["name"] in numpy_fields))
        for f in schema["fields"]
    ]

    def read(buf: bytes, pos: int) -> tuple[dict[str, Any], int]:
        out = {}
        for name, read_field in fields:
            out[name], pos = read_field(buf, pos)
        return out, pos

    return read


def _union(branches: list[Any], as_numpy: bool) -> Reader:
    readers = [_reader(b, as_numpy) for b in branches]

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        index, pos = read_long(buf, pos)
        if not 0 <= index < len(readers):
            raise AvroError(f"union branch {index} does not exist")
        return readers[index](buf, pos)

    return read


def _blocks(buf: bytes, pos: int) -> tuple[int, int]:
    """The next block's item count (0: the end), past its byte size when it has one."""
    count, pos = read_long(buf, pos)
    if count < 0:
        _, pos = read_long(buf, pos)
        count = -count
    return count, pos


def _array(items: Any, as_numpy: bool) -> Reader:
    dtype = _ARRAY_DTYPES.get(items) if isinstance(items, str) else None
    if dtype is not None:
        return _numeric_array(dtype, as_numpy)
    read_item = _reader(items)

    def read(buf: bytes, pos: int) -> tuple[list[Any], int]:
        out: list[Any] = []
        count, pos = _blocks(buf, pos)
        while count:
            for _ in range(count):
                item, pos = read_item(buf, pos)
                out.append(item)
            count, pos = _blocks(buf, pos)
        return out, pos

    return read


def _numeric_array(dtype: np.dtype, as_numpy: bool) -> Reader:
    """One ``np.frombuffer`` per block; a list of Python floats unless ``as_numpy``."""

    def read(buf: bytes, pos: int) -> tuple[np.ndarray | list[float], int]:
        parts = []
        count, pos = _blocks(buf, pos)
        while count:
            end = pos + count * dtype.itemsize
            if end > len(buf):
                raise AvroError(f"an array of {count} items runs past the value")
            parts.append(np.frombuffer(buf, dtype=dtype, count=count, offset=pos))
            count, pos = _blocks(buf, end)
        whole = parts[0] if len(parts) == 1 else np.concatenate(parts or [np.empty(0, dtype)])
        return (whole if as_numpy else whole.tolist()), pos

    return read


def _map(values: Any) -> Reader:
    read_value = _reader(values)

    def read(buf: bytes, pos: int) -> tuple[dict[str, Any], int]:
        out: dict[str, Any] = {}
        count, pos = _blocks(buf, pos)
        while count:
            for _ in range(count):
                key, pos = _read_string(buf, pos)
                out[key], pos = read_value(buf, pos)
            count, pos = _blocks(buf, pos)
        return out, pos

    return read
