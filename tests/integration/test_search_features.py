"""Grouping search, several vector fields, hybrid search and ``query_iterator`` through
unmodified pymilvus, against milvus-lite on the same rows (FLAT indexes: exact answers) and,
where milvus-lite ranks differently from Milvus (weighted fusion), against Milvus's formula.

Vectide's collection has 4 shards and rows in several chunks (interim indexes beside exact
search), so groups and fused lists are merged across shards and stores; a cluster's two query
nodes split the shards of another, so the proxy merges too."""

from __future__ import annotations

import math
import uuid

import numpy as np
import pytest
import requests
from pymilvus import (
    AnnSearchRequest,
    Collection,
    DataType,
    Function,
    FunctionType,
    MilvusClient,
    MilvusException,
    RRFRanker,
    WeightedRanker,
    connections,
)

from tests.integration.conftest import exact_groups

N = 1500
DIM_V, DIM_W = 8, 6


def _rows(rng: np.random.Generator, ids: range) -> list[dict]:
    return [
        {
            "id": i,
            "v": rng.standard_normal(DIM_V).tolist(),
            "w": rng.standard_normal(DIM_W).tolist(),
            "g": int(rng.integers(0, 12)),
            "name": f"n{int(rng.integers(0, 9))}",
            "flag": bool(rng.integers(0, 2)),
            "f": float(rng.random()),
            "j": {"k": i},
        }
        for i in ids
    ]


def _create(client: MilvusClient, name: str) -> None:
    """Two vector fields (L2 and IP, FLAT: exact), groupable scalars and two that are not,
    4 shards."""
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=DIM_V)
    schema.add_field("w", DataType.FLOAT_VECTOR, dim=DIM_W)
    schema.add_field("g", DataType.INT64)
    schema.add_field("name", DataType.VARCHAR, max_length=16)
    schema.add_field("flag", DataType.BOOL)
    schema.add_field("f", DataType.FLOAT)
    schema.add_field("j", DataType.JSON)
    index = client.prepare_index_params()
    index.add_index("v", index_type="FLAT", metric_type="L2")
    index.add_index("w", index_type="FLAT", metric_type="IP")
    client.create_collection(
        name, schema=schema, index_params=index, consistency_level="Strong", num_shards=4
    )


@pytest.fixture(scope="module")
def coll(pair):
    """The same rows in both: two vector fields (L2 and IP), groupable scalars, a partition."""
    name = f"feat_{uuid.uuid4().hex[:6]}"
    rng = np.random.default_rng(5)
    rows = _rows(rng, range(N))
    for client in pair:
        _create(client, name)
        client.create_partition(name, "p1")
        for start in range(0, N, 500):  # several inserts: several chunks and segments
            batch = rows[start : start + 500]
            client.insert(name, batch[:400])
            client.insert(name, batch[400:], partition_name="p1")
    assert pair[0].describe_collection(name)["num_shards"] == 4
    yield name, rows
    for client in pair:
        client.drop_collection(name)


def _hits(result) -> list[list[tuple]]:
    return [[(h["id"], h["distance"]) for h in hits] for hits in result]


def _same(ours, lite) -> None:
    assert len(ours) == len(lite)
    for a, b in zip(_hits(ours), _hits(lite), strict=True):
        assert [i for i, _ in a] == [i for i, _ in b]
        np.testing.assert_allclose([d for _, d in a], [d for _, d in b], rtol=1e-5, atol=1e-5)


QUERIES_V = np.random.default_rng(9).standard_normal((3, DIM_V)).tolist()
QUERIES_W = np.random.default_rng(10).standard_normal((3, DIM_W)).tolist()


#: the tests' filters, as Python predicates for the exact answers
FILTERS = {"": lambda r: True, "f > 0.3": lambda r: r["f"] > 0.3, "g != 4": lambda r: r["g"] != 4}


def _in_p1(row: dict) -> bool:
    return row["id"] % 500 >= 400


