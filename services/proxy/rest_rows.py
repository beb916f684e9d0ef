"""Rows of JSON objects to and from Milvus's column-wise protobuf data, for the RESTful API.

Insert and upsert bodies carry rows (``[{"id": 1, "vector": [...], "title": "a"}]``); the
handlers turn them into the ``FieldData`` columns pymilvus would send, so the gRPC service's
own checks (types, ranges, lengths, dimensions) apply unchanged. Query, get and search
replies go the other way: columns to rows, as Milvus's REST server renders them (dynamic
keys spread into the row, search hits with ``id`` and ``distance``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from pymilvus.grpc_gen import common_pb2, schema_pb2

from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.schema import DYNAMIC_FIELD
from vectide.services.proxy import rest_vectors, typed_fields

DT = schema_pb2.DataType
_INT_RANGES = {DT.Int8: 2**7, DT.Int16: 2**15, DT.Int32: 2**31, DT.Int64: 2**63}


def invalid_data(message: str) -> MilvusError:
    """Milvus's 1804: an insert or upsert row that cannot become a column value."""
    return MilvusError(Code.INVALID_INSERT_DATA, f"fail to deal the insert data, error: {message}")


# -- rows -> columns -------------------------------------------------------------------------


def columns(
    rows: Any, schema: schema_pb2.CollectionSchema, upsert: bool = False
) -> list[schema_pb2.FieldData]:
    """``rows`` (the body's ``data``) as one FieldData per schema field, plus the dynamic
    field's column when the collection has one. An auto-id key is left out of inserts;
    upserts name it, as Milvus requires."""
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise invalid_data("data must be a non-empty array of objects")
    fields = [
        f
        for f in schema.fields
        if not (f.is_function_output or (f.is_primary_key and f.autoID and not upsert))
    ]
    known = {f.name for f in schema.fields}
    computed = {f.name for f in schema.fields if f.is_function_output}
    given = next((name for row in rows for name in computed & row.keys()), None)
    if given:
        raise invalid_data(f"field {given} is the output of a function: leave it out of rows")
    auto = next((f.name for f in schema.fields if f.is_primary_key and f.autoID), None)
    if auto and not upsert and any(auto in row for row in rows):
        raise invalid_data(f"field {auto} is auto_id: leave it out of inserted rows")
    out = [_column(f, [_value_of(row, f, i) for i, row in enumerate(rows)]) for f in fields]
    extras = [{k: v for k, v in row.items() if k not in known} for row in rows]
    if schema.enable_dynamic_field:
        dynamic = schema_pb2.FieldData(type=DT.JSON, field_name=DYNAMIC_FIELD, is_dynamic=True)
        dynamic.scalars.json_data.data.extend(json.dumps(e).encode() for e in extras)
        out.append(dynamic)
    else:
        unknown = sorted({k for e in extras for k in e})
        if unknown:
            raise invalid_data(
                f"field {unknown[0]} is not in the schema of {schema.name} (dynamic fields are off)"
            )
    return out


def _optional(field: schema_pb2.FieldSchema) -> bool:
    """A field a row may leave out (or set to null): nullable, or with a default value; its
    column then carries ``valid_data``, as pymilvus sends it, and the server fills in."""
    return field.nullable or field.HasField("default_value")


def _value_of(row: dict[str, Any], field: schema_pb2.FieldSchema, i: int) -> Any:
    if row.get(field.name) is None:
        if _optional(field):
            return None
        if field.name in row:
            raise invalid_data(f"row {i}: field {field.name} cannot be null")
        raise invalid_data(f"row {i}: field {field.name} is missing")
    return row[field.name]


def _column(field: schema_pb2.FieldSchema, values: list[Any]) -> schema_pb2.FieldData:
    fd = schema_pb2.FieldData(type=field.data_type, field_name=field.name)
    writer = _WRITERS.get(field.data_type)
    if writer is None:
        raise invalid_data(
            f"field {field.name}: {DT.Name(field.data_type)} values are not accepted over REST"
        )
    if _optional(field):
        fd.valid_data.extend(v is not None for v in values)
        values = [v for v in values if v is not None]
    try:
        writer(fd, field, values)
    except (TypeError, ValueError) as exc:
        raise invalid_data(f"field {field.name}: {exc}") from exc
    return fd


def _check(values: list[Any], ok: Callable[[Any], bool], kind: str) -> list[Any]:
    for v in values:
        if not ok(v):
            raise ValueError(f"expected {kind}, got {json.dumps(v)}")
    return values


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _ints(fd: schema_pb2.FieldData, field: schema_pb2.FieldSchema, values: list[Any]) -> None:
    values = _check(values, _is_int, "an integer")
    bound = _INT_RANGES[field.data_type]
    if any(not -bound <= v < bound for v in values):
        raise ValueError(f"value out of range for {DT.Name(field.data_type)}")
    target = fd.scalars.long_data if field.data_type == DT.Int64 else fd.scalars.int_data
    target.data.extend(values)


