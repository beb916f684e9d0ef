"""Kafka records -> rows or tombstones of a collection, checked against its schema.

Pure: no Kafka, no network. A record that cannot become a row raises :class:`RecordError`
with a reason a person can act on (it becomes the dead-letter record's ``error`` header);
one bad record never fails its neighbours.

- JSON: the value is an object of field name -> value; vectors and ARRAY values take the
  forms of Milvus's REST API (``services/common/field_values.py``).
- Avro: plain Avro binary written with :func:`avro_schema` of the collection, or, when the
  mapping names a Schema Registry, the Confluent wire format (magic byte 0, 4-byte schema
  id, then Avro binary written with that schema).
- The record key (UTF-8) carries the primary key when the value omits it; a null value (a
  tombstone) deletes the key's primary key.
"""

from __future__ import annotations

import io
import itertools
import json
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
import numpy as np
import orjson
import simdjson

from vectide.services.common import field_values, geometry, timestamptz, vector_types
from vectide.services.common.msgstream.message import FIXED_DTYPES, DataType
from vectide.services.common.nullable import may_be_null
from vectide.services.common.schema import CollectionSchema, FieldSchema
from vectide.services.ingest.avro_reader import AvroError, compile_reader

AvroReader = Callable[[bytes], dict[str, Any]]

_INT_RANGES = {
    DataType.INT8: (-(2**7), 2**7 - 1),
    DataType.INT16: (-(2**15), 2**15 - 1),
    DataType.INT32: (-(2**31), 2**31 - 1),
    DataType.INT64: (-(2**63), 2**63 - 1),
}
_AVRO_TYPES = {
    DataType.BOOL: "boolean",
    DataType.INT8: "int",
    DataType.INT16: "int",
    DataType.INT32: "int",
    DataType.INT64: "long",
    DataType.FLOAT: "float",
    DataType.DOUBLE: "double",
    DataType.VARCHAR: "string",
    DataType.JSON: "string",
    DataType.GEOMETRY: "string",
    DataType.TIMESTAMPTZ: "string",
    DataType.FLOAT_VECTOR: {"type": "array", "items": "float"},
    DataType.FLOAT16_VECTOR: {"type": "array", "items": "float"},
    DataType.BFLOAT16_VECTOR: {"type": "array", "items": "float"},
    DataType.BINARY_VECTOR: "bytes",
    DataType.INT8_VECTOR: {"type": "array", "items": "int"},
    DataType.SPARSE_FLOAT_VECTOR: {"type": "map", "values": "float"},
}
#: vectors given as arrays of numbers, converted a batch at a time (see _convert_vectors)
_FLOAT_VECTORS = frozenset(
    {DataType.FLOAT_VECTOR, DataType.FLOAT16_VECTOR, DataType.BFLOAT16_VECTOR}
)


class RecordError(ValueError):
    """This record cannot be applied; the message says why."""


@dataclass(frozen=True)
class Upsert:
    pk: int | str | None
    #: field name -> value, already checked against the schema (dense vectors as rows of
    #: their storage type, sparse ones as Milvus's row bytes, ARRAY and JSON as JSON text)
    values: dict[str, Any]


@dataclass(frozen=True)
class Tombstone:
    pk: int | str


Decoded = Upsert | Tombstone
#: schema id -> writer schema (parsed), e.g. a Schema Registry lookup
SchemaLookup = Callable[[int], Any]


def avro_schema(schema: CollectionSchema) -> dict[str, Any]:
    """The Avro schema producers write plain-Avro values with (`vectide ingest schema`).

    The primary key is optional (null: the record key carries it) and absent for auto_id
    collections; so are nullable fields and fields with a default value (null: the default);
    dynamic fields have no Avro form, and a function's output (BM25) is computed, not sent.
    """
    fields: list[dict[str, Any]] = []
    for f in schema.fields:
        if f.is_dynamic or f.is_function_output or (f.is_primary and f.auto_id):
            continue
        avro_type = _avro_type(f)
        if avro_type is None:
            raise RecordError(
                f"field {f.name!r}: type {f.data_type.name} is not supported by ingest"
            )
        if f.is_primary or may_be_null(f):
            fields.append({"name": f.name, "type": ["null", avro_type], "default": None})
        else:
            fields.append({"name": f.name, "type": avro_type})
    name = re.sub(r"[^A-Za-z0-9_]", "_", schema.name) or "row"
    return {"type": "record", "name": name, "namespace": "vectide", "fields": fields}


