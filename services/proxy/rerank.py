"""Hybrid search's fusion: several searches' hits ranked into one list, as Milvus 2.6 does it
(``internal/util/function/rerank``: ``rrf_function.go``, ``weighted_function.go``, ``util.go``).

- RRF: a hit's score is the sum over the searches that found it of ``1 / (k + rank)``, rank
  counted from 1 in that search's list.
- Weighted: the sum of ``weight_i * f(score_i)``. With ``norm_score`` (pymilvus's default)
  ``f`` maps each metric into [0, 1], larger better: IP ``0.5 + atan(s) / pi``, COSINE
  ``(1 + s) / 2``, L2 ``1 - 2 * atan(d) / pi``. Without it scores are summed raw, except that
  L2 distances are mapped as above when the searches mix metrics (so larger is better).
- Decay (a RERANK function with ``reranker: decay``, ``decay.py``): the best normalised score
  among the searches that found a hit (L2 ``1 - 2 * atan(d) / pi``, similarities as they
  are), times the decay of the hit's numeric field, as Milvus's decay ranker documents.
- Ties order by primary key; ``offset`` then ``limit`` cut the fused list. A grouping hybrid
  search buckets the fused hits (best first) into groups of up to ``group_size``, scores each
  group by its best (``max``), ``sum`` or ``avg`` score, orders groups by that (ties: the
  larger group, then the smaller first key), then applies offset and limit to groups;
  ``strict_group_size`` drops groups left smaller than ``group_size``.

Pure: numpy and lists in, :class:`SearchHits` out. milvus-lite ranks RRF the same way but
normalises weighted scores by min-max per search, which Milvus does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vectide.services.common import errors
from vectide.services.common.results import (
    SIMILARITY_METRICS,
    SearchHits,
    concat,
    normalizer,
    relevance,
    take,
)
from vectide.services.proxy.decay import Decay

RRF = "rrf"
WEIGHTED = "weighted"
#: a decay function (``decay.py``) in place of a ranker: the best normalised score among the
#: searches that found a hit, times its field's decay
DECAY = "decay"
#: Milvus's bounds: RRF's k in (0, 16384), weights in [0, 1]
RRF_K_MAX = 16384
GROUP_SCORERS = ("max", "sum", "avg")


@dataclass(frozen=True)
class Ranker:
    strategy: str = RRF
    k: float = 60.0
    weights: tuple[float, ...] = ()
    norm_score: bool = True
    decay: Decay | None = None


@dataclass(frozen=True)
class Cut:
    """What the fused list keeps: ``limit`` hits (or groups) after ``offset``."""

    limit: int
    offset: int = 0
    round_decimal: int = -1
    group_size: int = 0  # 0: not grouped
    strict_group_size: bool = False
    group_scorer: str = "max"


def ranker_of(strategy: str, params: dict[str, Any], searches: int) -> Ranker:
    """The ranker pymilvus's ``rank_params`` describe, checked as Milvus checks it."""
    name = (strategy or RRF).lower()
    if name == RRF:
        k = _number(params.get("k", 60), "k")
        if not 0 < k < RRF_K_MAX:
            raise errors.invalid(f"The rank params k should be in range (0, {RRF_K_MAX})")
        return Ranker(RRF, k=k)
    if name == WEIGHTED:
        raw = params.get("weights")
        if not isinstance(raw, list) or not raw:
            raise errors.invalid("weights not found")
        weights = tuple(_number(w, "weight") for w in raw)
        if any(not 0 <= w <= 1 for w in weights):
            raise errors.invalid("rank param weight should be in range [0, 1]")
        if len(weights) != searches:
            raise errors.invalid(
                f"the length of weights param mismatch with ann search requests: invalid "
                f"parameter[expected={searches}][actual={len(weights)}]"
            )
        return Ranker(WEIGHTED, weights=weights, norm_score=bool(params.get("norm_score", True)))
    raise errors.invalid(f"unsupported rerank strategy: {strategy} (rrf or weighted)")


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise errors.invalid(f"rank param {name} must be a number, got {value!r}")
    return float(value)


def fused_descending(ranker: Ranker, metrics: list[str]) -> bool:
    """Whether the fused scores are better when larger (only raw, all-L2 weighted sums are
    distances)."""
    if ranker.strategy in (RRF, DECAY) or ranker.norm_score:
        return True
    return any(m in SIMILARITY_METRICS for m in metrics)


def _starts(searches: list[SearchHits]) -> np.ndarray:
    """``[search, query]``: where that query's hits of that search begin, in all searches'
    hits laid end to end."""
    bases = np.cumsum([0] + [len(s.scores) for s in searches])[:-1]
    per_query = [np.concatenate([[0], np.cumsum(s.counts)[:-1]]) for s in searches]
    return np.array(
        [b + offsets for b, offsets in zip(bases, per_query, strict=True)], dtype=np.int64
    ).reshape(len(searches), -1)


