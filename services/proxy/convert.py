"""The one place that translates between Milvus's protobuf messages and Vectide's dataclasses.

Bulk data avoids per-element Python work where protobuf allows it: packed float arrays
(vectors, scores) are read and written as raw little-endian bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError
from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

from vectide.services.common import errors, geometry, nullable, timestamp, timestamptz
from vectide.services.common.errors import MilvusError
from vectide.services.common.msgstream.message import (
    DENSE_VECTORS,
    VECTOR_TYPES,
    DataType,
    FieldColumn,
)
from vectide.services.common.results import QueryRows, SearchHits
from vectide.services.common.schema import (
    DYNAMIC_FIELD,
    FIRST_FIELD_ID,
    CollectionInfo,
    CollectionSchema,
    ConsistencyLevel,
    FieldSchema,
)
from vectide.services.proxy import functions, time_zones, typed_fields
from vectide.services.proxy.default_values import default_from_proto, default_to_proto
from vectide.services.proxy.dql import Outputs

SUPPORTED = {t.value for t in DataType}
PK_TYPES = {DataType.INT64, DataType.VARCHAR}


# -- status -------------------------------------------------------------------------------


def ok_status() -> common_pb2.Status:
    return common_pb2.Status(error_code=common_pb2.Success, code=0)


def error_status(exc: BaseException) -> common_pb2.Status:
    if isinstance(exc, MilvusError):
        return common_pb2.Status(
            error_code=exc.legacy_code, code=int(exc.code), reason=exc.message, detail=exc.message
        )
    message = f"{type(exc).__name__}: {exc}"
    return common_pb2.Status(
        error_code=common_pb2.UnexpectedError,
        code=int(errors.Code.SERVICE_INTERNAL),
        reason=message,
        detail=message,
    )


# -- schema ---------------------------------------------------------------------------------


def parse_proto(message_type: Any, raw: bytes, what: str) -> Any:
    """A message embedded as bytes in a request (a schema, a placeholder group): bytes that
    do not parse are the client's error."""
    try:
        return message_type.FromString(raw)
    except DecodeError as exc:
        raise errors.invalid(f"{what} is not a valid {message_type.DESCRIPTOR.name}") from exc


