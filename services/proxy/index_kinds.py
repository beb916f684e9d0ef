"""Which index types and metrics a field allows, as CreateIndex checks them: vector fields
by their vector type (``services/common/vector_types.py`` holds the table), scalar fields by
Milvus's scalar index rules (STL_SORT, TRIE, INVERTED, BITMAP, AUTOINDEX, NGRAM, RTREE on
GEOMETRY fields), JSON fields by its JSON path index rules (``json_path``,
``json_cast_type``)."""

from __future__ import annotations

from typing import Any

from vectide.services.common import errors, vector_types
from vectide.services.common.expr.parser import ExprError, Field, parse, path_text
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.schema import (
    JSON_CAST_TYPE,
    JSON_PATH,
    MAX_GRAM,
    MIN_GRAM,
    FieldSchema,
)


def index_kind(field: FieldSchema, params: dict[str, Any]) -> tuple[str, str]:
    """(index type, metric) of an index on ``field``, taken out of ``params``; a type or
    metric the field's vector type cannot have is refused, naming both."""
    name, kind = field.data_type.name, vector_types.kind_of(field.data_type)
    index_type = str(params.pop("index_type", "AUTOINDEX") or "AUTOINDEX").upper()
    automatic = index_type == "AUTOINDEX" and field.data_type in vector_types.FLOAT_TYPES
    default = "COSINE" if automatic else "BM25" if field.is_function_output else kind.default_metric
    metric = str(params.pop("metric_type", default) or default).upper()
    if index_type not in kind.indexes:
        raise errors.invalid(
            f"invalid index type: {index_type} for {name} field {field.name} "
            f"(supported: {', '.join(sorted(kind.indexes))})"
        )
    if (metric == "BM25") != field.is_function_output:
        raise errors.invalid(
            f"metric type {metric} does not fit field {field.name}: BM25 is the metric of a "
            "BM25 function's output field, and only of it"
        )
    if metric not in kind.metrics:
        allowed = ", ".join(sorted(kind.metrics))
        raise errors.invalid(f"metric type {metric} not supported for {name} ({allowed})")
    return index_type, metric


_INTEGERS = frozenset({DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64})
_NUMBERS = _INTEGERS | {DataType.FLOAT, DataType.DOUBLE}
_SCALARS = _NUMBERS | {DataType.BOOL, DataType.VARCHAR}
#: TIMESTAMPTZ fields are indexed as their microseconds (never as ARRAY elements)
_TIMES = frozenset({DataType.TIMESTAMPTZ})
#: the field types each scalar index type takes (an ARRAY by its elements' type), as
#: Milvus's index checkers (internal/util/indexparamcheck) allow them
_SCALAR_RULES: dict[str, tuple[frozenset[DataType], frozenset[DataType], str]] = {
    "STL_SORT": (_NUMBERS | _TIMES, frozenset(), "numeric and TIMESTAMPTZ fields"),
    "TRIE": (frozenset({DataType.VARCHAR}), frozenset(), "VARCHAR fields"),
    "INVERTED": (
        _SCALARS | _TIMES,
        _SCALARS,
        "bool, numeric, VARCHAR, TIMESTAMPTZ and ARRAY fields",
    ),
    "BITMAP": (
        _INTEGERS | {DataType.BOOL, DataType.VARCHAR},
        _INTEGERS | {DataType.BOOL, DataType.VARCHAR},
        "bool, integer, VARCHAR fields and ARRAYs of them",
    ),
    "AUTOINDEX": (
        _SCALARS | _TIMES,
        _SCALARS,
        "bool, numeric, VARCHAR, TIMESTAMPTZ and ARRAY fields",
    ),
    "NGRAM": (frozenset({DataType.VARCHAR}), frozenset(), "VARCHAR fields"),
    "RTREE": (frozenset({DataType.GEOMETRY}), frozenset(), "GEOMETRY fields"),
}


