"""Search and query results as they travel from query nodes to the proxy, and their merge.

Hits are flattened: query ``i`` owns ``counts[i]`` consecutive entries. Each shard returns
its best ``offset + limit`` per query; merging keeps the best across shards, so the proxy can
apply the offset last and return exactly what one big index would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vectide.services.common.msgstream.message import PrimaryKeys
from vectide.services.common.order_by import OrderKey, order_of

#: metrics where a larger score is better
SIMILARITY_METRICS = frozenset({"IP", "COSINE", "BM25"})


def normalizer(metric: str, norm_score: bool, mixed: bool) -> Any:
    """Milvus's ``getNormalizeFunc``: the map a weighted ranker applies to one search's scores."""
    similarity = metric in SIMILARITY_METRICS
    if not norm_score and (similarity or not mixed):
        return lambda s: s
    if metric == "COSINE":
        return lambda s: (1 + s) * 0.5
    if metric == "IP":
        return lambda s: 0.5 + np.arctan(s) / math.pi
    if metric == "BM25":  # scores are 0 or more
        return lambda s: 2 * np.arctan(s) / math.pi
    return lambda d: 1.0 - 2 * np.arctan(d) / math.pi


def relevance(scores: np.ndarray, metric: str) -> np.ndarray:
    """Scores as relevance, larger better, as a decay ranker weighs them: similarities as
    they are, distances ``1 - 2 atan(d) / pi`` (the weighted ranker's map for mixed metrics)."""
    return normalizer(metric, norm_score=False, mixed=True)(np.asarray(scores, np.float64))


@dataclass
class TermStats:
    """BM25's statistics of some rows (``services/querynode/bm25.py``): how many, their
    total length in terms, and how many hold each of a search's terms (aligned with them)."""

    rows: int
    length: float
    df: np.ndarray

    def __add__(self, other: TermStats) -> TermStats:
        return TermStats(self.rows + other.rows, self.length + other.length, self.df + other.df)


@dataclass
class SearchHits:
    metric_type: str
    counts: list[int]
    pks: np.ndarray | list[str]
    scores: np.ndarray
    #: output field name -> values aligned with the hits
    fields: dict[str, Any] = field(default_factory=dict)
    #: a grouping search's group-by value of each hit (None: not grouped)
    groups: Any = None
    #: the snapshot the read was served at, when the proxy chose one (an iterator's, a
    #: time travel's; 0: each shard's tsafe)
    snapshot_ts: int = 0

    @property
    def nq(self) -> int:
        return len(self.counts)


@dataclass
class QueryRows:
    pks: np.ndarray | list[str]
    fields: dict[str, Any] = field(default_factory=dict)
    #: count(*) result when the query asked only for a count
    count: int | None = None
    #: as SearchHits'
    snapshot_ts: int = 0


def take(values: Any, index: np.ndarray) -> Any:
    if isinstance(values, np.ndarray):
        return values[index]
    return [values[i] for i in index.tolist()]


def concat(parts: list[Any]) -> Any:
    if not parts:
        return []
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts)
    return [v for p in parts for v in p]


def merge_hits(parts: list[SearchHits], topk: int) -> SearchHits:
    """Best ``topk`` per query over several shards' hits (ties keep shard order)."""
    parts = [p for p in parts if p.nq]
    # parts without a hit (an empty growing store beside sealed segments) change nothing:
    # one part left is the answer as it is, without the per-query merge
    hit = [p for p in parts if len(p.scores)]
    if len(hit) == 1 or (parts and not hit):
        return (hit or parts)[0]
    return reduce_hits(parts, lambda scores, _groups: best_first(scores, parts[0])[:topk])


def best_first(scores: np.ndarray, like: SearchHits) -> np.ndarray:
    """Positions of ``scores`` best first under ``like``'s metric (ties keep their order)."""
    descending = like.metric_type in SIMILARITY_METRICS
    return np.argsort(-scores if descending else scores, kind="stable")


def reduce_hits(parts: list[SearchHits], pick: Any) -> SearchHits:
    """Several parts' hits as one: per query, ``pick(scores, groups)`` chooses (and orders)
    positions among that query's hits of every part, in part order."""
    parts = [p for p in parts if p.nq]
    if not parts:
        raise ValueError("nothing to merge")
    nq = parts[0].nq
    starts = [np.concatenate([[0], np.cumsum(p.counts)]).astype(np.int64) for p in parts]
    all_pks = concat([p.pks for p in parts])
    all_scores = np.concatenate([p.scores for p in parts])
    grouped = parts[0].groups is not None
    all_groups = concat([p.groups for p in parts]) if grouped else None
    bases = np.cumsum([0] + [len(p.scores) for p in parts])[:-1]
    names = list(parts[0].fields)
    all_fields = {n: concat([p.fields[n] for p in parts]) for n in names}
    picked: list[np.ndarray] = []
    counts: list[int] = []
    for q in range(nq):
        idx = np.concatenate(
            [np.arange(s[q], s[q + 1]) + b for s, b in zip(starts, bases, strict=True)]
        ).astype(np.int64)
        order = pick(all_scores[idx], take(all_groups, idx) if grouped else None)
        picked.append(idx[order])
        counts.append(len(order))
    index = np.concatenate(picked) if picked else np.empty(0, dtype=np.int64)
    return SearchHits(
        parts[0].metric_type,
        counts,
        take(all_pks, index),
        all_scores[index],
        {n: take(v, index) for n, v in all_fields.items()},
        take(all_groups, index) if grouped else None,
    )


def merge_rows(
    parts: list[QueryRows],
    offset: int = 0,
    limit: int | None = None,
    order_by: tuple[OrderKey, ...] = (),
) -> QueryRows:
    """Rows of every shard in primary-key order (or ``order_by``'s, ties by primary key),
    then ``[offset, offset + limit)``: the same page whichever shards hold the rows (Milvus
    orders limited query results by pk too)."""
    if parts and all(p.count is not None for p in parts):
        return QueryRows(pks=[], count=sum(p.count or 0 for p in parts))
    names = list(parts[0].fields) if parts else []
    pks = concat([p.pks for p in parts])
    fields = {n: concat([p.fields[n] for p in parts]) for n in names}
    order = order_of(fields, order_by, pks) if order_by else pk_order(pks)
    end = len(order) if limit is None else offset + limit
    index = order[offset:end]
    return QueryRows(take(pks, index), {n: take(v, index) for n, v in fields.items()})


def pk_order(pks: np.ndarray | list[str]) -> np.ndarray:
    if isinstance(pks, np.ndarray):
        return np.argsort(pks, kind="stable")
    return np.array(sorted(range(len(pks)), key=pks.__getitem__), dtype=np.int64)


@dataclass
class MutationResult:
    """What a write acknowledged: its keys and its stamp (to the client, to the ingest
    worker over RPC)."""

    pks: PrimaryKeys
    ts: int
    insert_count: int = 0
    delete_count: int = 0
    upsert_count: int = 0
