"""Avro encoding of channel messages: the schemas in ``schemas/*.avsc`` are the wire format.

A Kafka record's value is one Avro datum of the union of the message records, written
without a container header (the schema is fixed by the project version, not per message).
Numeric columns are raw little-endian bytes, so encoding a batch costs one memcpy per column
instead of a Python object per row. Inserts and deletes of fixed-width columns (the bulk of
the traffic) are written and read by ``avro_columns`` (the same bytes, one copy per column
written, none read); everything else by fastavro.
"""

from __future__ import annotations

import io
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import fastavro
import numpy as np

from vectide.services.common.msgstream import avro_columns
from vectide.services.common.msgstream.message import (
    FIXED_DTYPES,
    CollectionDDLMsg,
    DataType,
    DDLOp,
    DeleteMsg,
    FieldColumn,
    InsertMsg,
    Message,
    PrimaryKeys,
    TimeTickMsg,
    row_width,
)

NAMESPACE = "io.vectide.msg"
#: Files in dependency order: named types first.
SCHEMA_FILES = (
    "PrimaryKeys",
    "FieldColumn",
    "Insert",
    "Delete",
    "TimeTick",
    "CollectionDDL",
)
#: The message records a channel value can hold (the top-level union's branches).
MESSAGE_RECORDS = ("Insert", "Delete", "TimeTick", "CollectionDDL")

_INT64 = np.dtype("<i8")
_BOOL = np.dtype("?")


class DecodeError(ValueError):
    """The bytes are not a Vectide message (a poison record on a channel)."""


def schemas_dir() -> Path:
    override = os.environ.get("VECTIDE_SCHEMAS_DIR")
    return Path(override) if override else Path(__file__).resolve().parents[3] / "schemas"


def load_schema_json(name: str) -> dict[str, Any]:
    return json.loads((schemas_dir() / f"{name}.avsc").read_text())


@cache
def message_schema_json() -> list[Any]:
    """The union of every message record as one self-contained schema (named types inlined
    at first use): what an external producer needs to write channel messages."""
    library = {f"{NAMESPACE}.{name}": load_schema_json(name) for name in SCHEMA_FILES}
    defined: set[str] = set()
    return [_inline(f"{NAMESPACE}.{name}", library, defined) for name in MESSAGE_RECORDS]


def _inline(node: Any, library: dict[str, Any], defined: set[str]) -> Any:
    if isinstance(node, str):
        if node in library and node not in defined:
            defined.add(node)
            return _inline(library[node], library, defined)
        return node
    if isinstance(node, list):
        return [_inline(item, library, defined) for item in node]
    if isinstance(node, dict):
        if node.get("type") == "record":
            defined.add(f"{node.get('namespace', NAMESPACE)}.{node['name']}")
        return {
            k: _inline(v, library, defined) if k in ("type", "fields", "items") else v
            for k, v in node.items()
        }
    return node


@cache
def message_schema() -> Any:
    return fastavro.parse_schema(message_schema_json())


def encode(msg: Message) -> bytes:
    if isinstance(msg, InsertMsg | DeleteMsg):
        raw = avro_columns.encode(msg)
        if raw is not None:
            return raw
    name, record = _to_record(msg)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, message_schema(), (f"{NAMESPACE}.{name}", record))
    return buf.getvalue()


def decode(raw: bytes) -> Message:
    fast = avro_columns.decode(raw)
    if fast is not None:
        msg, stated_rows = fast
        _check_rows(msg.num_rows, stated_rows, *_column_lengths(msg))
        return msg
    try:
        name, record = fastavro.schemaless_reader(
            io.BytesIO(raw), message_schema(), None, return_record_name=True
        )
        return _FROM_RECORD[name.rsplit(".", 1)[1]](record)
    except Exception as exc:  # fastavro raises many types on garbage input
        raise DecodeError(f"not a Vectide message ({len(raw)} bytes): {exc}") from exc


# -- message -> record -------------------------------------------------------------------


def _to_record(msg: Message) -> tuple[str, dict[str, Any]]:
    if isinstance(msg, InsertMsg):
        return "Insert", {
            "msg_id": msg.msg_id,
            "ts": msg.ts,
            "source_id": msg.source_id,
            "collection_id": msg.collection_id,
            "partition_id": msg.partition_id,
            "segment_id": msg.segment_id,
            "shard": msg.shard,
            "num_rows": msg.num_rows,
            "pks": _pks_record(msg.pks),
            "row_ids": _le_bytes(msg.row_ids, _INT64),
            "timestamps": _le_bytes(msg.timestamps, _INT64),
            "fields": [_column_record(c) for c in msg.fields],
        }
    if isinstance(msg, DeleteMsg):
        return "Delete", {
            "msg_id": msg.msg_id,
            "ts": msg.ts,
            "source_id": msg.source_id,
            "collection_id": msg.collection_id,
            "partition_id": msg.partition_id,
            "shard": msg.shard,
            "num_rows": msg.num_rows,
            "pks": _pks_record(msg.pks),
            "timestamps": _le_bytes(msg.timestamps, _INT64),
        }
    if isinstance(msg, TimeTickMsg):
        return "TimeTick", {"msg_id": msg.msg_id, "ts": msg.ts, "source_id": msg.source_id}
    if isinstance(msg, CollectionDDLMsg):
        return "CollectionDDL", {
            "msg_id": msg.msg_id,
            "ts": msg.ts,
            "source_id": msg.source_id,
            "op": msg.op.value,
            "collection_id": msg.collection_id,
            "collection_name": msg.collection_name,
            "partition_id": msg.partition_id,
            "partition_name": msg.partition_name,
            "schema": msg.schema,
        }
    raise TypeError(f"cannot encode {type(msg).__name__}")


