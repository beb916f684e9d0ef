"""Range search and the search iterator through unmodified pymilvus, against exact answers
computed with numpy: ``radius``/``range_filter`` keep exactly the hits inside the band (for
distances and similarities, over growing and indexed data), and ``search_iterator`` walks every
row once, best first, without the repeats pymilvus's fallback iterator produced."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from pymilvus import DataType, MilvusClient, MilvusException

DIM = 8
N = 600


@pytest.fixture(scope="module")
def vectors():
    return np.random.default_rng(11).standard_normal((N, DIM)).astype(np.float32)


def _collection(client: MilvusClient, vectors: np.ndarray, metric: str, index: str) -> str:
    name = f"rng_{metric.lower()}_{index.lower()}_{uuid.uuid4().hex[:6]}"
    schema = client.create_schema(auto_id=False)
    schema.add_field("pk", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    params = client.prepare_index_params()
    extra = {"M": 8, "efConstruction": 64} if index == "HNSW" else {}
    params.add_index("vec", index_type=index, metric_type=metric, params=extra)
    client.create_collection(name, schema=schema, index_params=params)
    client.insert(name, [{"pk": i, "vec": v.tolist()} for i, v in enumerate(vectors)])
    if index == "HNSW":
        client.flush(name)  # sealed and indexed, besides growing
    return name


@pytest.fixture(scope="module", params=[("L2", "FLAT"), ("IP", "FLAT"), ("COSINE", "HNSW")])
def collection(request, client, vectors):
    metric, index = request.param
    name = _collection(client, vectors, metric, index)
    yield name, metric
    client.drop_collection(name)


def exact_scores(vectors: np.ndarray, query: np.ndarray, metric: str) -> np.ndarray:
    if metric == "L2":
        return ((vectors - query) ** 2).sum(axis=1)
    if metric == "COSINE":
        vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        query = query / np.linalg.norm(query)
    return vectors @ query


def test_range_search_keeps_exactly_the_band(client, collection, vectors):
    name, metric = collection
    query = vectors[3] + 0.1
    scores = exact_scores(vectors, query, metric)
    order = np.argsort(scores if metric == "L2" else -scores)
    inner, outer = float(scores[order[20]]), float(scores[order[60]])  # skip 20, stop at 60
    if metric == "L2":
        expected = set(np.flatnonzero((scores >= inner) & (scores < outer)).tolist())
    else:
        expected = set(np.flatnonzero((scores > outer) & (scores <= inner)).tolist())
    hits = client.search(
        name,
        [query.tolist()],
        limit=100,
        search_params={"metric_type": metric, "params": {"radius": outer, "range_filter": inner}},
        consistency_level="Strong",
    )[0]
    found = {h["pk"] for h in hits}
    # exact data: the band's members, give or take one float32 rounding at either edge
    assert len(found ^ expected) <= 2, (len(found), len(expected))
    assert len(found) >= 38
    distances = [h["distance"] for h in hits]
    assert distances == sorted(distances, reverse=metric != "L2")


def test_a_band_on_the_wrong_side_is_refused(client, collection):
    name, metric = collection
    radius, range_filter = (1.0, 2.0) if metric == "L2" else (2.0, 1.0)
    with pytest.raises(MilvusException, match="radius must be"):
        client.search(
            name,
            [[0.0] * DIM],
            limit=5,
            search_params={"params": {"radius": radius, "range_filter": range_filter}},
        )


def test_search_iterator_walks_every_row_once_best_first(client, collection, vectors, caplog):
    name, metric = collection
    query = vectors[5]
    iterator = client.search_iterator(
        name, [query.tolist()], batch_size=70, search_params={"metric_type": metric}
    )
    seen: list[int] = []
    distances: list[float] = []
    while page := iterator.next():
        seen.extend(h["pk"] for h in page)
        distances.extend(h["distance"] for h in page)
    iterator.close()
    assert "does not support Search Iterator V2" not in caplog.text  # no fallback to v1
    assert len(seen) == len(set(seen))  # no repeats
    assert len(seen) >= N - 2  # every row (ties at a page edge may be skipped, as in Milvus)
    assert distances == sorted(distances, reverse=metric != "L2")
