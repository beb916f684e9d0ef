"""BM25 statistics of a shard, and a search's query rows weighted by them.

A BM25 function's rows hold each term's count in a text; a query's rows the counts of the
query text's terms (``services/common/analyzer.py``). A row's BM25 score needs statistics
of the collection, not of the store holding the row: how many rows hold each query term
(its IDF) and the rows' average length. As Milvus's shard delegator does, the node serving
a shard's read gathers them over every store it holds (the rows visible at the read's
snapshot, whatever its filter and partitions: statistics describe the corpus, not the
question), with the statistics of the shard's sealed segments other nodes serve (asked of
them first), folds the IDF into the query's values and passes the average length on, so
every store, and every node a sealed segment of the shard is scattered to, scores alike:

    score(row) = sum over the query's terms t of w_t tf (k1 + 1) / (tf + k1 (1 - b + b len / avgdl))
    w_t = count_t(query) * ln(1 + (N - df_t + 0.5) / (df_t + 0.5))

(Lucene's and Milvus's formula; ``k1`` and ``b`` come from the search or the index, 1.2 and
0.75 by default).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import numpy as np

from vectide.services.common import vector_types
from vectide.services.common.requests import ShardSearchRequest
from vectide.services.common.results import TermStats
from vectide.services.querynode.segment import ShardStore

#: the search param carrying the shard's average row length to the stores
AVGDL = "bm25_avgdl"


def terms_of(req: ShardSearchRequest) -> np.ndarray:
    """Every index of the search's query rows, sorted, once."""
    found = [vector_types.sparse_entries(q)[0] for q in req.vectors]
    return np.unique(np.concatenate(found)).astype(np.uint32) if found else np.empty(0, np.uint32)


def corpus_stats(
    req: ShardSearchRequest, seen: Iterable[tuple[ShardStore, np.ndarray]]
) -> TermStats:
    """The statistics of the rows ``seen`` (each store with the rows it shows) for the
    search's terms (``terms_of``)."""
    terms = terms_of(req)
    total = TermStats(0, 0.0, np.zeros(len(terms), dtype=np.int64))
    for store, mask in seen:
        if store.num_rows:
            total += TermStats(*store.term_stats(req.anns_field, terms, mask))
    return total


def weighted(req: ShardSearchRequest, stats: TermStats) -> ShardSearchRequest:
    """``req`` with its query rows weighted by the IDF ``stats`` give and their average
    length among its params."""
    terms = terms_of(req)
    idf = np.log1p((stats.rows - stats.df + 0.5) / (stats.df + 0.5))
    vectors = []
    for query in req.vectors:
        indices, counts = vector_types.sparse_entries(query)
        weights = counts * idf[np.searchsorted(terms, indices)]
        entries = dict(zip(indices.tolist(), weights.tolist(), strict=True))
        vectors.append(vector_types.sparse_row(entries))
    average = stats.length / stats.rows if stats.rows else 1.0
    return replace(req, vectors=vectors, search_params={**req.search_params, AVGDL: average})