def route_scores(ranker: Ranker, searches: list[SearchHits], q: int) -> list[np.ndarray]:
    """Each search's contribution, per hit of query ``q``, to the fused score."""
    metrics = [s.metric_type for s in searches]
    mixed = len({m in SIMILARITY_METRICS for m in metrics}) > 1
    out = []
    for i, hits in enumerate(searches):
        start = int(np.sum(hits.counts[:q]))
        scores = np.asarray(hits.scores[start : start + hits.counts[q]], dtype=np.float64)
        if ranker.strategy == RRF:
            out.append(1.0 / (ranker.k + np.arange(1, len(scores) + 1)))
        elif ranker.strategy == DECAY:
            out.append(relevance(scores, metrics[i]))
        else:
            norm = normalizer(metrics[i], ranker.norm_score, mixed)
            out.append(ranker.weights[i] * norm(scores))
    return out


def fuse(searches: list[SearchHits], ranker: Ranker, cut: Cut) -> SearchHits:
    """The searches' hits (one :class:`SearchHits` per search, same queries and output
    columns) fused into one result; output values come from a hit's first search."""
    descending = fused_descending(ranker, [s.metric_type for s in searches])
    pks = [_key(pk) for pk in concat([s.pks for s in searches])]
    groups = concat([s.groups for s in searches]) if cut.group_size else []
    starts = _starts(searches)
    counts: list[int] = []
    picked: list[int] = []
    scores: list[float] = []
    for q in range(searches[0].nq):
        total: dict[Any, float] = {}
        first: dict[Any, int] = {}  # where each key's hit was met first
        combine = max if ranker.strategy == DECAY else _sum
        for i, contrib in enumerate(route_scores(ranker, searches, q)):
            for position, value in enumerate(contrib.tolist(), int(starts[i, q])):
                known = total.get(pks[position])
                total[pks[position]] = value if known is None else combine(known, value)
                first.setdefault(pks[position], position)
        if ranker.decay is not None:
            _decay(total, first, searches, ranker.decay)
        if cut.group_size:
            keys = _grouped(total, {pk: groups[p] for pk, p in first.items()}, cut)
        else:
            ordered = sorted(total, key=lambda pk: (-total[pk] if descending else total[pk], pk))
            keys = ordered[cut.offset : cut.offset + cut.limit]
        counts.append(len(keys))
        picked += [first[pk] for pk in keys]
        scores += [total[pk] for pk in keys]
    return _hits(searches, descending, counts, np.array(picked, dtype=np.int64), scores, cut)


def _sum(a: float, b: float) -> float:
    return a + b


def _decay(
    total: dict[Any, float], first: dict[Any, int], searches: list[SearchHits], decay: Decay
) -> None:
    """Each key's fused score times its decay factor (its field's value where it was met)."""
    values = np.asarray(concat([s.fields[decay.field] for s in searches]), dtype=np.float64)
    keys = list(total)
    factors = decay.factors(values[[first[k] for k in keys]])
    for key, factor in zip(keys, factors.tolist(), strict=True):
        total[key] *= factor


def _key(pk: Any) -> Any:
    return pk.item() if isinstance(pk, np.generic) else pk


def _grouped(total: dict[Any, float], group_of: dict[Any, Any], cut: Cut) -> list[Any]:
    """Milvus's ``newGroupingIDScores``: the keys of the kept groups, group by group."""
    members: dict[Any, list[Any]] = {}
    for pk in sorted(total, key=lambda pk: (-total[pk], pk)):
        group = members.setdefault(group_of[pk], [])
        if len(group) < cut.group_size:
            group.append(pk)

    def score(pks: list[Any]) -> float:
        values = [total[pk] for pk in pks]
        if cut.group_scorer == "sum":
            return sum(values)
        if cut.group_scorer == "avg":
            return sum(values) / len(values)
        return max(values)

    groups = sorted(members.values(), key=lambda g: (-score(g), -len(g), g[0]))
    kept = groups[cut.offset : cut.offset + cut.limit]
    if cut.strict_group_size:
        kept = [g for g in kept if len(g) >= cut.group_size]
    return [pk for g in kept for pk in g]


def _hits(
    searches: list[SearchHits],
    descending: bool,
    counts: list[int],
    index: np.ndarray,
    scores: list[float],
    cut: Cut,
) -> SearchHits:
    values = np.asarray(scores, dtype=np.float32)
    if cut.round_decimal >= 0:
        values = np.round(values, cut.round_decimal)
    names = list(searches[0].fields)
    grouped = cut.group_size > 0
    return SearchHits(
        "IP" if descending else "L2",
        counts,
        take(concat([s.pks for s in searches]), index),
        values,
        {n: take(concat([s.fields[n] for s in searches]), index) for n in names},
        take(concat([s.groups for s in searches]), index) if grouped else None,
    )