def _avro_type(field: FieldSchema) -> Any:
    if field.data_type == DataType.ARRAY:
        element = _AVRO_TYPES.get(DataType(field.element_type))
        return None if element is None else {"type": "array", "items": element}
    return _AVRO_TYPES.get(field.data_type)


class RecordDecoder:
    """Decodes one mapping's records for one collection schema."""

    def __init__(
        self,
        schema: CollectionSchema,
        fmt: str = "json",
        registry: SchemaLookup | None = None,
        zone: str = timestamptz.DEFAULT_TIMEZONE,
    ) -> None:
        self.schema = schema
        #: the collection's time zone: TIMESTAMPTZ text without an offset is in it
        self._zone = zone
        self._fmt = fmt
        self._registry = registry
        self._pk = schema.primary
        self._dynamic = schema.dynamic_field
        self._fields = {
            f.name: f for f in schema.fields if not (f.is_dynamic or f.is_function_output)
        }
        #: fields a function computes from the record's others (BM25): never in a record
        self._computed = frozenset(f.name for f in schema.fields if f.is_function_output)
        #: the fields a row carries besides the key, and those it may leave null or out
        self._row_fields = [n for n, f in self._fields.items() if not f.is_primary]
        self._optional = frozenset(n for n in self._row_fields if may_be_null(self._fields[n]))
        self._vectors = [f for f in self._fields.values() if f.data_type in _FLOAT_VECTORS]
        self._plain_avro = (
            fastavro.parse_schema(avro_schema(schema)) if fmt == "avro" and not registry else None
        )
        #: vectors of the Avro values come back as numpy arrays, converted with the batch's
        self._numpy_fields = frozenset(f.name for f in self._vectors)
        self._plain_reader = (
            compile_reader(self._plain_avro, self._numpy_fields) if self._plain_avro else None
        )
        #: schema id -> compiled reader of its writer schema (None: read with fastavro)
        self._readers: dict[int, AvroReader | None] = {}

    def decode(self, key: bytes | None, value: bytes | None) -> Decoded:
        """One record; raises :class:`RecordError` when it cannot be applied."""
        (got,) = self.decode_all([(key, value)])
        if isinstance(got, RecordError):
            raise got
        return got

    def decode_all(
        self, records: Sequence[tuple[bytes | None, bytes | None]]
    ) -> list[Decoded | RecordError]:
        """Each (key, value) decoded, or the reason it cannot be.

        Vectors given as numbers are converted for the whole batch at once: per record,
        numpy's conversion of a 128-float list cost as much as parsing the record's JSON.
        """
        out: list[Decoded | RecordError] = []
        parser = simdjson.Parser() if self._fmt == "json" and self._vectors else None
        for key, value in records:
            try:
                out.append(self._one(key, value, parser))
            except RecordError as exc:
                out.append(exc)
        for field in self._vectors:
            _convert_vectors(field, out)
        return out

    def decode_rows(self, rows: Sequence[dict[str, Any]]) -> list[Upsert | RecordError]:
        """Rows already parsed (bulk import files): each checked as a record's value is.
        The dicts become the upserts' values."""
        out: list[Upsert | RecordError] = []
        for row in rows:
            try:
                out.append(self._row(row, None))
            except RecordError as exc:
                out.append(exc)
        for field in self._vectors:
            _convert_vectors(field, out)  # type: ignore[arg-type]
        return out

    def _one(
        self, key: bytes | None, value: bytes | None, parser: simdjson.Parser | None = None
    ) -> Decoded:
        if value is None:
            if key is None:
                raise RecordError("a tombstone (null value) needs a key: the primary key")
            return Tombstone(self._key_pk(key))
        if self._fmt != "json":
            row = self._avro(value)
        else:
            row = (parser and self._json_vectors(parser, value)) or self._json(value)
        return self._row(row, key)

    # -- formats ---------------------------------------------------------------------------

    def _json_vectors(self, parser: simdjson.Parser, value: bytes) -> dict[str, Any] | None:
        """The common record, an object whose only arrays are its float vectors, with each
        vector read straight into float64s: parsing it into 128 Python floats cost as much
        as everything else the ingest role does per record. None for anything else, which
        the general parser then reads and explains.

        Only records with as many ``[`` as vector fields qualify: simdjson flattens nested
        arrays into a buffer, so ``[[1.0], 2.0]`` must not get here."""
        if value.count(b"[") != len(self._vectors):
            return None
        try:
            doc = parser.parse(value)
            if not isinstance(doc, simdjson.Object):
                return None
            row: dict[str, Any] = {}
            for name in doc:
                got = doc[name]
                if isinstance(got, simdjson.Array):
                    got = np.frombuffer(got.as_buffer(of_type="d"), dtype=np.float64)
                elif isinstance(got, simdjson.Object):
                    got = got.as_dict()
                row[name] = got
            # a repeated key: simdjson finds its first value, JSON parsers keep the last
            return row if len(row) == len(doc) else None
        except (ValueError, TypeError):  # not JSON, or an array of non-numbers
            return None
        finally:
            doc = got = None  # the parser refuses to parse while a view of its last one lives

    def _json(self, value: bytes) -> dict[str, Any]:
        try:
            row = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise RecordError(f"value is not valid JSON: {exc}") from None
        if not isinstance(row, dict):
            raise RecordError(f"value must be a JSON object, got {type(row).__name__}")
        return row

    def _avro(self, value: bytes) -> dict[str, Any]:
        if self._registry is not None:
            if len(value) < 5 or value[0] != 0:
                raise RecordError(
                    "value is not in the Confluent wire format (magic byte 0 + schema id)"
                )
            (schema_id,) = struct.unpack(">I", value[1:5])
            try:
                writer = self._registry(schema_id)
            except Exception as exc:
                raise RecordError(f"schema id {schema_id} not resolved: {exc}") from None
            payload = value[5:]
            if schema_id not in self._readers:
                self._readers[schema_id] = compile_reader(writer, self._numpy_fields)
            reader = self._readers[schema_id]
        else:
            writer, payload, reader = self._plain_avro, value, self._plain_reader
        if reader is not None:
            try:
                return reader(payload)
            except AvroError as exc:
                raise RecordError(f"value is not Avro of the expected schema: {exc}") from None
        try:
            stream = io.BytesIO(payload)
            row = fastavro.schemaless_reader(stream, writer, None)
        except Exception as exc:
            raise RecordError(f"value is not Avro of the expected schema: {exc}") from None
        if stream.tell() != len(payload):
            raise RecordError(
                f"value is not Avro of the expected schema: {len(payload) - stream.tell()} "
                "bytes left over"
            )
        if not isinstance(row, dict):
            raise RecordError("the Avro value must be a record")
        return row

    # -- schema checks ---------------------------------------------------------------------

    def _key_pk(self, key: bytes) -> int | str:
        try:
            text = key.decode()
        except UnicodeDecodeError:
            raise RecordError("the record key is not UTF-8") from None
        if self._pk.data_type == DataType.VARCHAR:
            return _varchar(self._pk, text)
        try:
            return int(text)
        except ValueError:
            raise RecordError(
                f"the record key {text[:40]!r} is not an integer primary key {self._pk.name}"
            ) from None

    def _row(self, row: dict[str, Any], key: bytes | None) -> Upsert:
        """The decoded value checked field by field; the row's own dict becomes the upsert's
        values (fresh from the parser: no second dict per record)."""
        fields, optional = self._fields, self._optional
        extra: dict[str, Any] = {}
        for name, value in row.items():
            field = fields.get(name)
            if field is None:
                if name in self._computed:
                    raise RecordError(f"field {name!r} is computed by a function: leave it out")
                if self._dynamic is None:
                    raise RecordError(
                        f"field {name!r} is not in collection {self.schema.name!r} "
                        "(and its dynamic field is off)"
                    )
                extra[name] = value
            elif not field.is_primary and (value is not None or name not in optional):
                # a null of an optional field stays null
                row[name] = _checked(field, value, self._zone)
        pk = self._primary(row.pop(self._pk.name, None), key)
        for name in extra:
            del row[name]
        if len(row) < len(self._row_fields):  # some left out: nulls, defaults or an error
            for name in self._row_fields:
                if name not in row:
                    if name not in optional:
                        raise RecordError(f"field {name!r} is missing")
                    row[name] = None  # a null: the field's default value, if it has one
        if self._dynamic is not None:
            row[self._dynamic.name] = json.dumps(extra)
        return Upsert(pk, row)

    def _primary(self, given: Any, key: bytes | None) -> int | str | None:
        pk = self._pk
        if pk.auto_id:
            if given is not None:
                raise RecordError(f"the primary key {pk.name} is auto_id: leave it out")
            return None
        if given is not None:
            return _checked(pk, given)
        if key is None:
            raise RecordError(f"the primary key {pk.name!r} is in neither the value nor the key")
        return self._key_pk(key)