def _check_exact(result, rows, queries, anns, metric, by, limit, size, offset, keep) -> None:
    labelled = [{**r, "by": r[by]} for r in rows]
    for hits, query in zip(_hits(result), queries, strict=True):
        expected = exact_groups(labelled, np.array(query), anns, metric, limit, size, offset, keep)
        assert [i for i, _ in hits] == [i for i, _ in expected]
        np.testing.assert_allclose([d for _, d in hits], [d for _, d in expected], rtol=1e-4)


@pytest.mark.parametrize("field", ["g", "name", "flag"])
@pytest.mark.parametrize(
    ("group_size", "offset", "expr", "partitions"),
    [
        (1, 0, "", None),
        (1, 2, "f > 0.3", None),
        (3, 0, "f > 0.3", None),
        (2, 2, "", None),
        (2, 0, "g != 4", ["p1"]),
    ],
)
def test_group_by_is_exact_and_matches_milvus_lite(
    pair, coll, field, group_size, offset, expr, partitions
):
    """Against the exact answer always; against milvus-lite where it is exact too: it groups
    only its best (limit + offset) * max(3 * group_size, 10) hits and applies ``offset`` to
    hits rather than groups, so with group_size > 1 it may return fewer or other hits."""
    name, rows = coll
    ours, lite = (
        c.search(
            name,
            QUERIES_V,
            anns_field="v",
            limit=4,
            offset=offset,
            filter=expr,
            partition_names=partitions,
            group_by_field=field,
            group_size=group_size,
            output_fields=[field],
        )
        for c in pair
    )
    keep = FILTERS[expr] if partitions is None else lambda r: FILTERS[expr](r) and _in_p1(r)
    _check_exact(ours, rows, QUERIES_V, "v", "L2", field, 4, group_size, offset, keep)
    if group_size == 1:
        _same(ours, lite)
    by_id = {r["id"]: r for r in rows}
    for hits in ours:
        values = [h["entity"][field] for h in hits]
        assert all(by_id[h["id"]][field] == h["entity"][field] for h in hits)
        assert len(set(values)) == min(4, len({r[field] for r in rows}) - offset)


def test_group_by_strict_group_size_on_an_ip_field(pair, coll):
    name, rows = coll
    ours = pair[0].search(
        name,
        QUERIES_W,
        anns_field="w",
        limit=5,
        group_by_field="g",
        group_size=3,
        strict_group_size=True,
    )
    _check_exact(ours, rows, QUERIES_W, "w", "IP", "g", 5, 3, 0, FILTERS[""])
    assert all(len(hits) == 15 for hits in ours)


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("f", "unsupported data type Float for group by operator"),
        ("j", "unsupported data type JSON for group by operator"),
        ("v", "unsupported data type FloatVector for group by operator"),
        ("nope", "groupBy field not found in schema"),
    ],
)
def test_group_by_refuses_what_milvus_refuses(pair, coll, field, message):
    name, _ = coll
    with pytest.raises(MilvusException) as caught:
        pair[0].search(name, QUERIES_V, anns_field="v", limit=3, group_by_field=field)
    assert message in caught.value.message
    with pytest.raises(MilvusException):
        pair[1].search(name, QUERIES_V, anns_field="v", limit=3, group_by_field=field)


def test_group_by_with_range_search_is_refused(pair, coll):
    with pytest.raises(MilvusException, match="range-search"):
        pair[0].search(
            coll[0],
            QUERIES_V,
            anns_field="v",
            limit=3,
            group_by_field="g",
            search_params={"params": {"radius": 10.0}},
        )


@pytest.mark.parametrize(("field", "queries"), [("v", QUERIES_V), ("w", QUERIES_W)])
def test_each_vector_field_searches_as_milvus_lite(pair, coll, field, queries):
    name, _ = coll
    ours, lite = (
        c.search(name, queries, anns_field=field, limit=7, filter="g < 6", output_fields=["g"])
        for c in pair
    )
    _same(ours, lite)
    assert [[h["entity"]["g"] for h in hits] for hits in ours] == [
        [h["entity"]["g"] for h in hits] for hits in lite
    ]