def scalar_index_type(field: FieldSchema, params: dict[str, Any]) -> str:
    """The index type of a scalar index on ``field``, taken out of ``params`` (none given:
    AUTOINDEX, as Milvus picks one for a scalar field); a type the field cannot have is
    refused, naming the field, its type and the index. A metric type means nothing to a
    scalar index and is dropped, as Milvus does."""
    index_type = str(params.pop("index_type", "AUTOINDEX") or "AUTOINDEX").upper()
    params.pop("metric_type", None)
    type_name = field.data_type.name
    if field.data_type == DataType.JSON:
        _json_path_index(field, index_type, params)
        return "INVERTED" if index_type == "AUTOINDEX" else index_type
    if field.data_type == DataType.GEOMETRY and index_type == "AUTOINDEX":
        return "RTREE"
    rule = _SCALAR_RULES.get(index_type)
    if rule is None:
        raise errors.invalid(
            f"invalid index type: {index_type} for {type_name} field {field.name} "
            f"(supported: {', '.join(sorted(_SCALAR_RULES))})"
        )
    types, elements, described = rule
    if field.data_type == DataType.ARRAY:
        element = DataType(field.element_type) if field.element_type else None
        if element not in elements:
            element_name = element.name if element else "unknown"
            raise errors.invalid(
                f"{index_type} index is not supported on ARRAY of {element_name} field "
                f"{field.name}: {index_type} takes {described}"
            )
    elif field.data_type not in types:
        raise errors.invalid(
            f"{index_type} index is not supported on {type_name} field {field.name}: "
            f"{index_type} takes {described}"
        )
    if index_type == "BITMAP" and field.is_primary:
        raise errors.invalid(f"BITMAP index is not supported on primary key field {field.name}")
    if index_type == "NGRAM":
        _ngram_sizes(params)
    return index_type


def _ngram_sizes(params: dict[str, Any]) -> None:
    """NGRAM's ``min_gram`` and ``max_gram``, checked as Milvus's NGRAM checker does and
    kept as integers' text."""
    if MIN_GRAM not in params or MAX_GRAM not in params:
        raise errors.invalid("Ngram index must specify both min_gram and max_gram")
    sizes = []
    for key in (MIN_GRAM, MAX_GRAM):
        try:
            sizes.append(int(str(params[key])))
        except ValueError:
            raise errors.invalid(
                f"{key} for Ngram index must be an integer, got: {params[key]}"
            ) from None
    low, high = sizes
    if low <= 0 or low > high:
        raise errors.invalid(
            f"invalid min_gram or max_gram value for Ngram index, min_gram: {low}, max_gram: {high}"
        )
    params[MIN_GRAM], params[MAX_GRAM] = str(low), str(high)


#: JSON path index cast types Vectide builds (``scalar_index.JSON_CAST_KINDS``); Milvus's
#: ``JSON`` cast and ``json_cast_function`` are refused by name
_JSON_CASTS = ("BOOL", "DOUBLE", "VARCHAR", "ARRAY_BOOL", "ARRAY_DOUBLE", "ARRAY_VARCHAR")


def _json_path_index(field: FieldSchema, index_type: str, params: dict[str, Any]) -> None:
    """Check a JSON path index's params as Milvus's INVERTED and BITMAP checkers do, and
    write its path in canonical form (what filters find it by: ``parser.path_text``)."""
    if index_type not in ("INVERTED", "BITMAP", "AUTOINDEX", "NGRAM"):
        raise errors.invalid(
            f"{index_type} index is not supported on JSON field {field.name}: a JSON path "
            "index is INVERTED, BITMAP, AUTOINDEX or NGRAM"
        )
    if index_type == "NGRAM":
        cast = str(params.get(JSON_CAST_TYPE, "")).strip().upper()
        if not cast:
            raise errors.invalid("JSON field with ngram index must specify json_cast_type")
        if cast != "VARCHAR":
            raise errors.invalid(
                f"JSON field with ngram index only supports VARCHAR cast type, got: {cast}"
            )
        _ngram_sizes(params)
    if JSON_CAST_TYPE not in params:
        raise errors.invalid(
            "json index must specify cast type: missing parameter[missing_param=json_cast_type]"
        )
    cast = str(params[JSON_CAST_TYPE]).upper()
    if cast == "JSON" or "json_cast_function" in params:
        what = "json_cast_type JSON" if cast == "JSON" else "json_cast_function"
        raise errors.invalid(f"{what} is not supported by Vectide (offered casts: {_JSON_CASTS})")
    if cast not in _JSON_CASTS:
        raise errors.invalid(f"json_cast_type {cast} is not supported")
    if index_type == "BITMAP" and cast not in ("BOOL", "VARCHAR"):
        raise errors.invalid(f"json_cast_type {cast} is not supported for BITMAP index")
    written = str(params.get(JSON_PATH) or field.name)
    try:
        node = parse(written)
    except ExprError as exc:
        raise errors.invalid(f"json_path {written!r} is not a path: {exc}") from None
    if not isinstance(node, Field) or node.name != field.name:
        raise errors.invalid(f"json_path {written!r} is not a path of JSON field {field.name}")
    params[JSON_PATH], params[JSON_CAST_TYPE] = path_text(node.name, node.path), cast