def _le_bytes(values: np.ndarray | list[Any], dtype: np.dtype) -> bytes:
    return np.ascontiguousarray(values, dtype=dtype).tobytes()


def _pks_record(pks: PrimaryKeys) -> dict[str, Any]:
    if isinstance(pks, np.ndarray):
        return {"int_ids": _le_bytes(pks, _INT64), "str_ids": None}
    return {"int_ids": None, "str_ids": list(pks)}


def _column_record(col: FieldColumn) -> dict[str, Any]:
    dtype = FIXED_DTYPES.get(col.data_type)
    record = {
        "field_id": col.field_id,
        "name": col.name,
        "data_type": int(col.data_type),
        "dim": col.dim,
        "fixed": None,
        "strings": None,
        "blobs": None,
        "valid": None if col.valid is None else _le_bytes(col.valid, _BOOL),
    }
    if dtype is not None:
        record["fixed"] = _le_bytes(col.data, dtype)
    elif col.data_type == DataType.SPARSE_FLOAT_VECTOR:
        record["blobs"] = list(col.data)
    else:
        record["strings"] = list(col.data)
    return record


# -- record -> message -------------------------------------------------------------------


def _pks(record: dict[str, Any]) -> PrimaryKeys:
    if record["int_ids"] is not None:
        return np.frombuffer(record["int_ids"], dtype=_INT64)
    return list(record["str_ids"] or [])


def _column(record: dict[str, Any]) -> FieldColumn:
    data_type = DataType(record["data_type"])
    dtype = FIXED_DTYPES.get(data_type)
    data: np.ndarray | list[str] | list[bytes]
    width = row_width(data_type, record["dim"])
    if dtype is not None:
        data = np.frombuffer(record["fixed"] or b"", dtype=dtype)
        if width:
            data = data.reshape(-1, width)
    elif data_type == DataType.SPARSE_FLOAT_VECTOR:
        data = list(record.get("blobs") or [])
    else:
        data = list(record["strings"] or [])
    valid = record.get("valid")
    return FieldColumn(
        record["field_id"],
        record["name"],
        data_type,
        data,
        record["dim"],
        None if valid is None else np.frombuffer(valid, dtype=_BOOL),
    )


def _insert(r: dict[str, Any]) -> InsertMsg:
    msg = InsertMsg(
        msg_id=r["msg_id"],
        ts=r["ts"],
        source_id=r["source_id"],
        collection_id=r["collection_id"],
        partition_id=r["partition_id"],
        segment_id=r["segment_id"],
        shard=r["shard"],
        pks=_pks(r["pks"]),
        row_ids=np.frombuffer(r["row_ids"], dtype=_INT64),
        timestamps=np.frombuffer(r["timestamps"], dtype=_INT64),
        fields=[_column(c) for c in r["fields"]],
    )
    _check_rows(msg.num_rows, r["num_rows"], *_column_lengths(msg))
    return msg


def _column_lengths(msg: InsertMsg | DeleteMsg) -> list[int]:
    """Every per-row array's length (all must equal the message's row count)."""
    if isinstance(msg, DeleteMsg):
        return [len(msg.timestamps)]
    return [
        len(msg.row_ids),
        len(msg.timestamps),
        *(len(c) for c in msg.fields),
        *(len(c.valid) for c in msg.fields if c.valid is not None),
    ]


def _delete(r: dict[str, Any]) -> DeleteMsg:
    msg = DeleteMsg(
        msg_id=r["msg_id"],
        ts=r["ts"],
        source_id=r["source_id"],
        collection_id=r["collection_id"],
        partition_id=r["partition_id"],
        shard=r["shard"],
        pks=_pks(r["pks"]),
        timestamps=np.frombuffer(r["timestamps"], dtype=_INT64),
    )
    _check_rows(msg.num_rows, r["num_rows"], *_column_lengths(msg))
    return msg


def _check_rows(*counts: int) -> None:
    if len(set(counts)) != 1:
        raise DecodeError(f"inconsistent row counts in message: {counts}")


def _ddl(r: dict[str, Any]) -> CollectionDDLMsg:
    return CollectionDDLMsg(
        msg_id=r["msg_id"],
        ts=r["ts"],
        source_id=r["source_id"],
        op=DDLOp(r["op"]),
        collection_id=r["collection_id"],
        collection_name=r["collection_name"],
        partition_id=r["partition_id"],
        partition_name=r["partition_name"],
        schema=r["schema"],
    )


_FROM_RECORD = {
    "Insert": _insert,
    "Delete": _delete,
    "TimeTick": lambda r: TimeTickMsg(r["msg_id"], r["ts"], r["source_id"]),
    "CollectionDDL": _ddl,
}