def _checked(field: FieldSchema, value: Any, zone: str = timestamptz.DEFAULT_TIMEZONE) -> Any:
    """``value`` as its field's column holds it; TIMESTAMPTZ text without an offset is in
    ``zone`` (the collection's)."""
    t = field.data_type
    if value is None:
        raise RecordError(f"field {field.name!r} is null")
    if t in _FLOAT_VECTORS:
        return _vector(field, value)
    if t in _TYPED:
        try:
            return _TYPED[t](field, value)
        except ValueError as exc:
            raise RecordError(f"field {field.name!r}: {exc}") from None
    if t in _INT_RANGES:
        if not isinstance(value, int) or isinstance(value, bool):
            raise RecordError(f"field {field.name!r}: expected an integer, got {value!r:.40}")
        low, high = _INT_RANGES[t]
        if not low <= value <= high:
            raise RecordError(f"field {field.name!r}: {value} is out of range for {t.name}")
        return value
    if t in (DataType.FLOAT, DataType.DOUBLE):
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise RecordError(f"field {field.name!r}: expected a number, got {value!r:.40}")
        return float(value)
    if t == DataType.BOOL:
        if not isinstance(value, bool):
            raise RecordError(f"field {field.name!r}: expected true or false, got {value!r:.40}")
        return value
    if t == DataType.VARCHAR:
        if not isinstance(value, str):
            raise RecordError(f"field {field.name!r}: expected a string, got {value!r:.40}")
        return _varchar(field, value)
    if t == DataType.JSON:
        if isinstance(value, str):  # Avro carries JSON fields as text
            try:
                json.loads(value)
            except ValueError:
                raise RecordError(f"field {field.name!r}: invalid JSON text") from None
            return value
        return json.dumps(value)
    if t == DataType.GEOMETRY:
        if not isinstance(value, str):
            raise RecordError(f"field {field.name!r}: expected WKT text, got {value!r:.40}")
        try:
            return geometry.normalized([value])[0]
        except geometry.GeometryError as exc:
            raise RecordError(f"field {field.name!r}: {exc}") from None
    if t == DataType.TIMESTAMPTZ:
        return _instant(field, value, zone)
    raise RecordError(f"field {field.name!r}: type {t.name} is not supported by ingest")


