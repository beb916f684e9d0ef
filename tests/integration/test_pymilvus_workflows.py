"""Unmodified pymilvus against a Vectide standalone deployment: MilvusClient and ORM workflows.

Expected results are computed here with numpy brute force, independently of the server.
"""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest
from pymilvus import (
    Collection,
    CollectionSchema,
    DataType,
    FieldSchema,
    MilvusClient,
    MilvusException,
    Partition,
    connections,
    utility,
)

DIM = 16


def name() -> str:
    return f"c_{uuid.uuid4().hex[:8]}"


def full_schema(client: MilvusClient, auto_id: bool = False, varchar_pk: bool = False):
    schema = client.create_schema(auto_id=auto_id, enable_dynamic_field=True)
    if varchar_pk:
        schema.add_field("pk", DataType.VARCHAR, is_primary=True, max_length=64)
    else:
        schema.add_field("pk", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("flag", DataType.BOOL)
    schema.add_field("i8", DataType.INT8)
    schema.add_field("i16", DataType.INT16)
    schema.add_field("i32", DataType.INT32)
    schema.add_field("i64", DataType.INT64)
    schema.add_field("f32", DataType.FLOAT)
    schema.add_field("f64", DataType.DOUBLE)
    schema.add_field("title", DataType.VARCHAR, max_length=128)
    schema.add_field("meta", DataType.JSON)
    return schema


def make_rows(n: int, seed: int = 0, varchar_pk: bool = False, with_pk: bool = True):
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    rows = []
    for i in range(n):
        row = {
            "vec": vectors[i].tolist(),
            "flag": bool(i % 2),
            "i8": i % 100 - 50,
            "i16": i * 3,
            "i32": i * 7,
            "i64": i * 1_000_000_007,
            "f32": float(i) / 4,
            "f64": float(i) / 3,
            "title": f"{['alpha', 'beta', 'gamma'][i % 3]}-{i}",
            "meta": {"group": i % 5, "tags": ["even" if i % 2 == 0 else "odd"], "n": {"x": i}},
            "color": ["red", "green", "blue"][i % 3],  # dynamic field
        }
        if with_pk:
            row["pk"] = f"k{i}" if varchar_pk else i
        rows.append(row)
    return rows, vectors


def create_loaded(client, schema, metric="L2", index_type="FLAT", params=None, **kwargs):
    coll = name()
    index_params = client.prepare_index_params()
    index_params.add_index("vec", index_type=index_type, metric_type=metric, params=params or {})
    client.create_collection(
        coll, schema=schema, index_params=index_params, consistency_level="Strong", **kwargs
    )
    return coll


def brute_force(vectors, query, metric, k, mask=None):
    if metric == "L2":
        scores = ((vectors - query) ** 2).sum(axis=1)
        order = np.argsort(scores, kind="stable")
    else:
        if metric == "COSINE":
            vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
            query = query / np.linalg.norm(query)
        scores = vectors @ query
        order = np.argsort(-scores, kind="stable")
    if mask is not None:
        order = [i for i in order if mask[i]]
    return list(order[:k]), scores


@pytest.mark.parametrize("metric", ["L2", "IP", "COSINE"])
def test_search_matches_brute_force_for_each_metric(client, metric):
    coll = create_loaded(client, full_schema(client), metric=metric)
    rows, vectors = make_rows(500, seed=1)
    assert client.insert(coll, rows)["insert_count"] == 500
    queries = vectors[[3, 77]] + 0.01
    results = client.search(coll, queries.tolist(), limit=10, search_params={"metric_type": metric})
    assert len(results) == 2
    for q, hits in zip(queries, results, strict=True):
        expected, scores = brute_force(vectors, q, metric, 10)
        assert [h["pk"] for h in hits] == expected
        np.testing.assert_allclose(
            [h["distance"] for h in hits], scores[expected], rtol=1e-4, atol=1e-4
        )
    client.drop_collection(coll)


def test_filters_output_fields_and_paging(client):
    coll = create_loaded(client, full_schema(client))
    rows, vectors = make_rows(300, seed=2)
    client.insert(coll, rows)
    q = vectors[10]
    cases = {
        "i32 > 700 and flag == true": lambda r: r["i32"] > 700 and r["flag"],
        "pk in [1, 2, 3, 50, 299] or title like 'gamma%'": lambda r: (
            r["pk"] in (1, 2, 3, 50, 299) or r["title"].startswith("gamma")
        ),
        "not (f64 < 50) && i8 >= -10": lambda r: not r["f64"] < 50 and r["i8"] >= -10,
        'meta["group"] == 3': lambda r: r["meta"]["group"] == 3,
        'json_contains(meta["tags"], "odd") and meta["n"]["x"] < 100': lambda r: (
            "odd" in r["meta"]["tags"] and r["meta"]["n"]["x"] < 100
        ),
        'color == "blue"': lambda r: r["color"] == "blue",
        "10 <= i16 < 90": lambda r: 10 <= r["i16"] < 90,
    }
    for expr, predicate in cases.items():
        mask = [predicate(r) for r in rows]
        expected, _ = brute_force(vectors, q, "L2", 7, mask)
        [hits] = client.search(
            coll, [q.tolist()], limit=7, filter=expr, output_fields=["title", "meta", "color", "i8"]
        )
        assert [h["pk"] for h in hits] == expected, expr
        for h in hits:
            row = rows[h["pk"]]
            assert h["entity"]["title"] == row["title"]
            assert h["entity"]["meta"] == row["meta"]
            assert h["entity"]["color"] == row["color"]
            assert h["entity"]["i8"] == row["i8"]
    # offset pages through the same ranking
    ranking, _ = brute_force(vectors, q, "L2", 30)
    [page] = client.search(coll, [q.tolist()], limit=10, offset=20)
    assert [h["pk"] for h in page] == ranking[20:30]
    client.drop_collection(coll)


def test_query_count_delete_upsert(client):
    coll = create_loaded(client, full_schema(client))
    rows, _ = make_rows(200, seed=3)
    client.insert(coll, rows)
    assert client.query(coll, filter="", output_fields=["count(*)"])[0]["count(*)"] == 200
    got = client.query(coll, filter="i16 < 30", output_fields=["i16", "title", "f32", "flag"])
    assert sorted(r["pk"] for r in got) == list(range(10))
    assert {r["pk"]: r["title"] for r in got}[4] == rows[4]["title"]
    page = client.query(coll, filter="pk >= 0", output_fields=["pk"], limit=5, offset=10)
    assert [r["pk"] for r in page] == list(range(10, 15))

    assert client.delete(coll, ids=[0, 1, 2])["delete_count"] == 3
    client.delete(coll, filter='title like "beta%" and pk < 50')
    left = {r["pk"] for r in client.query(coll, filter="pk < 50", output_fields=["pk"])}
    assert left == {i for i in range(3, 50) if i % 3 != 1}

    client.upsert(coll, [{**rows[5], "title": "changed", "color": "black"}])
    [row] = client.query(coll, filter="pk == 5", output_fields=["title", "color"])
    assert (row["title"], row["color"]) == ("changed", "black")
    assert client.query(coll, filter="", output_fields=["count(*)"])[0]["count(*)"] == (
        200 - 3 - len([i for i in range(3, 50) if i % 3 == 1])
    )
    client.drop_collection(coll)


def test_varchar_and_auto_id_keys(client):
    coll = create_loaded(client, full_schema(client, varchar_pk=True))
    rows, vectors = make_rows(50, seed=4, varchar_pk=True)
    assert client.insert(coll, rows)["ids"][:2] == ["k0", "k1"]
    [hits] = client.search(coll, [vectors[7].tolist()], limit=1)
    assert hits[0]["pk"] == "k7"
    client.delete(coll, filter='pk in ["k7", "k8"]')
    assert client.query(coll, filter='pk in ["k7", "k8", "k9"]', output_fields=["pk"]) == [
        {"pk": "k9"}
    ]
    client.drop_collection(coll)

    coll = create_loaded(client, full_schema(client, auto_id=True))
    rows, _ = make_rows(20, seed=5, with_pk=False)
    ids = client.insert(coll, rows)["ids"]
    assert len(set(ids)) == 20
    got = client.query(coll, filter=f"pk in {ids[:3]}", output_fields=["title"])
    assert sorted(r["title"] for r in got) == sorted(r["title"] for r in rows[:3])
    client.drop_collection(coll)


def test_partitions(client):
    coll = create_loaded(client, full_schema(client))
    client.create_partition(coll, "p1")
    assert client.has_partition(coll, "p1")
    assert set(client.list_partitions(coll)) == {"_default", "p1"}
    rows, vectors = make_rows(40, seed=6)
    client.insert(coll, rows[:20])
    client.insert(coll, rows[20:], partition_name="p1")
    [hits] = client.search(coll, [vectors[25].tolist()], limit=40, partition_names=["p1"])
    assert {h["pk"] for h in hits} == set(range(20, 40))
    got = client.query(coll, filter="pk >= 0", partition_names=["_default"], output_fields=["pk"])
    assert {r["pk"] for r in got} == set(range(20))
    client.release_collection(coll)
    client.drop_partition(coll, "p1")
    assert not client.has_partition(coll, "p1")
    client.drop_collection(coll)


@pytest.mark.filterwarnings("ignore::FutureWarning")  # the deprecated ORM API is under test
def test_orm_workflow(standalone):
    alias = f"orm{uuid.uuid4().hex[:4]}"
    connections.connect(alias, uri=standalone.uri)
    try:
        fields = [
            FieldSchema("id", DataType.INT64, is_primary=True),
            FieldSchema("emb", DataType.FLOAT_VECTOR, dim=DIM),
            FieldSchema("price", DataType.DOUBLE),
        ]
        coll_name = name()
        coll = Collection(
            coll_name, CollectionSchema(fields), using=alias, consistency_level="Strong"
        )
        assert utility.has_collection(coll_name, using=alias)
        rng = np.random.default_rng(7)
        vectors = rng.random((100, DIM), dtype=np.float32)
        coll.insert([list(range(100)), vectors, [float(i) for i in range(100)]])
        coll.flush()
        coll.create_index(
            "emb",
            {"index_type": "HNSW", "metric_type": "IP", "params": {"M": 8, "efConstruction": 64}},
        )
        assert coll.indexes[0].params["index_type"] == "HNSW"
        coll.load()
        assert utility.load_state(coll_name, using=alias).name == "Loaded"
        assert coll.num_entities == 100
        res = coll.search(
            vectors[:2].tolist(),
            "emb",
            {"metric_type": "IP", "params": {"ef": 64}},
            limit=5,
            expr="price < 50",
            output_fields=["price"],
        )
        for q, hits in zip(vectors[:2], res, strict=True):
            expected, _ = brute_force(vectors, q, "IP", 5, [i < 50 for i in range(100)])
            assert list(hits.ids) == expected
            assert all(h.entity.get("price") < 50 for h in hits)
        assert len(coll.query("id < 10", output_fields=["price"])) == 10
        part = Partition(coll, "extra")
        assert part.name in [p.name for p in coll.partitions]
        coll.release()
        assert utility.load_state(coll_name, using=alias).name == "NotLoad"
        coll.drop()
        assert not utility.has_collection(coll_name, using=alias)
    finally:
        connections.disconnect(alias)


def test_errors_are_milvus_statuses(client):
    assert client.has_collection("no_such_collection") is False
    with pytest.raises(MilvusException) as missing:
        client.describe_collection("no_such_collection")
    assert missing.value.code == 100

    coll = create_loaded(client, full_schema(client))
    rows, vectors = make_rows(5, seed=8)
    client.insert(coll, rows)
    with pytest.raises(MilvusException, match="already exists"):
        client.create_collection(coll, schema=full_schema(client))
    with pytest.raises(MilvusException, match="unexpected end of expression at position 13"):
        client.query(coll, filter="title > 3 and", output_fields=["pk"])
    with pytest.raises(MilvusException, match="metric type not match"):
        client.search(coll, [vectors[0].tolist()], limit=3, search_params={"metric_type": "IP"})
    bad = {**rows[0], "pk": 99, "vec": [0.0] * (DIM + 1)}
    with pytest.raises(MilvusException):
        client.insert(coll, [bad])
    with pytest.raises(MilvusException, match="exceeds max_length"):
        client.insert(coll, [{**rows[0], "pk": 98, "title": "x" * 500}])
    # nothing of the refused writes arrived
    assert client.query(coll, filter="pk in [98, 99]", output_fields=["pk"]) == []
    client.release_collection(coll)
    with pytest.raises(MilvusException) as not_loaded:
        client.search(coll, [vectors[0].tolist()], limit=3)
    assert not_loaded.value.code == 101
    client.drop_collection(coll)


def test_json_text_round_trips_exactly(client):
    coll = create_loaded(client, full_schema(client))
    rows, _ = make_rows(3, seed=9)
    rows[1]["meta"] = {"unicode": "é€", "nested": [1, {"a": None}], "f": 1.5}
    client.insert(coll, rows)
    [got] = client.query(coll, filter="pk == 1", output_fields=["meta"])
    assert json.dumps(got["meta"], sort_keys=True) == json.dumps(rows[1]["meta"], sort_keys=True)
    client.drop_collection(coll)
