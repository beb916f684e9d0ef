"""BM25 statistics of a shard, and a search's query rows weighted by them.

A BM25 function's rows hold each term's count in a text; a query's rows the counts of the
query text's terms (``services/common/analyzer.py``). A row's BM25 score needs statistics
of the collection, not of the store holding the row: how many rows hold each query term
(its IDF) and the rows' average length. As Milvus's shard delegator does, the node serving
a shard's read gathers them over every store it holds (the rows visible at the read's
snapshot, whatever its filter and partitions: statistics describe the corpus, not the
question), folds the IDF into the query's values and passes the average length on, so every
store, and every node a sealed segment of the shard is scattered to, scores alike:

    score(row) = sum over the query's terms t of w_t tf (k1 + 1) / (tf + k1 (1 - b + b len / avgdl))
    w_t = count_t(query) * ln(1 + (N - df_t + 0.5) / (df_t + 0.5))

(Lucene's and Milvus's formula; ``k1`` and ``b`` come from the search or the index, 1.2 and
0.75 by default). Sealed segments another node serves for the shard are scored with this
node's statistics and do not add to them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import numpy as np

from vectide.services.common import vector_types
from vectide.services.common.requests import ShardSearchRequest
from vectide.services.querynode.segment import ShardStore

#: the search param carrying the shard's average row length to the stores
AVGDL = "bm25_avgdl"


def weighted(
    req: ShardSearchRequest, seen: Iterable[tuple[ShardStore, np.ndarray]]
) -> ShardSearchRequest:
    """``req`` with its query rows weighted by the IDF of the rows ``seen`` (each store with
    the rows it shows) and their average length among its params."""
    queries = [vector_types.sparse_entries(q) for q in req.vectors]
    terms = np.unique(np.concatenate([i for i, _ in queries])) if queries else np.empty(0)
    terms = terms.astype(np.uint32)
    rows, length, df = 0, 0.0, np.zeros(len(terms), dtype=np.int64)
    for store, mask in seen:
        if not store.num_rows:
            continue
        n, total, counts = store.term_stats(req.anns_field, terms, mask)
        rows, length, df = rows + n, length + total, df + counts
    idf = np.log1p((rows - df + 0.5) / (df + 0.5))
    vectors = []
    for indices, counts in queries:
        weights = counts * idf[np.searchsorted(terms, indices)]
        entries = dict(zip(indices.tolist(), weights.tolist(), strict=True))
        vectors.append(vector_types.sparse_row(entries))
    params = {**req.search_params, AVGDL: length / rows if rows else 1.0}
    return replace(req, vectors=vectors, search_params=params)