def test_a_search_without_anns_field_on_two_vector_fields_is_refused(pair, coll):
    with pytest.raises(MilvusException, match="anns_field"):
        pair[0].search(coll[0], QUERIES_V, limit=3)


def _requests(nq: int = 2) -> list[AnnSearchRequest]:
    return [
        AnnSearchRequest(QUERIES_V[:nq], "v", {"metric_type": "L2"}, limit=12),
        AnnSearchRequest(QUERIES_W[:nq], "w", {"metric_type": "IP"}, limit=9, expr="g > 2"),
    ]


@pytest.mark.parametrize(("k", "limit", "offset"), [(60, 10, 0), (5, 6, 3)])
def test_hybrid_rrf_matches_milvus_lite(pair, coll, k, limit, offset):
    name, rows = coll
    ours, lite = (
        c.hybrid_search(
            name, _requests(), RRFRanker(k), limit=limit, offset=offset, output_fields=["g"]
        )
        for c in pair
    )
    _same(ours, lite)
    by_id = {r["id"]: r for r in rows}
    assert all(h["entity"]["g"] == by_id[h["id"]]["g"] for hits in ours for h in hits)


def _milvus_weighted(subs: list, weights: list[float], metrics: list[str]) -> dict:
    """Milvus's weighted fusion with norm_score, from each sub-search's hits."""
    norm = {
        "L2": lambda d: 1 - 2 * math.atan(d) / math.pi,
        "IP": lambda s: 0.5 + math.atan(s) / math.pi,
    }
    total: dict[int, float] = {}
    for hits, weight, metric in zip(subs, weights, metrics, strict=True):
        for h in hits:
            total[h["id"]] = total.get(h["id"], 0.0) + weight * norm[metric](h["distance"])
    return total


def test_hybrid_weighted_scores_as_milvus(pair, coll):
    name, _ = coll
    ours = pair[0]
    result = ours.hybrid_search(name, _requests(), WeightedRanker(0.3, 0.7), limit=8, offset=1)
    subs = [
        ours.search(name, QUERIES_V[:2], anns_field="v", limit=12),
        ours.search(name, QUERIES_W[:2], anns_field="w", limit=9, filter="g > 2"),
    ]
    for q, hits in enumerate(result):
        total = _milvus_weighted([subs[0][q], subs[1][q]], [0.3, 0.7], ["L2", "IP"])
        expected = sorted(total, key=lambda i: (-total[i], i))[1:9]
        assert [h["id"] for h in hits] == expected
        np.testing.assert_allclose(
            [h["distance"] for h in hits], [total[i] for i in expected], rtol=1e-5
        )


def test_hybrid_group_by(pair, coll):
    name, rows = coll
    by_id = {r["id"]: r for r in rows}
    result = pair[0].hybrid_search(
        name, _requests(), RRFRanker(), limit=3, group_by_field="g", group_size=2
    )
    for hits in result:
        groups = [by_id[h["id"]]["g"] for h in hits]
        assert 0 < len(set(groups)) <= 3
        assert all(groups.count(g) <= 2 for g in groups)
        scores = [h["distance"] for h in hits]
        best = [scores[groups.index(g)] for g in dict.fromkeys(groups)]
        assert best == sorted(best, reverse=True)


def test_hybrid_search_refuses_bad_rankers(pair, coll):
    with pytest.raises(MilvusException, match="weights"):
        pair[0].hybrid_search(coll[0], _requests(), WeightedRanker(0.5), limit=3)
    with pytest.raises(MilvusException, match="range"):
        pair[0].hybrid_search(coll[0], _requests(), WeightedRanker(0.5, 1.5), limit=3)


