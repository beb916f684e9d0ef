"""pymilvus's search iterator v2 (``MilvusClient.search_iterator``) over plain searches.

pymilvus first sends a probe search with ``search_iter_v2`` set and expects a token back; with
none it falls back to its older iterator. Each page then sends the last page's bound
(``search_iter_last_bound``): the page is the best ``batch_size`` hits strictly worse than
it, a score band the query nodes apply (``services/common/search_range.py``). No state is
kept between pages: the bound is the whole cursor, the token only tells pymilvus that the
server pages. As in Milvus, hits tied with the last bound across a page boundary are skipped.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
from pymilvus.grpc_gen import milvus_pb2

from vectide.services.common import errors
from vectide.services.common.results import SearchHits
from vectide.services.common.search_range import LAST_BOUND


@dataclass(frozen=True)
class IteratorPage:
    token: str
    #: the previous page's last score (None: the first page)
    last_bound: float | None


def iterator_page(params: dict[str, Any]) -> IteratorPage | None:
    """The page a search asks for, from its decoded ``search_params`` (None: no iterator)."""
    if str(params.get("search_iter_v2", "")).lower() not in ("true", "1"):
        return None
    bound = params.get(LAST_BOUND)
    try:
        last = None if bound in (None, "") else float(bound)
    except (TypeError, ValueError):
        raise errors.invalid(f"{LAST_BOUND} must be a number, got {bound!r}") from None
    return IteratorPage(str(params.get("search_iter_id") or uuid.uuid4().hex), last)


def page_params(page: IteratorPage, params: dict[str, Any]) -> dict[str, Any]:
    """The search params the query nodes get for ``page``."""
    if page.last_bound is None:
        return params
    return {**params, LAST_BOUND: page.last_bound}


def mark_page(reply: milvus_pb2.SearchResults, page: IteratorPage, hits: SearchHits) -> None:
    """What pymilvus reads back besides the snapshot the page was read at (the reply's
    ``session_ts``, which later pages send as their guarantee): the token and this page's
    last score (the next page's bound)."""
    scores = np.asarray(hits.scores)
    last = float(scores[-1]) if len(scores) else page.last_bound
    info = reply.results.search_iterator_v2_results
    info.token = page.token
    if last is not None:
        info.last_bound = last