def _instant(field: FieldSchema, value: Any, zone: str) -> int:
    """ISO 8601 text as microseconds (naive text in ``zone``), as the proxy reads it."""
    if not isinstance(value, str):
        raise RecordError(f"field {field.name!r}: expected ISO 8601 text, got {value!r:.40}")
    try:
        return timestamptz.parse(value, zone)
    except timestamptz.TimestamptzError as exc:
        raise RecordError(f"field {field.name!r}: {exc}") from None


def _varchar(field: FieldSchema, value: str) -> str:
    if field.max_length and len(value) > field.max_length:
        raise RecordError(
            f"field {field.name!r}: length {len(value)} exceeds max_length {field.max_length}"
        )
    return value


def _vector(field: FieldSchema, value: Any) -> np.ndarray | list[Any]:
    """Bytes become a row of the field's storage type here; a list is only measured (its
    numbers are converted and checked with the batch's, in :func:`_convert_vectors`)."""
    if isinstance(value, list | np.ndarray):  # ndarray: an Avro array of floats
        if len(value) != field.dim:
            raise RecordError(f"field {field.name!r}: dimension {len(value)}, expected {field.dim}")
        return value
    if field.data_type == DataType.FLOAT_VECTOR:
        if not isinstance(value, bytes):
            raise RecordError(f"field {field.name!r}: expected an array of {field.dim} floats")
        if len(value) != 4 * field.dim:  # little-endian float32, as the channels carry them
            raise RecordError(
                f"field {field.name!r}: {len(value)} bytes, expected {4 * field.dim} "
                f"(dim {field.dim} float32)"
            )
        return np.frombuffer(value, dtype="<f4")
    try:  # half floats: base64 text or bytes of the 16-bit values
        raw = field_values.dense_row_bytes(field.data_type, field.dim, value)
    except ValueError as exc:
        raise RecordError(f"field {field.name!r}: {exc}") from None
    row = np.frombuffer(raw, dtype=FIXED_DTYPES[field.data_type])
    if not np.isfinite(vector_types.as_float32(field.data_type, row)).all():
        raise RecordError(f"field {field.name!r}: the vector must be finite numbers")
    return row