def int_param(value: Any, name: str) -> int:
    """A request parameter that must be an integer (``dim``, ``topk``, ``limit``, ...)."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise errors.invalid(f"{name} must be an integer, got {str(value)[:40]!r}") from None


def json_param(text: str, name: str) -> Any:
    """A request parameter holding JSON (an index's ``params``, a JSON template value)."""
    try:
        return json.loads(text)
    except ValueError:
        raise errors.invalid(f"{name} is not valid JSON: {text[:40]!r}") from None


def schema_from_proto(
    raw: bytes, collection_name: str, zone: str = timestamptz.DEFAULT_TIMEZONE
) -> CollectionSchema:
    """A client's schema; ``zone`` is the collection's time zone (TIMESTAMPTZ defaults)."""
    proto = parse_proto(schema_pb2.CollectionSchema, raw, "schema")
    if proto.name and proto.name != collection_name:
        raise errors.invalid(
            f"schema name {proto.name} differs from collection name {collection_name}"
        )
    fields = [field_from_proto(f, FIRST_FIELD_ID + i, zone) for i, f in enumerate(proto.fields)]
    schema = CollectionSchema(
        name=collection_name,
        fields=fields,
        description=proto.description,
        enable_dynamic_field=proto.enable_dynamic_field,
        functions=[functions.from_proto(f) for f in proto.functions],
    )
    validate_schema(schema)
    functions.validate(schema)
    if schema.enable_dynamic_field:
        schema.fields.append(
            FieldSchema(FIRST_FIELD_ID + len(fields), DYNAMIC_FIELD, DataType.JSON, is_dynamic=True)
        )
    return schema


def field_from_proto(
    f: schema_pb2.FieldSchema, field_id: int, zone: str = timestamptz.DEFAULT_TIMEZONE
) -> FieldSchema:
    """One field of a client's schema; types and features Vectide lacks are refused."""
    if f.data_type not in SUPPORTED:
        raise MilvusError(
            errors.Code.COLLECTION_ILLEGAL_SCHEMA,
            f"field {f.name}: data type {_enum_name(schema_pb2.DataType, f.data_type)} is not "
            "supported by Vectide yet",
        )
    _refuse_unsupported(f)
    params = {kv.key: kv.value for kv in f.type_params}
    return FieldSchema(
        field_id=field_id,
        name=f.name,
        data_type=DataType(f.data_type),
        is_primary=f.is_primary_key,
        auto_id=f.autoID,
        dim=int_param(params.get("dim", 0) or 0, "dim"),
        max_length=int_param(params.get("max_length", 0) or 0, "max_length"),
        element_type=f.element_type if f.data_type == DataType.ARRAY else 0,
        max_capacity=int_param(params.get("max_capacity", 0) or 0, "max_capacity"),
        description=f.description,
        is_partition_key=f.is_partition_key,
        nullable=f.nullable,
        default_value=default_from_proto(f, zone),
        properties=functions.text_params(f.name, DataType(f.data_type), params),
        is_function_output=f.is_function_output,
    )


def added_field(
    raw: bytes, schema: CollectionSchema, zone: str = timestamptz.DEFAULT_TIMEZONE
) -> FieldSchema:
    """AddCollectionField's field, checked as Milvus 2.6 checks it: nullable, not a key, and
    valid in the schema it joins (its id is the rootcoord's to give)."""
    proto = parse_proto(schema_pb2.FieldSchema, raw, "schema")
    field = field_from_proto(proto, 0, zone)

    def bad(message: str) -> MilvusError:
        return MilvusError(errors.Code.COLLECTION_ILLEGAL_SCHEMA, message)

    if not field.nullable:
        raise bad(f"added field must be nullable, please check it, field name = {field.name}")
    if field.is_primary or field.auto_id or field.is_partition_key:
        raise bad(f"field {field.name}: a primary key or partition key cannot be added")
    if field.is_function_output:
        raise bad(f"field {field.name}: a function output field cannot be added")
    if schema.field(field.name) is not None:
        raise bad(f"duplicate field name {field.name} in collection {schema.name}")
    kept = [f for f in schema.fields if not f.is_dynamic]
    validate_schema(CollectionSchema(schema.name, [*kept, field]))
    return field


def _refuse_unsupported(f: schema_pb2.FieldSchema) -> None:
    """Schema features Vectide cannot honour yet are refused, not silently dropped."""
    if f.is_clustering_key:
        raise MilvusError(
            errors.Code.COLLECTION_ILLEGAL_SCHEMA,
            f"field {f.name}: clustering key is not supported by Vectide yet",
        )


def validate_schema(schema: CollectionSchema) -> None:
    def bad(message: str) -> MilvusError:
        return MilvusError(errors.Code.COLLECTION_ILLEGAL_SCHEMA, message)

    names = [f.name for f in schema.fields]
    if len(set(names)) != len(names):
        raise bad("duplicated field name")
    primaries = [f for f in schema.fields if f.is_primary]
    if len(primaries) != 1:
        raise bad("schema must have exactly one primary key field")
    if primaries[0].data_type not in PK_TYPES:
        raise bad("primary key must be Int64 or VarChar")
    if not schema.vector_fields:
        raise bad("schema does not contain vector field")
    keys = [f for f in schema.fields if f.is_partition_key]
    if len(keys) > 1:
        raise bad("there are more than one partition key")
    if keys and (keys[0].is_primary or keys[0].data_type not in PK_TYPES):
        raise bad("the partition key must be an Int64 or VarChar field other than the primary key")
    for f in schema.fields:
        if f.auto_id and not f.is_primary:
            raise bad(f"only the primary key can be auto_id, not {f.name}")
        if f.data_type in DENSE_VECTORS and f.dim < 1:  # the upper bound is quota.max_dim
            raise bad(f"vector field {f.name} needs a dim of 1 or more")
        if f.data_type == DataType.BINARY_VECTOR and f.dim % 8:
            raise bad(f"binary vector field {f.name}: dim {f.dim} is not a multiple of 8")
        if f.data_type == DataType.ARRAY and (problem := typed_fields.check_array_field(f)):
            raise bad(problem)
        if f.data_type == DataType.VARCHAR and not 1 <= f.max_length <= 65535:
            raise bad(f"varchar field {f.name} needs max_length in [1, 65535]")
        if f.name == DYNAMIC_FIELD or not f.name:
            raise bad(f"invalid field name {f.name!r}")
        nullable.check_field(f)


def schema_to_proto(
    schema: CollectionSchema, zone: str = timestamptz.DEFAULT_TIMEZONE
) -> schema_pb2.CollectionSchema:
    proto = schema_pb2.CollectionSchema(
        name=schema.name,
        description=schema.description,
        enable_dynamic_field=schema.enable_dynamic_field,
    )
    for f in schema.fields:
        if f.is_dynamic:
            continue  # Milvus hides $meta from clients: pymilvus would demand it as input
        field = proto.fields.add(
            fieldID=f.field_id,
            name=f.name,
            is_primary_key=f.is_primary,
            description=f.description,
            data_type=int(f.data_type),
            autoID=f.auto_id,
            is_partition_key=f.is_partition_key,
            nullable=f.nullable,
            is_function_output=f.is_function_output,
        )
        default = default_to_proto(f, zone)
        if default is not None:
            field.default_value.CopyFrom(default)
        if f.dim:
            field.type_params.add(key="dim", value=str(f.dim))
        if f.max_length:
            field.type_params.add(key="max_length", value=str(f.max_length))
        if f.data_type == DataType.ARRAY:
            field.element_type = f.element_type
            field.type_params.add(key="max_capacity", value=str(f.max_capacity))
        for key, value in f.properties.items():
            field.type_params.add(key=key, value=value)
    proto.functions.extend(functions.to_proto(fn, schema) for fn in schema.functions)
    return proto


def describe_response(
    info: CollectionInfo, aliases: Sequence[str] = ()
) -> milvus_pb2.DescribeCollectionResponse:
    return milvus_pb2.DescribeCollectionResponse(
        status=ok_status(),
        schema=schema_to_proto(info.schema, time_zones.collection_zone(info)),
        collectionID=info.collection_id,
        virtual_channel_names=info.vchannels,
        physical_channel_names=info.pchannels,
        created_timestamp=info.create_ts,
        created_utc_timestamp=timestamp.physical_ms(info.create_ts),
        update_timestamp=info.update_ts or info.create_ts,
        shards_num=info.shards_num,
        consistency_level=int(info.consistency_level),
        collection_name=info.name,
        properties=[common_pb2.KeyValuePair(key=k, value=v) for k, v in info.properties.items()],
        db_name=info.db_name,
        num_partitions=len(info.partitions),
        aliases=list(aliases),
    )


# -- insert data -----------------------------------------------------------------------------


def columns_from_fields_data(
    schema: CollectionSchema,
    fields_data: Iterable[schema_pb2.FieldData],
    num_rows: int,
    zone: str = timestamptz.DEFAULT_TIMEZONE,
) -> dict[str, FieldColumn]:
    """Each client column as a FieldColumn of the schema's type; validated for shape. The
    row count is the request's word: at least one column must bear it out, or a request of
    no data and 2**32 rows would have the proxy allocate keys and fill defaults for all.
    Naive TIMESTAMPTZ text is in ``zone`` (the collection's)."""
    fields_data = list(fields_data)
    if num_rows > 0 and not fields_data:
        raise errors.invalid(f"no field data for the request's {num_rows} rows")
    out: dict[str, FieldColumn] = {}
    for fd in fields_data:
        name = DYNAMIC_FIELD if fd.is_dynamic else fd.field_name
        field = schema.field(name)
        if field is None:
            raise errors.invalid(f"field {fd.field_name} not exist in collection {schema.name}")
        if fd.type and fd.type != field.data_type:
            raise errors.invalid(
                f"field {name}: expected {field.data_type.name}, got "
                f"{_enum_name(schema_pb2.DataType, fd.type)}"
            )
        data, valid = _with_validity(fd, field, _field_values(fd, field, zone), num_rows)
        column = FieldColumn(field.field_id, name, field.data_type, data, field.dim, valid)
        out[name] = nullable.settle(field, column)
    return out


def _with_validity(
    fd: schema_pb2.FieldData, field: FieldSchema, data: Any, num_rows: int
) -> tuple[Any, np.ndarray | None]:
    """Values one per row, and the validity mask when the client sent ``valid_data``:
    pymilvus sends only the valid rows' values; a full-length column is accepted too."""
    if not len(fd.valid_data):
        if len(data) != num_rows:
            raise errors.invalid(f"field {field.name}: {len(data)} values for {num_rows} rows")
        return data, None
    valid = np.fromiter(fd.valid_data, dtype=bool, count=len(fd.valid_data))
    if len(valid) != num_rows:
        raise errors.invalid(f"field {field.name}: {len(valid)} valid_data for {num_rows} rows")
    if len(data) == num_rows:
        return data, valid
    if len(data) != int(valid.sum()):
        raise errors.invalid(
            f"field {field.name}: {len(data)} values for {int(valid.sum())} non-null rows"
        )
    return nullable.spread(data, valid, field.data_type), valid


def _field_values(
    fd: schema_pb2.FieldData, field: FieldSchema, zone: str
) -> np.ndarray | list[str] | list[bytes]:
    t = field.data_type
    if t in VECTOR_TYPES:
        return typed_fields.vectors(fd, field)
    if t == DataType.ARRAY:
        return typed_fields.array_values(fd, field)
    s = fd.scalars
    if t == DataType.BOOL:
        return np.array(s.bool_data.data, dtype=bool)
    if t in (DataType.INT8, DataType.INT16, DataType.INT32):
        values = np.array(s.int_data.data, dtype=np.int64)
        info = np.iinfo({DataType.INT8: np.int8, DataType.INT16: np.int16}.get(t, np.int32))
        if len(values) and (values.min() < info.min or values.max() > info.max):
            raise errors.invalid(f"field {field.name}: value out of range for {t.name}")
        return values
    if t == DataType.INT64:
        return np.array(s.long_data.data, dtype=np.int64)
    if t == DataType.FLOAT:
        return np.array(s.float_data.data, dtype=np.float32)
    if t == DataType.DOUBLE:
        return np.array(s.double_data.data, dtype=np.float64)
    if t == DataType.VARCHAR:
        values = list(s.string_data.data)
        too_long = next((v for v in values if len(v) > field.max_length), None)
        if too_long is not None:
            raise errors.invalid(
                f"field {field.name}: string length {len(too_long)} exceeds max_length "
                f"{field.max_length}"
            )
        return values
    if t == DataType.GEOMETRY:
        return _geometry_texts(s, field)
    if t == DataType.TIMESTAMPTZ:
        return _instants(s, field, zone)
    if t == DataType.JSON:
        texts = []
        for raw in s.json_data.data:
            try:  # not UTF-8 is a ValueError too (UnicodeDecodeError)
                texts.append(raw.decode())
                json.loads(texts[-1])
            except ValueError as exc:
                raise errors.invalid(f"field {field.name}: invalid JSON {raw[:40]!r}") from exc
        return texts
    raise errors.invalid(f"field {field.name}: unsupported type {t.name}")


def _instants(s: schema_pb2.ScalarField, field: FieldSchema, zone: str) -> np.ndarray:
    """TIMESTAMPTZ rows as microseconds: pymilvus sends ISO text (``string_data``), naive
    text in the collection's zone; microseconds (``timestamptz_data``) are taken as they are."""
    if s.HasField("timestamptz_data"):
        return np.array(s.timestamptz_data.data, dtype=np.int64)
    try:
        return timestamptz.parse_column(s.string_data.data, zone)
    except timestamptz.TimestamptzError as exc:
        raise errors.invalid(f"field {field.name}: {exc}") from None


def _geometry_texts(s: schema_pb2.ScalarField, field: FieldSchema) -> list[str]:
    """GEOMETRY rows as WKT (pymilvus sends ``geometry_wkt_data``; WKB in ``geometry_data``
    is read too), normalized as they are stored; the first that is no geometry refuses the
    insert."""
    try:
        if s.HasField("geometry_data"):
            return geometry.wkt_of_wkb(list(s.geometry_data.data))
        return geometry.normalized(list(s.geometry_wkt_data.data))
    except geometry.GeometryError as exc:
        raise errors.invalid(f"field {field.name}: {exc}") from None


# -- results ---------------------------------------------------------------------------------


def field_data(field: FieldSchema, values: Any) -> schema_pb2.FieldData:
    fd = schema_pb2.FieldData()
    fill_field_data(fd, field, values)
    return fd


def fill_field_data(fd: schema_pb2.FieldData, field: FieldSchema, values: Any) -> None:
    """Fill an empty ``fd`` (e.g. a reply's ``fields_data.add()``, no copy) with a column."""
    fd.type = int(field.data_type)
    fd.field_name = field.name
    fd.field_id = field.field_id
    fd.is_dynamic = field.is_dynamic
    if field.nullable:
        values = _valid_data(fd, field, values)
    t = field.data_type
    if t in VECTOR_TYPES:
        typed_fields.vectors_to_proto(fd, field, values)
    elif t == DataType.ARRAY:
        typed_fields.array_to_proto(fd, field, values)
    elif t == DataType.BOOL:
        fd.scalars.bool_data.data.extend(np.asarray(values, dtype=bool).tolist())
    elif t in (DataType.INT8, DataType.INT16, DataType.INT32):
        fd.scalars.int_data.data.extend(np.asarray(values).tolist())
    elif t == DataType.INT64:
        fd.scalars.long_data.data.extend(np.asarray(values).tolist())
    elif t == DataType.FLOAT:
        fd.scalars.float_data.data.extend(np.asarray(values).tolist())
    elif t == DataType.DOUBLE:
        fd.scalars.double_data.data.extend(np.asarray(values).tolist())
    elif t == DataType.VARCHAR:
        fd.scalars.string_data.data.extend(values)
    elif t == DataType.JSON:
        fd.scalars.json_data.data.extend(v.encode() for v in values)
    elif t == DataType.GEOMETRY:
        fd.scalars.geometry_wkt_data.data.extend(values)
    elif t == DataType.TIMESTAMPTZ:  # as text in the read's zone later (time_zones.render)
        fd.scalars.timestamptz_data.data.extend(np.asarray(values).tolist())


def _valid_data(fd: schema_pb2.FieldData, field: FieldSchema, values: Any) -> Any:
    """A nullable field's column carries ``valid_data`` (pymilvus reads a null as None) and a
    placeholder at each null row, as Milvus returns it; a vector column only the valid rows'
    vectors (Milvus's sparse storage of nullable vectors, which pymilvus expects)."""
    if isinstance(values, np.ndarray):
        fd.valid_data.extend([True] * len(values))
        return values
    fd.valid_data.extend(v is not None for v in values)
    if field.is_vector:
        return [v for v in values if v is not None]
    filler = nullable.placeholder(field.data_type)
    return [filler if v is None else v for v in values]


def ids_proto(pks: np.ndarray | list[str]) -> schema_pb2.IDs:
    if isinstance(pks, np.ndarray):
        return schema_pb2.IDs(int_id=schema_pb2.LongArray(data=pks.tolist()))
    return schema_pb2.IDs(str_id=schema_pb2.StringArray(data=list(pks)))


def search_results(
    info: CollectionInfo,
    hits: SearchHits,
    outputs: Outputs,
    limit: int,
    group_by: str = "",
) -> milvus_pb2.SearchResults:
    """A search reply as Milvus's proxy builds it: the requested columns, then the primary
    key's when it was asked for (the Node SDK reads every listed name from ``fields_data``),
    and a grouping search's ``group_by_field_value``, one value per hit."""
    schema = info.schema
    # filled in place, each column in one call: no message built and then copied into its
    # parent, no Python object per hit beyond ``tolist``'s
    reply = milvus_pb2.SearchResults(collection_name=info.name)
    reply.status.SetInParent()  # OK: every field at its default (ok_status)
    if hits.snapshot_ts:
        reply.session_ts = hits.snapshot_ts
    data = reply.results
    data.num_queries = hits.nq
    data.top_k = limit
    primary = schema.primary
    if isinstance(hits.pks, np.ndarray):  # the key's kind is set even without a hit
        ids = data.ids.int_id
        ids.SetInParent()
        ids.data.extend(hits.pks.tolist())
    else:
        ids = data.ids.str_id
        ids.SetInParent()
        ids.data.extend(hits.pks)
    data.topks.extend(hits.counts)
    data.output_fields.extend(outputs.names)
    data.primary_field_name = primary.name
    data.scores.extend(np.asarray(hits.scores, dtype=np.float32).tolist())
    for name in outputs.fetch:
        fill_field_data(data.fields_data.add(), *_column(schema, name, hits.fields))
    if outputs.pk:
        fill_field_data(data.fields_data.add(), primary, hits.pks)
    if hits.groups is not None and group_by:
        data.group_by_field_value.CopyFrom(field_data(schema.field(group_by), hits.groups))
    time_zones.render(data.fields_data, outputs.zone, outputs.time_fields)
    return reply


def query_results(
    info: CollectionInfo, rows: QueryRows, outputs: Outputs
) -> milvus_pb2.QueryResults:
    """A query reply: the primary key's column first, always (Milvus adds it to every
    retrieve; ``output_fields`` lists it only when asked for), then the requested ones."""
    schema = info.schema
    result = milvus_pb2.QueryResults(
        status=ok_status(),
        collection_name=info.name,
        output_fields=outputs.names,
        primary_field_name=schema.primary.name,
        session_ts=rows.snapshot_ts,
    )
    if rows.count is not None:
        count = schema_pb2.FieldData(type=int(DataType.INT64), field_name="count(*)")
        count.scalars.long_data.data.append(rows.count)
        result.fields_data.append(count)
        return result
    if outputs.aggregated:  # one row per group: no primary key
        result.fields_data.extend(field_data(f, rows.fields[f.name]) for f in outputs.aggregated)
    else:
        result.fields_data.append(field_data(schema.primary, rows.pks))
        result.fields_data.extend(_columns(schema, outputs.fetch, rows.fields))
    time_zones.render(result.fields_data, outputs.zone, outputs.time_fields)
    return result


def _columns(
    schema: CollectionSchema, names: list[str], values: dict[str, Any]
) -> list[schema_pb2.FieldData]:
    """``names``' columns in that order; one the query nodes did not send is an error, not
    a silent gap a client would trip over."""
    return [field_data(*_column(schema, name, values)) for name in names]


def _column(schema: CollectionSchema, name: str, values: dict[str, Any]) -> tuple[FieldSchema, Any]:
    field = schema.field(name)
    if field is None or name not in values:
        raise MilvusError(errors.Code.SERVICE_INTERNAL, f"output field {name} was not fetched")
    return field, values[name]


def read_vectors(
    placeholder_group: bytes, field: FieldSchema, schema: CollectionSchema
) -> np.ndarray | list[bytes]:
    """A search's query vectors for ``field`` (see ``typed_fields.read_queries``); query
    texts for a BM25 function's output, analyzed into sparse rows."""
    group = parse_proto(common_pb2.PlaceholderGroup, placeholder_group, "placeholder_group")
    if field.is_function_output and group.placeholders:
        return functions.queries(schema, field, group)
    return typed_fields.read_queries(group, field)


#: every consistency level by its number (a dict lookup: ``ConsistencyLevel(value)`` goes
#: through the enum's Python machinery on every request)
_LEVELS = {int(level.value): level for level in ConsistencyLevel}


def consistency_level(value: int) -> ConsistencyLevel:
    """A request's consistency level; an unknown value is the client's error."""
    level = _LEVELS.get(value)
    if level is None:
        raise errors.invalid(f"unknown consistency level {value}")
    return level


def _enum_name(enum: Any, value: int) -> str:
    """A protobuf enum value's name, or the number when the client sent an unknown one."""
    try:
        return enum.Name(value)
    except ValueError:
        return str(value)


def kv_pairs(pairs: Iterable[common_pb2.KeyValuePair]) -> dict[str, str]:
    return {kv.key: kv.value for kv in pairs}