def test_hybrid_search_over_rest(standalone, pair, coll):
    name, _ = coll
    base = f"http://127.0.0.1:{standalone.config.service.http_port}/v2/vectordb"
    body = {
        "collectionName": name,
        "search": [
            {"data": QUERIES_V[:1], "annsField": "v", "limit": 12},
            {"data": QUERIES_W[:1], "annsField": "w", "limit": 9, "filter": "g > 2"},
        ],
        "rerank": {"strategy": "rrf", "params": {"k": 60}},
        "limit": 5,
        "outputFields": ["g"],
    }
    reply = requests.post(f"{base}/entities/hybrid_search", json=body, timeout=30).json()
    assert reply["code"] == 0, reply
    grpc = pair[0].hybrid_search(name, _requests(1), RRFRanker(60), limit=5, output_fields=["g"])
    assert [r["id"] for r in reply["data"]] == [h["id"] for h in grpc[0]]
    assert [r["g"] for r in reply["data"]] == [h["entity"]["g"] for h in grpc[0]]
    # the older URI Milvus still answers for the same call
    again = requests.post(f"{base}/entities/advanced_search", json=body, timeout=30).json()
    assert again == reply


@pytest.mark.parametrize("pk_type", [DataType.INT64, DataType.VARCHAR])
def test_query_iterator_returns_every_row_once(pair, pk_type):
    ours = pair[0]
    name = f"qiter_{uuid.uuid4().hex[:6]}"
    schema = ours.create_schema(auto_id=False)
    if pk_type == DataType.INT64:
        schema.add_field("pk", DataType.INT64, is_primary=True)
    else:
        schema.add_field("pk", DataType.VARCHAR, is_primary=True, max_length=16)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=4)
    schema.add_field("n", DataType.INT64)
    index = ours.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    ours.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    keys = list(range(700)) if pk_type == DataType.INT64 else [f"k{i:04d}" for i in range(700)]
    rng = np.random.default_rng(3)
    for start in range(0, 700, 250):
        ours.insert(
            name,
            [
                {"pk": k, "vec": rng.random(4).tolist(), "n": i}
                for i, k in enumerate(keys[start : start + 250], start)
            ],
        )
    for expr, expected in [("", keys), ("n % 3 == 1", keys[1::3])]:
        seen: list = []
        iterator = ours.query_iterator(name, batch_size=64, filter=expr, output_fields=["n"])
        while page := iterator.next():
            seen += [r["pk"] for r in page]
            assert all(r["n"] == keys.index(r["pk"]) for r in page)
        iterator.close()
        assert sorted(seen) == sorted(expected)
        assert len(seen) == len(set(seen))
    ours.drop_collection(name)


@pytest.mark.parametrize("level", ["Strong", "Bounded", "Eventually"])
def test_iterators_read_one_snapshot_while_rows_come_and_go(pair, caplog, level):
    """Every page of a query or search iterator is read at the first page's snapshot, as
    Milvus's iterators are: rows inserted after it never show, rows deleted after it still
    do; the first reply carries the stamp, so pymilvus warns of no fallback to its own."""
    ours = pair[0]
    name = f"snap_{uuid.uuid4().hex[:6]}"
    schema = ours.create_schema(auto_id=False)
    schema.add_field("pk", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=4)
    index = ours.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    ours.create_collection(name, schema=schema, index_params=index, consistency_level=level)
    ours.insert(name, [{"pk": k, "vec": [k / 100, 0, 0, 0]} for k in range(0, 600, 2)])
    ours.query(name, "pk >= 0", limit=1, consistency_level="Strong")  # every row is applied
    before = set(range(0, 600, 2))

    def churn() -> None:  # odd keys appear (beside the pages still to come), even go
        ours.insert(name, [{"pk": k, "vec": [k / 100, 0, 0, 0]} for k in range(1, 600, 2)])
        ours.delete(name, ids=list(range(300, 600, 2)))
        ours.query(name, "pk >= 0", limit=1, consistency_level="Strong")

    caplog.clear()
    queried = ours.query_iterator(name, batch_size=50, filter="pk >= 0", output_fields=["pk"])
    assert sorted(_walk(queried, churn)) == sorted(before)

    ours.upsert(name, [{"pk": k, "vec": [k / 100, 0, 0, 0]} for k in range(300, 600, 2)])
    ours.delete(name, ids=list(range(1, 600, 2)))
    ours.query(name, "pk >= 0", limit=1, consistency_level="Strong")
    searched = ours.search_iterator(
        name, [[0.0] * 4], batch_size=50, search_params={"metric_type": "L2"}
    )
    assert sorted(_walk(searched, churn)) == sorted(before)
    assert "mvccTs" not in caplog.text  # pymilvus used the server's snapshot
    ours.drop_collection(name)


