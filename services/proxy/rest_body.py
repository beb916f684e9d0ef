"""Reading a RESTful v2 request body: typed fields with Milvus's REST error codes, and the
parts of a body that become protobuf request fields (schema, consistency, expression
template values, primary-key filters).

Pure functions over parsed JSON; the handlers in ``rest_api.py`` build the same protobuf
requests a gRPC client would send from what these return.
"""

from __future__ import annotations

import json
from typing import Any

from pymilvus.grpc_gen import common_pb2, schema_pb2

from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.schema import ConsistencyLevel
from vectide.services.proxy.default_values import MEMBER_OF

_MISSING = object()

#: the JSON type a body field must have, named as a client would read it
_KINDS: dict[type, str] = {
    str: "string",
    int: "integer",
    bool: "boolean",
    list: "array",
    dict: "object",
    float: "number",
}


def missing(message: str) -> MilvusError:
    """Milvus's 1802 (a required body field is absent)."""
    return MilvusError(
        Code.MISSING_REQUIRED_PARAMETERS, f"missing required parameters, error: {message}"
    )


def bad_format(message: str) -> MilvusError:
    """Milvus's 1801 (the body, or one of its fields, has the wrong shape)."""
    return MilvusError(
        Code.INCORRECT_PARAMETER_FORMAT, f"can only accept json format request, error: {message}"
    )


