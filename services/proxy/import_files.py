"""Bulk import files -> batches of rows (dicts of field name -> value), as Milvus reads them.

Pure: the bytes come in, rows go out; the checks against the schema are the Kafka ingest
decoder's (``services/ingest/decode.py``), so an imported row and a produced record are held
to the same rules. The formats are those pymilvus's ``LocalBulkWriter``/``RemoteBulkWriter``
write and Milvus imports:

- Parquet (``.parquet``): a column per field; vectors as lists of numbers; JSON fields,
  sparse vectors and the dynamic field (``$meta``) as JSON text.
- JSON (``.json``): ``{"rows": [{...}, ...]}`` or a bare list of row objects; the dynamic
  field as a ``$meta`` object or as the row's other keys.
- JSON lines (``.jsonl``): one row object per line.

NumPy and CSV files are refused by name (not read as something else).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from vectide.services.common.msgstream.message import DataType
from vectide.services.common.schema import CollectionSchema

FORMATS = (".parquet", ".json", ".jsonl")
#: rows per batch handed to the decoder and then to one insert
BATCH_ROWS = 2000
DYNAMIC_KEY = "$meta"


class ImportFileError(ValueError):
    """A file that cannot be imported; the message names the file and, for a row, its index."""


def check_name(name: str) -> None:
    """Refuse a file whose format is not offered, before anything is read."""
    lower = name.lower()
    if lower.endswith(FORMATS):
        return
    if lower.endswith(".npy"):
        raise ImportFileError(f"{name}: NumPy import files are not supported: use Parquet or JSON")
    kinds = ", ".join(FORMATS)
    raise ImportFileError(f"{name}: unsupported import file type (expected {kinds})")


def row_batches(name: str, raw: bytes, schema: CollectionSchema) -> Iterator[list[dict[str, Any]]]:
    """The file's rows, ``BATCH_ROWS`` at a time, with text-encoded values (sparse vectors,
    ``$meta``) parsed into what the decoder takes and ``$meta``'s keys made the row's own."""
    check_name(name)
    lower = name.lower()
    if lower.endswith(".parquet"):
        batches = _parquet(name, raw)
    elif lower.endswith(".jsonl"):
        batches = _batched(_jsonl(name, raw))
    else:
        batches = _batched(iter(_json_rows(name, raw)))
    texts = _text_fields(schema)
    dynamic = schema.dynamic_field is not None
    start = 0
    for rows in batches:
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise ImportFileError(f"{name}: row {start + i} is not an object")
            _normalise(row, texts, dynamic, name, start + i)
        yield rows
        start += len(rows)


def _parquet_file(name: str, raw: bytes) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(pa.BufferReader(raw))
    except (pa.ArrowInvalid, OSError) as exc:
        raise ImportFileError(f"{name}: not a Parquet file: {exc}") from None


def _parquet(name: str, raw: bytes) -> Iterator[list[dict[str, Any]]]:
    reader = _parquet_file(name, raw)
    try:
        for batch in reader.iter_batches(batch_size=BATCH_ROWS):
            names, columns = batch.schema.names, [_values(c) for c in batch.columns]
            yield [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]
    except (pa.ArrowInvalid, OSError) as exc:
        raise ImportFileError(f"{name}: cannot read the Parquet file: {exc}") from None


def _values(column: pa.Array) -> list[Any]:
    """A column's values, lists of floats of one length (vectors) as numpy rows: as Python
    lists of floats, 128-d vectors cost three times what the rest of an imported row costs."""
    kind = column.type
    listed = pa.types.is_list(kind) or pa.types.is_large_list(kind)
    if (
        (listed or pa.types.is_fixed_size_list(kind))
        and pa.types.is_floating(kind.value_type)
        and len(column)
        and not column.null_count
    ):
        flat = column.flatten()
        width, rest = divmod(len(flat), len(column))
        uniform = not listed or (np.diff(column.offsets.to_numpy()) == width).all()
        if not rest and uniform and not flat.null_count:
            return list(flat.to_numpy().reshape(len(column), width))
    return column.to_pylist()


def _json_rows(name: str, raw: bytes) -> list[Any]:
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ImportFileError(f"{name}: not valid JSON: {exc}") from None
    if isinstance(doc, dict) and isinstance(doc.get("rows"), list):
        return doc["rows"]
    if isinstance(doc, list):
        return doc
    raise ImportFileError(f'{name}: expected {{"rows": [...]}} or a list of row objects')


def _jsonl(name: str, raw: bytes) -> Iterator[Any]:
    for number, line in enumerate(io.BytesIO(raw), start=1):
        if not line.strip():
            continue
        try:
            yield orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ImportFileError(f"{name}: line {number} is not valid JSON: {exc}") from None


def _batched(rows: Iterator[Any]) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for row in rows:
        batch.append(row)
        if len(batch) == BATCH_ROWS:
            yield batch
            batch = []
    if batch:
        yield batch


def _text_fields(schema: CollectionSchema) -> frozenset[str]:
    """Sparse vector fields: Parquet files carry them as JSON text (JSON fields stay text,
    which the decoder takes as it is)."""
    return frozenset(f.name for f in schema.fields if f.data_type == DataType.SPARSE_FLOAT_VECTOR)


def _normalise(
    row: dict[str, Any], texts: frozenset[str], dynamic: bool, name: str, index: int
) -> None:
    for field in texts & row.keys():
        if isinstance(row[field], str):
            row[field] = _loads(row[field], name, index, field)
    if DYNAMIC_KEY not in row:
        return
    extra = row.pop(DYNAMIC_KEY)
    if isinstance(extra, str):
        extra = _loads(extra, name, index, DYNAMIC_KEY)
    if extra is None:
        return
    if not isinstance(extra, dict):
        raise ImportFileError(f"{name}: row {index}: {DYNAMIC_KEY} must be a JSON object")
    if not dynamic and extra:
        raise ImportFileError(
            f"{name}: row {index}: has dynamic fields ({', '.join(sorted(extra))}) but the "
            "collection's dynamic field is off"
        )
    for key, value in extra.items():
        row.setdefault(key, value)


def _loads(text: str, name: str, index: int, field: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise ImportFileError(f"{name}: row {index}: {field} is not valid JSON text") from None