def _walk(iterator, between) -> list[int]:
    """The keys of every page of a query or search iterator; ``between()`` runs after the
    first page."""
    keys = [row["pk"] for row in iterator.next()]
    between()
    while page := iterator.next():
        keys += [row["pk"] for row in page]
    iterator.close()
    return keys


def test_the_orm_groups_and_fuses_as_the_client_does(standalone, pair, coll):
    name, _ = coll
    alias = f"orm_{uuid.uuid4().hex[:6]}"
    connections.connect(alias, uri=standalone.uri)
    try:
        collection = Collection(name, using=alias)
        grouped = collection.search(
            QUERIES_V, "v", {"metric_type": "L2"}, limit=3, group_by_field="name", group_size=2
        )
        client = pair[0].search(
            name, QUERIES_V, anns_field="v", limit=3, group_by_field="name", group_size=2
        )
        assert [list(hits.ids) for hits in grouped] == [[h["id"] for h in q] for q in client]
        fused = collection.hybrid_search(_requests(), RRFRanker(), limit=5)
        client = pair[0].hybrid_search(name, _requests(), RRFRanker(), limit=5)
        assert [list(hits.ids) for hits in fused] == [[h["id"] for h in q] for q in client]
    finally:
        connections.disconnect(alias)


def test_a_nullable_field_groups_its_nulls_together(pair):
    """Null is a group of its own; with group_size > 1 the second search's filter (``in``
    the chosen values ``or is null``) keeps it."""
    name = f"gnull_{uuid.uuid4().hex[:6]}"
    rng = np.random.default_rng(8)
    rows = [
        {
            "id": i,
            "v": rng.standard_normal(DIM_V).tolist(),
            "m": None if i % 3 == 0 else int(rng.integers(0, 4)),
        }
        for i in range(600)
    ]
    for client in pair:
        schema = client.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("v", DataType.FLOAT_VECTOR, dim=DIM_V)
        schema.add_field("m", DataType.INT64, nullable=True)
        index = client.prepare_index_params()
        index.add_index("v", index_type="FLAT", metric_type="L2")
        client.create_collection(
            name, schema=schema, index_params=index, consistency_level="Strong"
        )
        client.insert(name, rows)
    try:
        ours, lite = (
            c.search(
                name, QUERIES_V, anns_field="v", limit=5, group_by_field="m", output_fields=["m"]
            )
            for c in pair
        )
        _same(ours, lite)
        assert all(None in [h["entity"]["m"] for h in hits] for hits in ours)
        sized = pair[0].search(
            name, QUERIES_V, anns_field="v", limit=5, group_by_field="m", group_size=3
        )
        _check_exact(sized, rows, QUERIES_V, "v", "L2", "m", 5, 3, 0, FILTERS[""])
    finally:
        for client in pair:
            client.drop_collection(name)


