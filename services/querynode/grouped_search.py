"""A segment store's grouping search: the best ``topk`` groups of up to ``group_size`` hits.

The store is searched for ``topk * group_size`` hits, then deeper (4x each round) until, for
each query, the first ``topk`` groups to appear are full (or hold every row of their group):
hits further down cannot change that selection, so the store's groups are exact. Small or
few groups settle early; a search never reads more rows than the filter lets through.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from vectide.services.common.grouping import as_values, groups_settled, select_groups
from vectide.services.common.requests import ShardSearchRequest
from vectide.services.querynode.segment import ShardStore


def search_groups(
    store: ShardStore, req: ShardSearchRequest, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, rows)`` as :meth:`ShardStore.search` returns them (``nq x k``, -1 rows
    last), each query's row holding its groups' hits, group by group."""
    candidates = int(mask.sum())
    totals = Counter(_values(store, req.group_by, np.flatnonzero(mask)))
    k = max(min(req.topk * req.group_size, candidates), 1)
    while True:
        scores, rows = store.search(
            req.anns_field, req.vectors, req.metric_type, k, mask, req.search_params
        )
        values = [_values(store, req.group_by, r[r >= 0]) for r in rows]
        if k >= candidates or all(
            groups_settled(v, req.topk, req.group_size, totals) for v in values
        ):
            break
        k = min(k * 4, candidates)
    out_scores = np.zeros_like(scores)
    out_rows = np.full_like(rows, -1)
    for q, v in enumerate(values):
        keep = select_groups(v, req.topk, req.group_size)
        out_scores[q, : len(keep)] = scores[q, keep]
        out_rows[q, : len(keep)] = rows[q, keep]
    return out_scores, out_rows


def _values(store: ShardStore, field: str, rows: np.ndarray) -> list:
    return as_values(store.output(field, rows))
