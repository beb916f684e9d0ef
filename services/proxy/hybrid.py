"""Hybrid search (the HybridSearch RPC, pymilvus ``hybrid_search``): several searches of one
collection, each over its own vector field with its own filter, params and limit, run as
ordinary searches (same consistency, partitions and output fields) and fused by a ranker
(``services/proxy/rerank.py``).

As in Milvus, each search returns its own ``limit`` best hits (or, grouping, its ``limit``
best groups); the fused list is then cut to the request's ``offset`` and ``limit``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from vectide.services.common import errors
from vectide.services.common.results import SearchHits
from vectide.services.common.schema import CollectionInfo
from vectide.services.proxy.dql import Outputs, SearchSpec
from vectide.services.proxy.rerank import GROUP_SCORERS, Cut, Ranker, fuse

if TYPE_CHECKING:
    from vectide.services.proxy.core import Proxy

#: Milvus's cap on the searches of one hybrid search
MAX_SEARCHES = 1024


@dataclass
class HybridSpec:
    #: one per AnnSearchRequest; their consistency, partitions and outputs are the request's
    searches: list[SearchSpec]
    ranker: Ranker
    cut: Cut
    group_by_field: str = ""


def check(spec: HybridSpec) -> None:
    """Refuse what Milvus refuses before searching anything."""
    if not spec.searches:
        raise errors.invalid("hybrid search needs at least one search request")
    if len(spec.searches) > MAX_SEARCHES:
        raise errors.invalid(f"maximum of ann search requests is {MAX_SEARCHES}")
    if spec.cut.limit < 1 or spec.cut.offset < 0:
        raise errors.invalid(
            f"limit must be 1 or more and offset 0 or more, got {spec.cut.limit} and "
            f"{spec.cut.offset}"
        )
    if spec.cut.group_scorer not in GROUP_SCORERS:
        raise errors.invalid(f"input group scorer type: {spec.cut.group_scorer} is not supported!")
    nqs = {len(s.vectors) for s in spec.searches}
    if len(nqs) > 1:
        raise errors.invalid("the nq of every search request of a hybrid search must agree")


def hybrid_search(proxy: Proxy, spec: HybridSpec) -> tuple[CollectionInfo, SearchHits, Outputs]:
    """Run every search, then fuse their hits."""
    check(spec)
    group_size = spec.cut.group_size if spec.group_by_field else 1
    results = [
        proxy.search(replace(s, group_by_field=spec.group_by_field, group_size=group_size))
        for s in spec.searches
    ]
    info, _, outputs = results[0]
    cut = spec.cut if spec.group_by_field else replace(spec.cut, group_size=0)
    return info, fuse([hits for _, hits, _ in results], spec.ranker, cut), outputs
