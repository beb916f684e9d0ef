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
- CSV (``.csv``): a header of field names; vectors, arrays, sparse vectors, JSON fields and
  ``$meta`` as JSON text; ``sep`` (default ``,``) and ``nullkey`` (the text of a null,
  default empty) from the request's options.
- NumPy (``.npy``): a file per field, named after it (``vector.npy``, ``$meta.npy``); the
  files of one import are one set of columns of equal length.
"""

from __future__ import annotations

import csv
import io
import json
import posixpath
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from vectide.services.common.msgstream.message import DataType
from vectide.services.common.schema import CollectionSchema

FORMATS = (".parquet", ".json", ".jsonl", ".csv", ".npy")
#: rows per batch handed to the decoder and then to one insert
BATCH_ROWS = 2000
DYNAMIC_KEY = "$meta"


class ImportFileError(ValueError):
    """A file that cannot be imported; the message names the file and, for a row, its index."""


def check_name(name: str) -> None:
    """Refuse a file whose format is not offered, before anything is read."""
    if not name.lower().endswith(FORMATS):
        kinds = ", ".join(FORMATS)
        raise ImportFileError(f"{name}: unsupported import file type (expected {kinds})")


def units(files: list[str]) -> list[list[str]]:
    """The files as Milvus imports them: each on its own, except NumPy files, which are
    one set of columns together."""
    numpy = [f for f in files if f.lower().endswith(".npy")]
    return [[f] for f in files if not f.lower().endswith(".npy")] + ([numpy] if numpy else [])


def row_batches(
    unit: Mapping[str, bytes], schema: CollectionSchema, options: Mapping[str, str] | None = None
) -> Iterator[list[dict[str, Any]]]:
    """The rows of one unit (a file, or a NumPy file set: name -> bytes), ``BATCH_ROWS`` at a
    time, with text-encoded values parsed into what the decoder takes and ``$meta``'s keys
    made the row's own."""
    options = options or {}
    name, raw = next(iter(unit.items()))
    for each in unit:
        check_name(each)
    lower = name.lower()
    if lower.endswith(".npy"):
        batches = _numpy(unit)
    elif lower.endswith(".parquet"):
        batches = _parquet(name, raw, _dense_vectors(schema))
    elif lower.endswith(".csv"):
        batches = _batched(_csv(name, raw, schema, options))
    elif lower.endswith(".jsonl"):
        batches = _batched(_jsonl(name, raw))
    else:
        batches = _batched(iter(_json_rows(name, raw)))
    texts = _text_fields(schema, csv=lower.endswith(".csv"))
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


def _parquet(name: str, raw: bytes, vectors: frozenset[str]) -> Iterator[list[dict[str, Any]]]:
    reader = _parquet_file(name, raw)
    try:
        for batch in reader.iter_batches(batch_size=BATCH_ROWS):
            names = batch.schema.names
            columns = [
                _vector_rows(c) if n in vectors else c.to_pylist()
                for n, c in zip(names, batch.columns, strict=True)
            ]
            yield [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]
    except (pa.ArrowInvalid, OSError) as exc:
        raise ImportFileError(f"{name}: cannot read the Parquet file: {exc}") from None


def _dense_vectors(schema: CollectionSchema) -> frozenset[str]:
    kinds = (DataType.FLOAT_VECTOR, DataType.FLOAT16_VECTOR, DataType.BFLOAT16_VECTOR)
    return frozenset(f.name for f in schema.fields if f.data_type in kinds)


def _vector_rows(column: pa.Array) -> list[Any]:
    """A vector field's values, lists of floats of one length as numpy rows: as Python lists
    of floats, 128-d vectors cost three times what the rest of an imported row costs; any
    other shape as it is, for the decoder to refuse or take."""
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


def _text_fields(schema: CollectionSchema, csv: bool = False) -> frozenset[str]:
    """Fields whose values the file may carry as JSON text that the decoder wants parsed:
    sparse vectors, and in CSV also dense vectors and arrays (JSON fields stay text, which
    the decoder takes as it is)."""
    kinds = {DataType.SPARSE_FLOAT_VECTOR}
    if csv:
        kinds |= {
            DataType.FLOAT_VECTOR,
            DataType.FLOAT16_VECTOR,
            DataType.BFLOAT16_VECTOR,
            DataType.BINARY_VECTOR,
            DataType.INT8_VECTOR,
            DataType.ARRAY,
        }
    return frozenset(f.name for f in schema.fields if f.data_type in kinds and not f.is_dynamic)


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


def _csv(
    name: str, raw: bytes, schema: CollectionSchema, options: Mapping[str, str]
) -> Iterator[dict[str, Any]]:
    """Rows of text, each value read by its field's type (``_typed``)."""
    sep, null = options.get("sep", ","), options.get("nullkey", "")
    if len(sep) != 1:
        raise ImportFileError(f"{name}: sep must be one character, got {sep!r}")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ImportFileError(f"{name}: not UTF-8 text") from None
    types = {f.name: f.data_type for f in schema.fields if not f.is_dynamic}
    for index, row in enumerate(csv.DictReader(io.StringIO(text), delimiter=sep)):
        if None in row or None in row.values():
            raise ImportFileError(f"{name}: row {index} does not have one value per column")
        yield {
            key: None if value == null else _typed(types.get(key), value, name, index, key)
            for key, value in row.items()
        }


def _typed(kind: DataType | None, text: str, name: str, index: int, key: str) -> Any:
    """A CSV value as its field's type reads it; text for text fields (VarChar, JSON, and
    the JSON texts ``_normalise`` parses) and for columns of no field."""
    try:
        if kind in _INTEGERS:
            return int(text)
        if kind in (DataType.FLOAT, DataType.DOUBLE):
            return float(text)
    except ValueError:
        raise ImportFileError(f"{name}: row {index}: {key} {text!r} is not a number") from None
    if kind == DataType.BOOL:
        if text.lower() not in ("true", "false"):
            raise ImportFileError(f"{name}: row {index}: {key} {text!r} is not true or false")
        return text.lower() == "true"
    return text


_INTEGERS = frozenset({DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64})


def _numpy(unit: Mapping[str, bytes]) -> Iterator[list[dict[str, Any]]]:
    columns: dict[str, list[Any]] = {}
    for name, raw in unit.items():
        field = posixpath.basename(name)[: -len(".npy")]
        if field in columns:
            raise ImportFileError(f"{name}: a second file of field {field}")
        try:
            array = np.load(io.BytesIO(raw), allow_pickle=False)
        except ValueError as exc:
            raise ImportFileError(f"{name}: not a NumPy array file: {exc}") from None
        columns[field] = list(array) if array.ndim > 1 else array.tolist()
    lengths = {field: len(values) for field, values in columns.items()}
    if len(set(lengths.values())) > 1:
        raise ImportFileError(f"NumPy files of one import differ in length: {lengths}")
    names = list(columns)
    rows = (dict(zip(names, row, strict=True)) for row in zip(*columns.values(), strict=True))
    return _batched(rows)
