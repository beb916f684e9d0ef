"""Which index types and metrics a vector field's type allows, as CreateIndex checks them
(``services/common/vector_types.py`` holds the table)."""

from __future__ import annotations

from typing import Any

from services.common import errors, vector_types
from services.common.schema import FieldSchema


def index_kind(field: FieldSchema, params: dict[str, Any]) -> tuple[str, str]:
    """(index type, metric) of an index on ``field``, taken out of ``params``; a type or
    metric the field's vector type cannot have is refused, naming both."""
    name, kind = field.data_type.name, vector_types.kind_of(field.data_type)
    index_type = str(params.pop("index_type", "AUTOINDEX") or "AUTOINDEX").upper()
    automatic = index_type == "AUTOINDEX" and field.data_type in vector_types.FLOAT_TYPES
    default = "COSINE" if automatic else kind.default_metric
    metric = str(params.pop("metric_type", default) or default).upper()
    if index_type not in kind.indexes:
        raise errors.invalid(
            f"invalid index type: {index_type} for {name} field {field.name} "
            f"(supported: {', '.join(sorted(kind.indexes))})"
        )
    if metric == "BM25":
        raise errors.invalid("metric type BM25 is not supported by Vectide (full-text search)")
    if metric not in kind.metrics:
        allowed = ", ".join(sorted(kind.metrics))
        raise errors.invalid(f"metric type {metric} not supported for {name} ({allowed})")
    return index_type, metric