def test_groups_merge_across_query_nodes_of_a_cluster(cluster):
    """Two query nodes serve the shards: the proxy merges their groups, fused lists and
    ORDER BY pages."""
    client = MilvusClient(cluster.uris[0])
    name = f"gcl_{uuid.uuid4().hex[:6]}"
    _create(client, name)
    rows = _rows(np.random.default_rng(6), range(800))
    client.insert(name, rows)
    try:
        [replica] = client.describe_replica(name)
        assert len({shard.shard_leader for shard in replica.shards}) == 2
        grouped = client.search(
            name, QUERIES_V, anns_field="v", limit=3, offset=1, group_by_field="g", group_size=4
        )
        _check_exact(grouped, rows, QUERIES_V, "v", "L2", "g", 3, 4, 1, FILTERS[""])
        _check_ordered_by_name(client, name, rows)
        fused = client.hybrid_search(name, _requests(), RRFRanker(20), limit=6)
        subs = [
            client.search(name, QUERIES_V[:2], anns_field="v", limit=12),
            client.search(name, QUERIES_W[:2], anns_field="w", limit=9, filter="g > 2"),
        ]
        for q, hits in enumerate(fused):
            total: dict[int, float] = {}
            for sub in subs:
                for rank, h in enumerate(sub[q], 1):
                    total[h["id"]] = total.get(h["id"], 0.0) + 1 / (20 + rank)
            assert [h["id"] for h in hits] == sorted(total, key=lambda i: (-total[i], i))[:6]
    finally:
        client.drop_collection(name)
        client.close()


def _check_ordered_by_name(client: MilvusClient, name: str, rows: list[dict]) -> None:
    """ORDER BY (pymilvus 2.6.17's ``order_by_fields``): each query's best 8 by distance,
    ordered by name descending, then f; the page after the first 2."""
    got = client.search(
        name,
        QUERIES_V,
        anns_field="v",
        limit=6,
        offset=2,
        output_fields=["name"],
        order_by_fields=[{"field": "name", "order": "desc"}, {"field": "f"}],
    )
    for query, hits in zip(QUERIES_V, got, strict=True):
        vectors = np.array([r["v"] for r in rows])
        nearest = np.argsort(np.sum((vectors - np.array(query)) ** 2, axis=1))[:8]
        best = sorted((rows[i] for i in nearest), key=lambda r: (-ord(r["name"][1]), r["f"]))
        assert [h["id"] for h in hits] == [r["id"] for r in best[2:]]
        assert [h["entity"]["name"] for h in hits] == [r["name"] for r in best[2:]]


def test_search_by_primary_keys_equals_milvus_lite_searching_their_vectors(pair, coll):
    """pymilvus ``search(ids=...)`` (milvus-lite refuses it): the rows' stored vectors, found
    across the 4 shards, as queries; milvus-lite given those vectors is the oracle."""
    ours, lite = pair
    name, rows = coll
    keys = [3, 900, 1499]
    got = ours.search(name, ids=keys, anns_field="w", limit=5, consistency_level="Strong")
    expected = lite.search(name, data=[rows[k]["w"] for k in keys], anns_field="w", limit=5)
    _same(got, expected)
    by_l2 = ours.search(name, ids=keys, anns_field="v", limit=1, consistency_level="Strong")
    assert [hits[0]["id"] for hits in by_l2] == keys  # itself, at distance ~0 (float32 sums)
    assert all(hits[0]["distance"] == pytest.approx(0.0, abs=1e-5) for hits in by_l2)


@pytest.mark.parametrize("function", ["gauss", "exp", "linear"])
@pytest.mark.parametrize(
    ("anns", "field", "origin", "scale"), [("v", "f", 0.5, 0.2), ("w", "g", 6, 3)]
)
def test_decay_rankers_rerank_as_milvus_lite(pair, coll, function, anns, field, origin, scale):
    """Milvus 2.6's decay rankers on a search (L2 scores normalised, IP taken as they are),
    the same hits and scores as milvus-lite's, over the same 10 x limit candidates."""
    ours, lite = pair
    name, rows = coll
    ranker = Function(
        name="recency",
        input_field_names=[field],
        function_type=FunctionType.RERANK,
        params={
            "reranker": "decay",
            "function": function,
            "origin": origin,
            "scale": scale,
            "offset": scale / 4,
            "decay": 0.4,
        },
    )
    queries = [rows[7][anns], rows[901][anns]]
    kwargs = {"anns_field": anns, "limit": 5, "ranker": ranker, "output_fields": ["g"]}
    got = ours.search(name, queries, consistency_level="Strong", **kwargs)
    expected = lite.search(name, queries, **kwargs)
    _same(got, expected)
    assert all(set(hit["entity"]) == {"g"} for hits in got for hit in hits)


