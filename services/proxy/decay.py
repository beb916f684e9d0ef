"""Decay rankers (Milvus 2.6's ``FunctionType.RERANK`` with ``reranker: decay``): a search's
hits reranked by how far a numeric field's value lies from an ideal point.

Each hit's relevance is normalised as Milvus's decay ranker documents it (distances, L2,
HAMMING and JACCARD, become ``1 - 2 * atan(d) / pi``; IP, COSINE and BM25 scores are taken as
they are), multiplied by the decay of its field value ``x``, with ``d = max(0, |x - origin| -
offset)``:

- ``gauss``: ``decay ** ((d / scale) ** 2)``;
- ``exp``: ``decay ** (d / scale)``;
- ``linear``: ``max(0, 1 - (1 - decay) * d / scale)``;

and the hits are ordered by that product, larger first. The candidates are the search's best
``(offset + limit) x CANDIDATES`` hits by similarity (capped at Milvus's topk bound), so
that a hit slightly less similar but at the ideal point can rise into the page, as
milvus-lite does. Pure: numpy in, hits out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from vectide.services.common import errors
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.results import SearchHits, relevance, take
from vectide.services.common.schema import CollectionSchema

FUNCTIONS = ("exp", "gauss", "linear")
NUMERIC = frozenset(
    {DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64, DataType.FLOAT, DataType.DOUBLE}
)
#: candidates per hit asked for
CANDIDATES = 10
#: Milvus's bound on a search's topk
MAX_TOPK = 16384
#: Milvus's bounds on ``decay`` for numerical stability
_DECAY_BOUNDS = (0.001, 0.999)


@dataclass(frozen=True)
class Decay:
    field: str
    function: str
    origin: float
    scale: float
    offset: float = 0.0
    decay: float = 0.5

    def factors(self, values: np.ndarray) -> np.ndarray:
        distance = np.maximum(0.0, np.abs(values.astype(np.float64) - self.origin) - self.offset)
        if self.function == "gauss":
            return np.power(self.decay, (distance / self.scale) ** 2)
        if self.function == "exp":
            return np.power(self.decay, distance / self.scale)
        return np.maximum(0.0, 1.0 - (1.0 - self.decay) * distance / self.scale)


def decay_of(function_score: Any, schema: CollectionSchema) -> Decay:
    """The decay ranker a request's ``function_score`` describes, checked as Milvus checks
    it; other rerankers are refused by name."""
    functions = list(function_score.functions)
    if len(functions) != 1:
        raise errors.invalid("a search takes one rerank function")
    fn = functions[0]
    params = {kv.key: kv.value for kv in fn.params}
    kind = params.pop("reranker", "")
    if kind != "decay":
        raise errors.invalid(
            f"reranker {kind!r} is not supported: decay rankers are (RRF and weighted "
            "rankers through hybrid_search)"
        )
    if len(fn.input_field_names) != 1:
        raise errors.invalid("a decay ranker takes exactly one input field")
    name = fn.input_field_names[0]
    field = schema.field(name)
    if field is None:
        raise errors.invalid(f"input field {name} not found in collection schema")
    if field.nullable:
        raise errors.invalid(f"decay ranker input field {name} must not be nullable")
    if field.data_type not in NUMERIC:
        raise errors.invalid(
            f"decay ranker input field {name} must be numeric (INT8-INT64, FLOAT, DOUBLE), "
            f"not {field.data_type.name}"
        )
    function = params.get("function", "")
    if function not in FUNCTIONS:
        raise errors.invalid(
            f"decay: invalid function {function!r}, must be one of [{', '.join(FUNCTIONS)}]"
        )
    decay = Decay(
        name,
        function,
        _number(params, "origin"),
        _number(params, "scale"),
        _number(params, "offset", 0.0),
        _number(params, "decay", 0.5),
    )
    if decay.scale <= 0:
        raise errors.invalid(f"decay: scale must be > 0, got {decay.scale:g}")
    if decay.offset < 0:
        raise errors.invalid(f"decay: offset must be >= 0, got {decay.offset:g}")
    low, high = _DECAY_BOUNDS
    if not low <= decay.decay <= high:
        raise errors.invalid(f"decay: decay must be between {low} and {high}, got {decay.decay:g}")
    return decay


def _number(params: dict[str, str], key: str, default: float | None = None) -> float:
    if key not in params:
        if default is None:
            raise errors.invalid(f"decay: {key} is required")
        return default
    try:
        value = float(params[key])
    except ValueError:
        raise errors.invalid(f"decay: {key} must be a number, got {params[key]!r}") from None
    if not math.isfinite(value):
        raise errors.invalid(f"decay: {key} must be a finite number, got {params[key]!r}")
    return value


def candidates(limit: int, offset: int) -> int:
    """How many hits per query the search asks for before reranking."""
    return min((offset + limit) * CANDIDATES, MAX_TOPK)


def rerank(hits: SearchHits, decay: Decay, limit: int, offset: int) -> SearchHits:
    """Each query's hits ordered by normalised relevance times decay, then cut to
    ``offset``..``offset + limit``; the scores are those products."""
    values = np.asarray(hits.fields[decay.field], dtype=np.float64)
    final = relevance(np.asarray(hits.scores), hits.metric_type) * decay.factors(values)
    keep: list[np.ndarray] = []
    counts = []
    start = 0
    for count in hits.counts:
        span = np.arange(start, start + count)
        # best first; ties by the original order (the search's own ranking)
        order = span[np.argsort(-final[span], kind="stable")][offset : offset + limit]
        keep.append(order)
        counts.append(len(order))
        start += count
    index = np.concatenate(keep) if keep else np.empty(0, np.int64)
    return replace(
        hits,
        counts=counts,
        pks=take(hits.pks, index),
        scores=final[index].astype(np.float32),
        fields={name: take(column, index) for name, column in hits.fields.items()},
    )
