"""pymilvus's expression template values (``expr_params``, Milvus 2.5's filter templating) as
plain Python values for the expression evaluator: ``filter="id in {ids}"`` with
``filter_params={"ids": [1, 2]}`` arrives as typed ``TemplateValue`` messages."""

from __future__ import annotations

from typing import Any

import numpy as np
from pymilvus.grpc_gen import schema_pb2

from vectide.services.proxy import convert


def template_values(values: Any) -> dict[str, Any]:
    """pymilvus's expression template values (``expr_params``) as Python values."""
    if not values:
        return {}
    return {name: _template_value(v) for name, v in values.items()}


def _template_value(v: schema_pb2.TemplateValue) -> Any:
    kind = v.WhichOneof("val")
    if kind == "array_val":
        return _template_array(v.array_val)
    return getattr(v, kind) if kind else None


def _template_array(a: schema_pb2.TemplateArrayValue) -> list[Any]:
    kind = a.WhichOneof("data")
    if kind is None:
        return []
    data = getattr(a, kind).data
    if kind == "array_data":
        return [_template_array(x) for x in data]
    if kind == "json_data":
        return [convert.json_param(x, "a JSON template value") for x in data]
    return list(np.asarray(data).tolist()) if kind != "string_data" else list(data)
