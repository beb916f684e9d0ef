"""Output fields through unmodified pymilvus, with milvus-lite (a real Milvus-API server) as
the oracle: search, query, get and both iterators return the primary key and every field
asked for, for int64 and varchar keys, with ``*`` and with vector and dynamic fields."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from pymilvus import DataType, MilvusClient

DIM = 8
N = 40
CASES = [
    ["pk"],
    ["*"],
    ["title", "pk"],
    ["vec"],
    ["color"],
    ["pk", "color", "meta", "n"],
]


@pytest.fixture(scope="module")
def clients(standalone, tmp_path_factory):
    ours = MilvusClient(standalone.uri)
    lite = MilvusClient(str(tmp_path_factory.mktemp("lite") / "oracle.db"))
    yield ours, lite
    ours.close()
    lite.close()


def rows(varchar: bool) -> list[dict]:
    vectors = np.random.default_rng(7).standard_normal((N, DIM)).astype(np.float32)
    return [
        {
            "pk": f"k{i:03d}" if varchar else i * 11,
            "vec": vectors[i].tolist(),
            "title": f"title-{i}",
            "n": i,
            "meta": {"i": i, "odd": bool(i % 2)},
            "color": ["red", "green"][i % 2],  # a dynamic field
        }
        for i in range(N)
    ]


@pytest.fixture(scope="module", params=["int64", "varchar"])
def collection(request, clients):
    varchar = request.param == "varchar"
    name = f"out_{request.param}_{uuid.uuid4().hex[:6]}"
    for client in clients:
        schema = client.create_schema(auto_id=False, enable_dynamic_field=True)
        if varchar:
            schema.add_field("pk", DataType.VARCHAR, is_primary=True, max_length=16)
        else:
            schema.add_field("pk", DataType.INT64, is_primary=True)
        schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
        schema.add_field("title", DataType.VARCHAR, max_length=32)
        schema.add_field("n", DataType.INT32)
        schema.add_field("meta", DataType.JSON)
        index = client.prepare_index_params()
        index.add_index("vec", index_type="FLAT", metric_type="L2")
        client.create_collection(
            name, schema=schema, index_params=index, consistency_level="Strong"
        )
        client.insert(name, rows(varchar))
    yield name, rows(varchar)
    for client in clients:
        client.drop_collection(name)


def hits_of(result) -> list[list[dict]]:
    return [[{"id": h.id, "entity": dict(h["entity"])} for h in q] for q in result]


def queries() -> list[list[float]]:
    return np.random.default_rng(1).standard_normal((2, DIM)).astype(np.float32).tolist()


@pytest.mark.parametrize("output_fields", CASES, ids=lambda f: ",".join(f))
def test_search_returns_what_milvus_returns(clients, collection, output_fields):
    name, data = collection
    ours, lite = (
        hits_of(c.search(name, queries(), limit=5, output_fields=output_fields)) for c in clients
    )
    assert ours == lite
    by_pk = {r["pk"]: r for r in data}
    for hit in (h for q in ours for h in q):
        row = by_pk[hit["id"]]  # vectors went in as float32 values: they come back exactly
        expected = {k: row[k] for k in (row if output_fields == ["*"] else output_fields)}
        assert hit["entity"] == expected


def test_search_with_no_output_fields_returns_ids_only(clients, collection):
    name, _ = collection
    [hits] = clients[0].search(name, queries()[:1], limit=3)
    assert len(hits) == 3 and all(dict(h["entity"]) == {} for h in hits)


@pytest.mark.parametrize("output_fields", CASES, ids=lambda f: ",".join(f))
def test_query_and_get_return_what_milvus_returns(clients, collection, output_fields):
    name, data = collection
    ours, lite = (c.query(name, filter="n < 7", output_fields=output_fields) for c in clients)
    assert sorted(ours, key=str) == sorted(lite, key=str) and len(ours) == 7
    ids = [data[3]["pk"], data[30]["pk"]]
    ours, lite = (c.get(name, ids=ids, output_fields=output_fields) for c in clients)
    assert sorted(ours, key=str) == sorted(lite, key=str) and {r["pk"] for r in ours} == set(ids)


def test_query_iterator_pages_carry_the_pk_and_fields(clients, collection):
    name, data = collection
    iterator = clients[0].query_iterator(name, batch_size=6, output_fields=["pk", "title"])
    got = []
    while page := iterator.next():
        got += page
    iterator.close()
    assert sorted(got, key=str) == sorted(
        ({"pk": r["pk"], "title": r["title"]} for r in data), key=str
    )


def test_search_iterator_batches_carry_the_pk_and_fields(clients, collection):
    name, data = collection
    [query] = queries()[:1]
    iterator = clients[0].search_iterator(
        name, [query], batch_size=6, output_fields=["pk", "title"]
    )
    first = hits_of([iterator.next()])[0]
    iterator.close()
    vectors = np.array([r["vec"] for r in data], np.float32)
    nearest = np.argsort(((vectors - np.array(query, np.float32)) ** 2).sum(axis=1))[:6]
    assert [h["id"] for h in first] == [data[i]["pk"] for i in nearest]
    assert [h["entity"] for h in first] == [
        {"pk": data[i]["pk"], "title": data[i]["title"]} for i in nearest
    ]