def _floats(fd: schema_pb2.FieldData, field: schema_pb2.FieldSchema, values: list[Any]) -> None:
    values = _check(values, _is_number, "a number")
    target = fd.scalars.float_data if field.data_type == DT.Float else fd.scalars.double_data
    target.data.extend(values)


def _bools(fd: schema_pb2.FieldData, field: schema_pb2.FieldSchema, values: list[Any]) -> None:
    fd.scalars.bool_data.data.extend(_check(values, lambda v: isinstance(v, bool), "a boolean"))


def _strings(fd: schema_pb2.FieldData, field: schema_pb2.FieldSchema, values: list[Any]) -> None:
    fd.scalars.string_data.data.extend(_check(values, lambda v: isinstance(v, str), "a string"))


def _geometries(fd: schema_pb2.FieldData, field: schema_pb2.FieldSchema, values: list[Any]) -> None:
    wkt = _check(values, lambda v: isinstance(v, str), "a WKT string")
    fd.scalars.geometry_wkt_data.data.extend(wkt)


def _instants(fd: schema_pb2.FieldData, field: schema_pb2.FieldSchema, values: list[Any]) -> None:
    texts = _check(values, lambda v: isinstance(v, str), "an ISO 8601 timestamp string")
    fd.scalars.string_data.data.extend(texts)


def _jsons(fd: schema_pb2.FieldData, field: schema_pb2.FieldSchema, values: list[Any]) -> None:
    fd.scalars.json_data.data.extend(json.dumps(v).encode() for v in values)


def _float_vectors(
    fd: schema_pb2.FieldData, field: schema_pb2.FieldSchema, values: list[Any]
) -> None:
    dim = int(next((kv.value for kv in field.type_params if kv.key == "dim"), "0") or 0)
    for v in values:
        if not isinstance(v, list) or not all(_is_number(x) for x in v):
            raise ValueError("a vector must be an array of numbers")
        if len(v) != dim:
            raise ValueError(f"vector of dim {len(v)}, expected {dim}")
    fd.vectors.dim = dim
    flat = np.asarray(values, dtype=np.float32).reshape(-1)
    fd.vectors.float_vector.data.extend(flat.tolist())


def _arrays(fd: schema_pb2.FieldData, field: schema_pb2.FieldSchema, values: list[Any]) -> None:
    """Array rows (JSON lists); the gRPC service then checks capacity, lengths and ranges."""
    member = typed_fields.ARRAY_ELEMENTS.get(field.element_type)  # DataType is an IntEnum
    if member is None:
        raise ValueError(f"arrays of {DT.Name(field.element_type)} are not supported")
    fd.scalars.array_data.element_type = field.element_type
    for v in values:
        if not isinstance(v, list):
            raise ValueError(f"expected an array, got {json.dumps(v)[:40]}")
        getattr(fd.scalars.array_data.data.add(), member).data.extend(v)


_WRITERS: dict[int, Callable[[schema_pb2.FieldData, schema_pb2.FieldSchema, list[Any]], None]] = {
    DT.Bool: _bools,
    DT.Int8: _ints,
    DT.Int16: _ints,
    DT.Int32: _ints,
    DT.Int64: _ints,
    DT.Float: _floats,
    DT.Double: _floats,
    DT.VarChar: _strings,
    DT.JSON: _jsons,
    DT.Geometry: _geometries,
    DT.Timestamptz: _instants,
    DT.FloatVector: _float_vectors,
    **dict.fromkeys(rest_vectors.TYPES, rest_vectors.write_column),
    DT.Array: _arrays,
}


def placeholder_group(data: Any, field: schema_pb2.FieldSchema) -> bytes:
    """Search vectors (``data``: an array of float arrays, or of sparse objects for a sparse
    field, of texts for a BM25 function's output) as the serialized PlaceholderGroup pymilvus
    sends; a wrong shape is Milvus's 1801."""
    if field.is_function_output and isinstance(data, list) and data:
        if not all(isinstance(v, str) for v in data):
            raise MilvusError(
                Code.INCORRECT_PARAMETER_FORMAT,
                f"data must be an array of texts for field {field.name} (a BM25 function's output)",
            )
        holder = common_pb2.PlaceholderValue(
            tag="$0", type=common_pb2.PlaceholderType.VarChar, values=[v.encode() for v in data]
        )
        return common_pb2.PlaceholderGroup(placeholders=[holder]).SerializeToString()
    if field.data_type in rest_vectors.TYPES:
        return _typed_placeholders(data, field)
    dim = int(next((kv.value for kv in field.type_params if kv.key == "dim"), "0") or 0)
    ok = (
        isinstance(data, list)
        and data
        and all(
            isinstance(v, list) and len(v) == dim and all(_is_number(x) for x in v) for v in data
        )
    )
    if not ok:
        raise MilvusError(
            Code.INCORRECT_PARAMETER_FORMAT,
            f"can only accept json format request, error: data must be an array of vectors "
            f"of dim {dim} for field {field.name}",
        )
    holder = common_pb2.PlaceholderValue(
        tag="$0",
        type=common_pb2.PlaceholderType.FloatVector,
        values=[np.asarray(v, dtype="<f4").tobytes() for v in data],
    )
    return common_pb2.PlaceholderGroup(placeholders=[holder]).SerializeToString()