def parse_body(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object; anything else is Milvus's 1801."""
    if not raw.strip():
        raise bad_format("the request body should be nil, however {} is valid")
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise bad_format(f"invalid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise bad_format("the request body must be a JSON object")
    return body


def get(body: dict[str, Any], key: str, kind: type, default: Any = _MISSING) -> Any:
    """``body[key]`` checked against ``kind``; absent (or null) gives ``default``, or 1802
    when there is none. An int is accepted where a float is asked for, never a bool for a
    number (JSON ``true`` is not ``1``)."""
    value = body.get(key)
    if value is None:
        if default is _MISSING:
            raise missing(f"{key} is required")
        return default
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok, value = True, float(value)
    if not ok:
        raise bad_format(f"{key} must be a {_KINDS.get(kind, kind.__name__)}")
    return value


def name_list(body: dict[str, Any], key: str, default: Any = _MISSING) -> list[str]:
    """A list of names (``partitionNames``, ``outputFields``)."""
    values = get(body, key, list, default)
    if values is None:
        return values
    if not all(isinstance(v, str) for v in values):
        raise bad_format(f"{key} must be an array of strings")
    return values


def text(value: Any) -> str:
    """A property or type-param value as Milvus stores it (``fmt.Sprintf("%v")``): strings
    as they are, anything else as JSON (``true``, ``128``)."""
    return value if isinstance(value, str) else json.dumps(value)


def key_values(values: dict[str, Any]) -> list[common_pb2.KeyValuePair]:
    return [common_pb2.KeyValuePair(key=k, value=text(v)) for k, v in values.items()]


# -- consistency, expression templates, primary keys ------------------------------------------


_LEVELS = frozenset(common_pb2.ConsistencyLevel.keys())
_DATA_TYPES = frozenset(schema_pb2.DataType.keys())


def level_value(name: Any) -> int:
    """A consistency level by its Milvus name (``Strong`` .. ``Customized``)."""
    if not isinstance(name, str) or name not in _LEVELS:
        raise MilvusError(
            Code.PARAMETER_INVALID,
            f"consistencyLevel can only be [Strong, Session, Bounded, Eventually, Customized], "
            f"got {name!r}",
        )
    return common_pb2.ConsistencyLevel.Value(name)


def consistency(body: dict[str, Any]) -> tuple[int, bool]:
    """(level, use_default_consistency) from ``consistencyLevel``: absent means the
    collection's own level decides, as with pymilvus."""
    name = get(body, "consistencyLevel", str, "")
    if not name:
        return int(ConsistencyLevel.BOUNDED), True
    return level_value(name), False


def template_values(body: dict[str, Any]) -> dict[str, schema_pb2.TemplateValue]:
    """``exprParams`` as the TemplateValues pymilvus sends for ``expr_params``."""
    params = get(body, "exprParams", dict, {})
    return {name: _template_value(name, value) for name, value in params.items()}


def _template_value(name: str, value: Any) -> schema_pb2.TemplateValue:
    if isinstance(value, bool):
        return schema_pb2.TemplateValue(bool_val=value)
    if isinstance(value, int):
        return schema_pb2.TemplateValue(int64_val=value)
    if isinstance(value, float):
        return schema_pb2.TemplateValue(float_val=value)
    if isinstance(value, str):
        return schema_pb2.TemplateValue(string_val=value)
    if isinstance(value, list):
        return schema_pb2.TemplateValue(array_val=_template_array(value))
    raise bad_format(f"exprParams.{name}: unsupported value {value!r}")


def _template_array(values: list[Any]) -> schema_pb2.TemplateArrayValue:
    kinds = {type(v) for v in values}
    if kinds == {bool}:
        return schema_pb2.TemplateArrayValue(bool_data=schema_pb2.BoolArray(data=values))
    if kinds == {int}:
        return schema_pb2.TemplateArrayValue(long_data=schema_pb2.LongArray(data=values))
    if kinds <= {int, float} and kinds:
        return schema_pb2.TemplateArrayValue(double_data=schema_pb2.DoubleArray(data=values))
    if kinds == {str}:
        return schema_pb2.TemplateArrayValue(string_data=schema_pb2.StringArray(data=values))
    if kinds == {list}:
        nested = [_template_array(v) for v in values]
        return schema_pb2.TemplateArrayValue(
            array_data=schema_pb2.TemplateArrayValueArray(data=nested)
        )
    data = [json.dumps(v).encode() for v in values]
    return schema_pb2.TemplateArrayValue(json_data=schema_pb2.JSONArray(data=data))


def pk_filter(body: dict[str, Any], schema: schema_pb2.CollectionSchema) -> str:
    """``id`` (one key or a list) as the filter ``pk in [...]`` (entities/get and delete by
    ids); a key of the wrong type is Milvus's 1806."""
    ids = body.get("id")
    if ids is None:
        raise missing("id is required")
    ids = ids if isinstance(ids, list) else [ids]
    pk = next(f for f in schema.fields if f.is_primary_key)
    is_str = pk.data_type == schema_pb2.DataType.VarChar
    for key in ids:
        if isinstance(key, bool) or not isinstance(key, str if is_str else int):
            raise MilvusError(
                Code.CHECK_PRIMARY_KEY,
                "please check the primary key and its' type can only in [int, string], "
                f"error: {pk.name} is {'VarChar' if is_str else 'Int64'}, got {key!r}",
            )
    return f"{pk.name} in {json.dumps(ids)}"


# -- schema --------------------------------------------------------------------------------


def data_type(name: Any, what: str) -> int:
    """A DataType by its Milvus name (``Int64``, ``FloatVector``; case-sensitive, as Milvus)."""
    if not isinstance(name, str) or name not in _DATA_TYPES:
        raise MilvusError(
            Code.PARAMETER_INVALID, f"{what}: data type {name} is invalid(case sensitive)."
        )
    return schema_pb2.DataType.Value(name)


def quick_schema(body: dict[str, Any], name: str) -> schema_pb2.CollectionSchema:
    """The quick-setup schema: a primary key ``id`` and a FloatVector ``vector`` of
    ``dimension`` (names, key type and autoID as the body says), dynamic fields on."""
    dim = get(body, "dimension", int, 0)
    if dim <= 0:
        raise MilvusError(
            Code.PARAMETER_INVALID,
            "dimension is required for quickly create collection(default metric type: COSINE)",
        )
    params = get(body, "params", dict, {})
    id_type = get(body, "idType", str, "Int64")
    if id_type not in ("Int64", "int64", "VarChar", "Varchar"):
        raise MilvusError(
            Code.PARAMETER_INVALID, f"idType can only be [Int64, VarChar], got {id_type!r}"
        )
    pk = schema_pb2.FieldSchema(
        name=get(body, "primaryFieldName", str, "id"),
        is_primary_key=True,
        data_type=schema_pb2.DataType.Int64,
        autoID=get(body, "autoID", bool, False),
    )
    if id_type.lower() == "varchar":
        pk.data_type = schema_pb2.DataType.VarChar
        pk.type_params.add(key="max_length", value=text(params.get("max_length", "")))
    vector = schema_pb2.FieldSchema(
        name=get(body, "vectorFieldName", str, "vector"),
        data_type=schema_pb2.DataType.FloatVector,
    )
    vector.type_params.add(key="dim", value=str(dim))
    dynamic = params.get("enableDynamicField", True)
    if not isinstance(dynamic, bool):
        dynamic = str(dynamic).lower() == "true"
    return schema_pb2.CollectionSchema(
        name=name,
        fields=[pk, vector],
        enable_dynamic_field=dynamic,
        description=get(body, "description", str, ""),
    )


def full_schema(body: dict[str, Any], name: str) -> schema_pb2.CollectionSchema:
    """``schema`` (fields with Milvus type names and ``elementTypeParams``) as a proto."""
    spec = get(body, "schema", dict)
    auto_id = get(spec, "autoID", bool, False)
    proto = schema_pb2.CollectionSchema(
        name=name,
        enable_dynamic_field=get(spec, "enableDynamicField", bool, False),
        description=get(body, "description", str, ""),
    )
    for i, raw in enumerate(get(spec, "fields", list)):
        if not isinstance(raw, dict):
            raise bad_format(f"schema.fields[{i}] must be an object")
        proto.fields.append(field_schema(raw, auto_id))
    for i, raw in enumerate(get(spec, "functions", list, [])):
        if not isinstance(raw, dict):
            raise bad_format(f"schema.functions[{i}] must be an object")
        proto.functions.append(function_schema(raw))
    return proto


_FUNCTION_TYPES = {name.upper(): name for name, _ in schema_pb2.FunctionType.items()}


def function_schema(raw: dict[str, Any]) -> schema_pb2.FunctionSchema:
    """One of ``schema.functions``: ``type`` ``BM25`` (or ``FunctionType.BM25``), its
    ``inputFieldNames`` and ``outputFieldNames``; the output fields become function outputs
    when the schema is checked."""
    given = get(raw, "type", str)
    kind = _FUNCTION_TYPES.get(given.removeprefix("FunctionType.").upper())
    if kind is None:
        raise MilvusError(Code.PARAMETER_INVALID, f"unknown function type {given!r}")
    return schema_pb2.FunctionSchema(
        name=get(raw, "name", str),
        description=get(raw, "description", str, ""),
        type=schema_pb2.FunctionType.Value(kind),
        input_field_names=[str(n) for n in get(raw, "inputFieldNames", list)],
        output_field_names=[str(n) for n in get(raw, "outputFieldNames", list)],
        params=key_values(get(raw, "params", dict, {})),
    )


def field_schema(raw: dict[str, Any], auto_id: bool) -> schema_pb2.FieldSchema:
    """One field as ``schema.fields`` writes it (Milvus type names, ``elementTypeParams``)."""
    name = get(raw, "fieldName", str)
    field = schema_pb2.FieldSchema(
        name=name,
        data_type=data_type(raw.get("dataType"), f"field {name}"),
        is_primary_key=get(raw, "isPrimary", bool, False),
        is_partition_key=get(raw, "isPartitionKey", bool, False),
        is_clustering_key=get(raw, "isClusteringKey", bool, False),
        nullable=get(raw, "nullable", bool, False),
        description=get(raw, "description", str, ""),
    )
    field.autoID = field.is_primary_key and auto_id
    if raw.get("elementDataType"):
        field.element_type = data_type(raw["elementDataType"], f"field {name} element")
    for key, value in get(raw, "elementTypeParams", dict, {}).items():
        field.type_params.add(key=key, value=text(value))
    if raw.get("defaultValue") is not None:
        _set_default(field, raw["defaultValue"])
    return field


def _set_default(field: schema_pb2.FieldSchema, value: Any) -> None:
    """``defaultValue`` in the member of ``ValueField`` the field's type uses, as pymilvus
    sets it; the schema rules then check it as for a gRPC client."""
    member = MEMBER_OF.get(field.data_type)  # DataType is an IntEnum: proto ints find it
    if member is None:
        raise MilvusError(
            Code.PARAMETER_INVALID,
            f"field {field.name}: {schema_pb2.DataType.Name(field.data_type)} fields cannot "
            "have a default value",
        )
    try:
        setattr(field.default_value, member, value)
    except (TypeError, ValueError) as exc:
        raise MilvusError(
            Code.PARAMETER_INVALID, f"field {field.name}: bad defaultValue {value!r}: {exc}"
        ) from exc


def index_extra_params(spec: dict[str, Any]) -> list[common_pb2.KeyValuePair]:
    """One ``indexParams`` entry as CreateIndex's extra params (index_type, metric_type and
    the JSON ``params``), as pymilvus sends them."""
    params = get(spec, "params", dict, {})
    index_type = get(spec, "indexType", str, "") or params.get("index_type", "")
    out = []
    if index_type:
        out.append(common_pb2.KeyValuePair(key="index_type", value=text(index_type)))
    metric = get(spec, "metricType", str, "") or params.get("metric_type", "")
    if metric:
        out.append(common_pb2.KeyValuePair(key="metric_type", value=text(metric)))
    rest = {k: v for k, v in params.items() if k not in ("index_type", "metric_type")}
    if rest:
        out.append(common_pb2.KeyValuePair(key="params", value=json.dumps(rest)))
    return out
