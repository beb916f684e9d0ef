"""msgpack encoding of internal RPC payloads: primitives, numpy arrays, registered dataclasses
and enums, and MilvusError."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import msgpack
import numpy as np

from vectide.services.common.errors import Code, MilvusError

_NDARRAY = 1
_DATACLASS = 2
_ENUM = 3
_TUPLE = 4

_TYPES: dict[str, type] = {}


def register(*types: type) -> None:
    """Allow these dataclasses / enums to cross the wire (by class name)."""
    for t in types:
        _TYPES[t.__name__] = t


def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        if arr.dtype == object:
            return arr.tolist()
        return msgpack.ExtType(
            _NDARRAY, msgpack.packb([arr.dtype.str, list(arr.shape), arr.tobytes()])
        )
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, enum.Enum):
        return msgpack.ExtType(_ENUM, _pack([type(obj).__name__, obj.value]))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        name = type(obj).__name__
        if name not in _TYPES:
            raise TypeError(f"{name} is not registered for RPC")
        values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return msgpack.ExtType(_DATACLASS, _pack([name, values]))
    if isinstance(obj, tuple):
        return msgpack.ExtType(_TUPLE, _pack(list(obj)))
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"cannot send {type(obj).__name__} over RPC")


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _NDARRAY:
        dtype, shape, raw = msgpack.unpackb(data)
        return np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape).copy()
    if code == _DATACLASS:
        name, values = _unpack(data)
        return _TYPES[name](**values)
    if code == _ENUM:
        name, value = _unpack(data)
        return _TYPES[name](value)
    if code == _TUPLE:
        return tuple(_unpack(data))
    raise ValueError(f"unknown RPC extension type {code}")


def _pack(obj: Any) -> bytes:
    return msgpack.packb(obj, default=_default, use_bin_type=True, strict_types=True)


def _unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, ext_hook=_ext_hook, raw=False, strict_map_key=False)


def encode(obj: Any) -> bytes:
    return _pack(obj)


def decode(data: bytes) -> Any:
    return _unpack(data)


def encode_error(exc: BaseException) -> bytes:
    if isinstance(exc, MilvusError):
        return _pack({"code": int(exc.code), "message": exc.message})
    return _pack({"code": int(Code.SERVICE_INTERNAL), "message": f"{type(exc).__name__}: {exc}"})


def decode_error(data: bytes) -> MilvusError:
    payload = _unpack(data)
    try:
        code = Code(payload["code"])
    except ValueError:
        code = Code.SERVICE_INTERNAL
    return MilvusError(code, payload["message"])