def _typed_placeholders(data: Any, field: schema_pb2.FieldSchema) -> bytes:
    """Binary, half-float and sparse search vectors (their JSON forms: ``rest_vectors``)."""
    try:
        if not isinstance(data, list) or not data:
            raise ValueError("no vectors")
        holder = rest_vectors.placeholder(field, data)
    except ValueError as exc:
        raise MilvusError(
            Code.INCORRECT_PARAMETER_FORMAT,
            f"can only accept json format request, error: data must be an array of "
            f"{DT.Name(field.data_type)} vectors for field {field.name}: {exc}",
        ) from None
    return common_pb2.PlaceholderGroup(placeholders=[holder]).SerializeToString()


# -- columns -> rows -------------------------------------------------------------------------


def _f32(values: Any) -> list[float]:
    """float32 values at float32's shortest decimal form (``0.1``, not ``0.10000000149``),
    as Go's JSON encoder writes them in Milvus's replies."""
    return np.asarray(values, dtype=np.float32).astype(str).astype(np.float64).tolist()


def _column_values(fd: schema_pb2.FieldData, int64_as_number: bool) -> list[Any]:
    t = fd.type
    s = fd.scalars
    if t == DT.FloatVector:
        dim = fd.vectors.dim or 1
        flat = _f32(fd.vectors.float_vector.data)
        values: list[Any] = [flat[i : i + dim] for i in range(0, len(flat), dim)]
    elif t == DT.Bool:
        values = list(s.bool_data.data)
    elif t in (DT.Int8, DT.Int16, DT.Int32):
        values = list(s.int_data.data)
    elif t == DT.Int64:
        values = [v if int64_as_number else str(v) for v in s.long_data.data]
    elif t == DT.Float:
        values = _f32(s.float_data.data)
    elif t == DT.Double:
        values = list(s.double_data.data)
    elif t in (DT.VarChar, DT.String, DT.Timestamptz):  # instants: text in the read's zone
        values = list(s.string_data.data)
    elif t == DT.Geometry:
        values = list(s.geometry_wkt_data.data)
    elif t == DT.Array:
        member = typed_fields.ARRAY_ELEMENTS[s.array_data.element_type]
        float_elements = s.array_data.element_type == DT.Float
        values = [
            _f32(getattr(r, member).data) if float_elements else list(getattr(r, member).data)
            for r in s.array_data.data
        ]
    elif t in rest_vectors.TYPES:
        values = rest_vectors.render_column(fd)
    elif t == DT.JSON:
        raw = s.json_data.data
        values = [json.loads(v) for v in raw] if fd.is_dynamic else [v.decode() for v in raw]
    else:
        raise MilvusError(
            Code.INVALID_SEARCH_RESULT,
            f"fail to parse search result, error: field {fd.field_name} of type "
            f"{DT.Name(t)} cannot be rendered as JSON yet",
        )
    if fd.valid_data and (t == DT.FloatVector or t in rest_vectors.TYPES):
        given = iter(values)  # a nullable vector column holds the valid rows' vectors only
        values = [next(given) if ok else None for ok in fd.valid_data]
    elif fd.valid_data:
        values = [v if ok else None for v, ok in zip(values, fd.valid_data, strict=False)]
    return values


def rows(
    fields_data: Sequence[schema_pb2.FieldData],
    output_fields: Sequence[str],
    ids: schema_pb2.IDs | None = None,
    scores: Sequence[float] | None = None,
    int64_as_number: bool = True,
) -> list[dict[str, Any]]:
    """Result columns as rows. Dynamic keys asked for by name (or all of them, when the
    dynamic field itself was asked for) are spread into the row; search hits also carry
    ``id`` and ``distance``, as Milvus's REST server writes them."""
    static = {fd.field_name for fd in fields_data if not fd.is_dynamic}
    wanted = [name for name in output_fields if name not in static]
    cols = [(fd, _column_values(fd, int64_as_number)) for fd in fields_data]
    keys = _id_values(ids, int64_as_number) if ids is not None else None
    n = len(keys) if keys is not None else (len(cols[0][1]) if cols else 0)
    out = []
    for i in range(n):
        row: dict[str, Any] = {}
        for fd, values in cols:
            if not fd.is_dynamic:
                row[fd.field_name] = values[i]
            elif fd.field_name in wanted or "*" in output_fields:
                row.update(values[i] or {})
            else:
                row.update({k: values[i][k] for k in wanted if k in (values[i] or {})})
        if keys is not None:
            row["id"] = keys[i]
        if scores is not None:
            row["distance"] = scores[i]
        out.append(row)
    return out


def _id_values(ids: schema_pb2.IDs, int64_as_number: bool) -> list[Any]:
    if ids.WhichOneof("id_field") == "str_id":
        return list(ids.str_id.data)
    return [v if int64_as_number else str(v) for v in ids.int_id.data]


def distances(scores: Sequence[float]) -> list[float]:
    return _f32(scores)