def test_decay_rankers_refuse_what_milvus_refuses(pair, coll):
    ours, _ = pair
    name, _ = coll
    for params, field, message in [
        ({"function": "cubic"}, "f", "invalid function 'cubic'"),
        ({"scale": 0}, "f", "scale must be > 0"),
        ({"decay": 1.5}, "f", "decay must be between"),
        ({}, "name", "must be numeric"),
        ({}, "nope", "input field nope not found"),
    ]:
        ranker = Function(
            name="d",
            input_field_names=[field],
            function_type=FunctionType.RERANK,
            params={"reranker": "decay", "function": "gauss", "origin": 0, "scale": 1, **params},
        )
        with pytest.raises(MilvusException, match=message):
            ours.search(name, [[0.0] * DIM_V], anns_field="v", limit=3, ranker=ranker)


@pytest.mark.parametrize("function", ["gauss", "linear"])
def test_hybrid_search_with_a_decay_ranker_matches_milvus_lite(pair, coll, function):
    """The best normalised score among the searches (L2 mapped, IP as it is) times the
    field's decay."""
    ours, lite = pair
    name, rows = coll
    ranker = Function(
        name="nearness",
        input_field_names=["f"],
        function_type=FunctionType.RERANK,
        params={"reranker": "decay", "function": function, "origin": 0.3, "scale": 0.25},
    )
    requests = [
        AnnSearchRequest([rows[11]["v"]], "v", {"metric_type": "L2"}, limit=8),
        AnnSearchRequest([rows[11]["w"]], "w", {"metric_type": "IP"}, limit=8),
    ]
    got = ours.hybrid_search(name, requests, ranker=ranker, limit=6, output_fields=["name"])
    expected = lite.hybrid_search(name, requests, ranker=ranker, limit=6, output_fields=["name"])
    _same(got, expected)
    assert all(set(hit["entity"]) == {"name"} for hits in got for hit in hits)


def test_random_sample_picks_a_share_of_the_filtered_rows_through_pymilvus(pair, coll):
    """Milvus 2.6's RANDOM_SAMPLE (milvus-lite 3.2 refuses it: no oracle): a share of each
    segment's rows after the rest of the filter, in query, count(*) and search."""
    ours, _ = pair
    name, rows = coll
    share = [r["id"] for r in ours.query(name, "RANDOM_SAMPLE(0.2)", ["id"], limit=N)]
    assert len(set(share)) == len(share) and abs(len(share) - 0.2 * N) <= 16  # +-1 a store
    again = [r["id"] for r in ours.query(name, "random_sample(0.2)", ["id"], limit=N)]
    assert set(again) != set(share)
    low = {r["id"] for r in rows if r["g"] < 6}
    picked = ours.query(name, "g < 6 and RANDOM_SAMPLE({f})", ["g"], filter_params={"f": 0.5})
    assert {r["id"] for r in picked} <= low and abs(len(picked) - 0.5 * len(low)) <= 16
    [counted] = ours.query(name, "g < 6 and RANDOM_SAMPLE(0.5)", ["count(*)"])
    assert abs(counted["count(*)"] - 0.5 * len(low)) <= 16
    hits = ours.search(
        name, [rows[0]["v"]], anns_field="v", filter="g < 6 and RANDOM_SAMPLE(0.1)", limit=N
    )[0]
    assert {h["id"] for h in hits} <= low and abs(len(hits) - 0.1 * len(low)) <= 16
    with pytest.raises(MilvusException, match="last condition") as err:
        ours.query(name, "RANDOM_SAMPLE(0.5) and g < 6", ["id"])
    assert err.value.code == 1100
    with pytest.raises(MilvusException, match="delete does not take random_sample"):
        ours.delete(name, filter="g < 6 and RANDOM_SAMPLE(0.5)")
    assert ours.query(name, "", ["count(*)"])[0]["count(*)"] == N
