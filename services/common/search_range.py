"""Which hits a search keeps by score: range search and the search iterator's pages.

Milvus lets a search ask for hits within a band of scores instead of the plain top-k:

- **range search**: ``radius`` (the outer edge, exclusive) and ``range_filter`` (the inner
  edge, inclusive, optional) in the search params. For distances (L2) a hit counts when
  ``range_filter <= distance < radius``; for similarities (IP, COSINE) when
  ``radius < score <= range_filter``. pymilvus's first search iterator pages with it;
- **search iterator v2** (``search_iter_v2``): each page asks for the hits strictly worse than
  the last one it returned (``search_iter_last_bound``).

Both become one :class:`ScoreBand` over *distance*, where smaller is better: the score itself
for L2, its negation for similarities. The query node keeps the best ``k`` hits inside the
band (searching deeper while too few fall inside), the proxy checks the params. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from vectide.services.common import errors
from vectide.services.common.results import SIMILARITY_METRICS

#: the search-params key carrying the iterator's last bound to the query nodes
LAST_BOUND = "search_iter_last_bound"


@dataclass(frozen=True)
class ScoreBand:
    """Distances a hit may have: ``after < d`` (exclusive), ``start <= d``, ``d < before``."""

    after: float = -math.inf
    start: float = -math.inf
    before: float = math.inf

    def keep(self, distances: np.ndarray) -> np.ndarray:
        return (distances > self.after) & (distances >= self.start) & (distances < self.before)


def distances(metric: str, scores: np.ndarray) -> np.ndarray:
    """Scores as distances (smaller is better)."""
    return -scores if metric in SIMILARITY_METRICS else scores


def band_of(metric: str, params: Mapping[str, object]) -> ScoreBand | None:
    """The band ``params`` ask for (None: a plain top-k search); a band that is empty by
    construction (radius on the wrong side of range_filter) is a parameter error."""
    radius = _number(params, "radius")
    range_filter = _number(params, "range_filter")
    last = _number(params, LAST_BOUND)
    if radius is None and range_filter is None and last is None:
        return None
    sign = -1.0 if metric in SIMILARITY_METRICS else 1.0
    if radius is not None and range_filter is not None and sign * radius <= sign * range_filter:
        side = "larger" if sign > 0 else "smaller"
        raise errors.invalid(
            f"for metric {metric}, radius must be {side} than range_filter "
            f"(radius={radius}, range_filter={range_filter})"
        )
    return ScoreBand(
        after=-math.inf if last is None else sign * last,
        start=-math.inf if range_filter is None else sign * range_filter,
        before=math.inf if radius is None else sign * radius,
    )


def _number(params: Mapping[str, object], key: str) -> float | None:
    value = params.get(key)
    if value is None or value == "":
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise errors.invalid(f"search param {key} must be a number, got {value!r}") from None
    if math.isnan(number):
        raise errors.invalid(f"search param {key} must be a number, got NaN")
    return number