def _binary(field: FieldSchema, value: Any) -> np.ndarray:
    raw = field_values.dense_row_bytes(DataType.BINARY_VECTOR, field.dim, value)
    return np.frombuffer(raw, dtype=np.uint8)


def _int8(field: FieldSchema, value: Any) -> np.ndarray:
    """An Int8Vector: an array of integers in [-128, 127] (or base64 of the bytes)."""
    if isinstance(value, np.ndarray):  # a NumPy import file's row
        value = value.tolist()
    raw = field_values.dense_row_bytes(DataType.INT8_VECTOR, field.dim, value)
    return np.frombuffer(raw, dtype=np.int8)


def _array(field: FieldSchema, value: Any) -> str:
    if not isinstance(value, list):
        raise ValueError(f"expected an array, got {value!r:.40}")
    element = DataType(field.element_type)
    field_values.check_array(element, value, field.max_capacity, field.max_length)
    if element in (DataType.FLOAT, DataType.DOUBLE):
        value = [float(v) for v in value]
    return json.dumps(value)


#: types whose values field_values checks; ValueError names what is wrong
_TYPED: dict[DataType, Callable[[FieldSchema, Any], Any]] = {
    DataType.BINARY_VECTOR: _binary,
    DataType.INT8_VECTOR: _int8,
    DataType.SPARSE_FLOAT_VECTOR: lambda _field, value: field_values.sparse_row_bytes(value),
    DataType.ARRAY: _array,
}


def _convert_vectors(field: FieldSchema, decoded: list[Decoded | RecordError]) -> None:
    """Replace the vectors of ``field`` given as numbers (JSON arrays, Avro float arrays) in
    the batch's upserts by rows of one matrix of the field's storage type (float32, float16,
    bfloat16 bits); an upsert whose vector holds non-numbers or numbers that are not finite
    in that type becomes a :class:`RecordError` in place."""
    upserts = [
        (i, d.values)
        for i, d in enumerate(decoded)
        if isinstance(d, Upsert) and _numbers_given(d.values[field.name])
    ]
    if not upserts:
        return
    vectors = [values[field.name] for _, values in upserts]
    rows: list[np.ndarray | None]
    with np.errstate(over="ignore"):  # beyond float32 becomes inf: refused just below
        try:
            matrix = _float32_matrix(vectors, field.dim)
        except (TypeError, ValueError):  # a vector holds a non-number: convert row by row
            rows = [_numbers(field.data_type, v) for v in vectors]
            finite = [
                r is not None
                and bool(np.isfinite(vector_types.as_float32(field.data_type, r)).all())
                for r in rows
            ]
        else:
            if field.data_type in field_values.HALF_FLOATS:
                matrix = field_values.narrow(field.data_type, matrix)
            wide = vector_types.as_float32(field.data_type, matrix)
            rows, finite = list(matrix), np.isfinite(wide).all(axis=1).tolist()
    if all(finite):
        for (_, values), vector in zip(upserts, rows, strict=True):
            values[field.name] = vector
        return
    for (i, values), vector, ok in zip(upserts, rows, finite, strict=True):
        if vector is None:
            decoded[i] = RecordError(f"field {field.name!r}: the vector holds non-numbers")
        elif not ok:
            decoded[i] = RecordError(f"field {field.name!r}: the vector must be finite numbers")
        else:
            values[field.name] = vector


def _numbers_given(value: Any) -> bool:
    """A vector still in its producer's numbers (not rows already in their storage type)."""
    return isinstance(value, list) or (
        isinstance(value, np.ndarray) and value.dtype in (np.float32, np.float64)
    )


def _float32_matrix(vectors: list[Any], dim: int) -> np.ndarray:
    """Rows of equal length (checked per record) as one float32 matrix. JSON arrays go
    through one ``np.fromiter`` over all their numbers: twice as fast as ``np.array`` of
    the lists, which first walks them to find the shape."""
    if all(isinstance(v, list) for v in vectors):
        flat = np.fromiter(itertools.chain.from_iterable(vectors), np.float32, len(vectors) * dim)
        return flat.reshape(len(vectors), dim)
    if all(isinstance(v, np.ndarray) for v in vectors):
        return np.stack(vectors).astype(np.float32, copy=False)
    return np.stack([np.asarray(v, dtype=np.float32) for v in vectors])


def _numbers(data_type: DataType, value: list[Any]) -> np.ndarray | None:
    try:
        wide = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        return None
    return field_values.narrow(data_type, wide) if data_type in field_values.HALF_FLOATS else wide
