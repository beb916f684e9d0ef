"""Scalar indexes through unmodified pymilvus: created with the collection (beside the vector
index) or later, over REST too; JSON path indexes; described, dropped, refused where Milvus
refuses them; and filters on indexed fields answered by the indexes with milvus-lite's answers
on the same rows
(milvus-lite, which has no scalar index but INVERTED, filters by scanning: the oracle).

The query node's chunks are 256 rows here, so the growing rows are mostly indexed chunks and
an unindexed tail: both paths meet in every answer."""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace

import numpy as np
import pytest
import requests
from pymilvus import DataType, MilvusClient, MilvusException

from tests.integration.conftest import free_port, isolated
from vectide.services.common import metrics
from vectide.services.launcher import start_standalone

N = 2000
DIM = 4
INDEXES = {
    "id": "STL_SORT",
    "age": "STL_SORT",
    "score": "INVERTED",
    "name": "TRIE",
    "tag": "BITMAP",
    "flag": "AUTOINDEX",
    "nums": "INVERTED",
}
#: created beside them: NGRAM needs its sizes
NGRAM = {"note": {"min_gram": 2, "max_gram": 3}}
NAMES = ["ann", "anna", "bob", "bobby", "carl", "dora", "dorothy", "eve"]


@pytest.fixture(scope="module")
def standalone(infra):
    """The module's own standalone: 256-row chunks, so 2,000 rows make indexed chunks."""
    config = isolated(infra, "x")
    config.query.index_chunk_rows = 256
    port = free_port()
    deployment = start_standalone(config, querynodes=1, proxy_port=port)
    yield SimpleNamespace(uri=f"http://127.0.0.1:{port}", config=config)
    deployment.stop()


def _rows(rng: np.random.Generator) -> list[dict]:
    return [
        {
            "id": i,
            "v": rng.standard_normal(DIM).tolist(),
            "age": int(rng.integers(0, 90)),
            "score": float(rng.choice([0.5, 1.5, 2.25, rng.random() * 10])),
            "name": str(rng.choice(NAMES)) + str(int(rng.integers(0, 3))),
            "tag": str(rng.choice(["red", "green", "blue"])),
            "flag": bool(rng.integers(0, 2)),
            "nums": [int(x) for x in rng.integers(0, 8, size=int(rng.integers(0, 4)))],
            "u": int(rng.integers(0, 100)),
            "j": _document(rng),
            "note": f"{rng.choice(NAMES)} likes {rng.choice(CITIES)}",
        }
        for i in range(N)
    ]


def _document(rng: np.random.Generator) -> dict | None:
    """A JSON value with a key or two missing, a number that is now and then a string."""
    if rng.random() < 0.1:
        return None
    doc: dict = {"tags": [str(t) for t in rng.choice(CITIES, size=int(rng.integers(0, 3)))]}
    if rng.random() < 0.9:
        doc["city"] = str(rng.choice(CITIES))
    if rng.random() < 0.9:
        doc["n"] = int(rng.integers(0, 10)) if rng.random() < 0.9 else "7"
    if rng.random() < 0.9:
        doc["desc"] = f"{rng.choice(NAMES)} in {rng.choice(CITIES)}"
    return doc


CITIES = ["lima", "oslo", "rome", "kyiv", "baku"]
#: JSON path indexes (pymilvus ``add_index`` params), by index name
JSON_INDEXES = {
    "j_city": {"json_path": "j['city']", "json_cast_type": "varchar"},
    "j_n": {"json_path": 'j["n"]', "json_cast_type": "DOUBLE"},
    "j_tags": {"json_path": 'j["tags"]', "json_cast_type": "ARRAY_VARCHAR"},
}
JSON_NGRAM = {
    "j_desc": {"json_path": 'j["desc"]', "json_cast_type": "VARCHAR", "min_gram": 2, "max_gram": 4}
}


FIELDS: list[tuple[str, DataType, dict]] = [
    ("id", DataType.INT64, {"is_primary": True}),
    ("v", DataType.FLOAT_VECTOR, {"dim": DIM}),
    ("age", DataType.INT32, {}),
    ("score", DataType.DOUBLE, {}),
    ("name", DataType.VARCHAR, {"max_length": 16}),
    ("tag", DataType.VARCHAR, {"max_length": 8}),
    ("flag", DataType.BOOL, {}),
    ("nums", DataType.ARRAY, {"element_type": DataType.INT64, "max_capacity": 4}),
    ("u", DataType.INT64, {}),
    ("j", DataType.JSON, {"nullable": True}),
    ("note", DataType.VARCHAR, {"max_length": 32}),
]


def _schema(client: MilvusClient):
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    for name, data_type, options in FIELDS:
        schema.add_field(name, data_type, **options)
    return schema


@pytest.fixture(scope="module")
def coll(pair):
    """Ours with every scalar index given in create_collection's index params; milvus-lite
    with only the vector index; the same rows in both."""
    ours = pair[0]
    name = f"sidx_{uuid.uuid4().hex[:6]}"
    rows = _rows(np.random.default_rng(11))
    for client in pair:
        index = client.prepare_index_params()
        index.add_index("v", index_type="FLAT", metric_type="L2")
        if client is ours:
            for field, index_type in INDEXES.items():
                index.add_index(field, index_type=index_type)
            for field, params in NGRAM.items():
                index.add_index(field, index_type="NGRAM", params=params)
            for index_name, params in JSON_INDEXES.items():
                index.add_index("j", index_type="INVERTED", index_name=index_name, params=params)
            for index_name, params in JSON_NGRAM.items():
                index.add_index("j", index_type="NGRAM", index_name=index_name, params=params)
        client.create_collection(
            name, schema=_schema(client), index_params=index, consistency_level="Strong"
        )
        for start in range(0, N, 500):
            client.insert(name, rows[start : start + 500])
    yield name, rows
    for client in pair:
        client.drop_collection(name)


def _indexed_reads() -> float:
    return metrics.FILTERED_READS.labels("index")._value.get()


def _wait_indexed(client: MilvusClient, name: str, expr: str) -> None:
    """The query node builds growing chunks' indexes every half second: wait for one."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        before = _indexed_reads()
        client.query(name, filter=expr, output_fields=["id"])
        if _indexed_reads() > before:
            return
        time.sleep(0.3)
    raise AssertionError(f"no filtered read of {name} used an index")


FILTERS = [
    "id == 1234",
    "id in [3, 77, 1999, 5000]",
    "id not in [1, 2, 3] and age < 3",
    "age > 85",
    "age >= 20 and age < 22",
    ("10 < age <= 12", "age > 10 and age <= 12"),  # milvus-lite parses no chained range
    "age != 40 and flag",
    "score == 1.5",
    "score <= 0.5 or score > 9.9",
    'name == "bob1"',
    'name like "dor%"',
    'name like "an%" and u > 90',
    'name in ["eve0", "carl2"]',
    'name > "dora"',
    'tag == "red" and age == 7',
    'tag != "blue" and age < 2',
    "not flag and age in [1, 2]",
    "flag == false and u < 3",
    "array_contains(nums, 7) and age < 10",
    "array_contains_all(nums, [1, 2])",
    "array_contains_any(nums, [6]) and score > 9",
    'not (name like "a%") and age == 3',
    'name like "%b1" and age < 30',  # a suffix: the age index, the name scanned on its rows
    "u == 5",  # no index: a scan
    'note like "%es ro%"',  # NGRAM: any pattern
    'note like "%b_b%ky%" and age < 50',
    ('note not like "%ro%" or age == 3', 'not (note like "%ro%") or age == 3'),
    'j["city"] == "rome"',  # JSON path indexes
    'j["desc"] like "%ob%in k%" and u < 60',
    (
        'j["city"] in ["oslo", "lima"] and age < 50',  # milvus-lite takes no JSON path in 'in'
        '(j["city"] == "oslo" or j["city"] == "lima") and age < 50',
    ),
    'j["n"] > 5 and j["n"] <= 7',
    'j["n"] == 7 or j["city"] like "ky%"',
    'json_contains(j["tags"], "baku") and u < 50',
    'json_contains_all(j["tags"], ["oslo", "rome"])',
    'j["n"] == 2 and age < 40',
    'j["city"] > "lima" and age < 30',
]


#: no index (u), or numeric filters matching over an eighth of the rows: a scan is cheaper
SCANNED = {
    "u == 5",
    "age != 40 and flag",
    "score == 1.5",
    "score <= 0.5 or score > 9.9",
    "flag == false and u < 3",
}


@pytest.mark.parametrize("expr", FILTERS)
def test_filters_on_indexed_fields_match_milvus_lite(pair, coll, expr):
    name, _ = coll
    _wait_indexed(pair[0], name, "age == 1")
    ours, lite = (expr, expr) if isinstance(expr, str) else expr
    before = _indexed_reads()
    got = sorted(r["id"] for r in pair[0].query(name, filter=ours, output_fields=["id"]))
    assert (_indexed_reads() > before) == (ours not in SCANNED)
    want = sorted(r["id"] for r in pair[1].query(name, filter=lite, output_fields=["id"]))
    assert got == want


def test_filtered_search_matches_milvus_lite(pair, coll):
    name, rows = coll
    _wait_indexed(pair[0], name, "age == 1")
    queries = [rows[5]["v"], rows[900]["v"]]
    for expr in ("age < 30 and tag == 'green'", 'name like "bob%"', "array_contains(nums, 3)"):
        ours, lite = (
            c.search(name, queries, limit=10, filter=expr, output_fields=["age"]) for c in pair
        )
        for mine, theirs in zip(ours, lite, strict=True):
            assert [h["id"] for h in mine] == [h["id"] for h in theirs], expr
            assert [h["entity"]["age"] for h in mine] == [h["entity"]["age"] for h in theirs]


def test_a_selective_filter_uses_the_index(pair, coll):
    name, _ = coll
    _wait_indexed(pair[0], name, "id == 7")
    before = metrics.FILTERED_READS.labels("scan")._value.get()
    assert [r["id"] for r in pair[0].query(name, filter="id == 7", output_fields=["id"])] == [7]
    assert metrics.FILTERED_READS.labels("scan")._value.get() == before


def test_describe_and_list_the_scalar_indexes(pair, coll):
    name, _ = coll
    ours = pair[0]
    assert set(ours.list_indexes(name)) == {"v", *INDEXES, *NGRAM, *JSON_INDEXES, *JSON_NGRAM}
    assert ours.describe_index(name, "note")["params"] == {"min_gram": "2", "max_gram": "3"}
    described = ours.describe_index(name, "j_city")
    assert described["field_name"] == "j" and described["index_type"] == "INVERTED"
    params = described["params"]
    assert (params["json_path"], params["json_cast_type"]) == ('j["city"]', "VARCHAR")
    for field, index_type in INDEXES.items():
        described = ours.describe_index(name, field)
        assert described["index_type"] == index_type
        assert described["field_name"] == field
        assert described["state"] == "Finished"
        assert "metric_type" not in described or not described["metric_type"]


@pytest.mark.parametrize(
    "field,index_type,message",
    [
        ("name", "STL_SORT", "STL_SORT index is not supported on VARCHAR field name"),
        ("age", "TRIE", "TRIE index is not supported on INT32 field age"),
        ("score", "BITMAP", "BITMAP index is not supported on DOUBLE field score"),
        ("id", "BITMAP", "BITMAP index is not supported on primary key field id"),
        ("j", "INVERTED", "json index must specify cast type"),
        ("u", "HNSW", "invalid index type: HNSW for INT64 field u"),
        ("v", "STL_SORT", "invalid index type: STL_SORT for FLOAT_VECTOR field v"),
    ],
)
def test_wrong_combinations_are_refused_naming_field_type_and_index(
    pair, coll, field, index_type, message
):
    name, _ = coll
    index = pair[0].prepare_index_params()
    index.add_index(field, index_type=index_type, index_name=f"bad_{field}")
    with pytest.raises(MilvusException, match=message):
        pair[0].create_index(name, index)


def test_a_json_field_holds_one_index_per_path_each_with_its_own_name(pair, coll):
    name, _ = coll
    ours = pair[0]
    cases = [
        ("j_city_bool", {"json_path": 'j["city"]', "json_cast_type": "BOOL"}, "at most one"),
        ("j_n", {"json_path": 'j["zip"]', "json_cast_type": "VARCHAR"}, "index name j_n is taken"),
        ("j_x", {"json_path": 'k["x"]', "json_cast_type": "BOOL"}, "not a path of JSON field j"),
    ]
    for index_name, params, message in cases:
        index = ours.prepare_index_params()
        index.add_index("j", index_type="INVERTED", index_name=index_name, params=params)
        with pytest.raises(MilvusException, match=message):
            ours.create_index(name, index)
    assert set(ours.list_indexes(name)) == {"v", *INDEXES, *NGRAM, *JSON_INDEXES, *JSON_NGRAM}


def test_an_index_created_while_loaded_is_used_and_dropped_after_release(standalone, pair, coll):
    """Created on a loaded collection (REST v2 ``indexes/create``), the index is built by
    the query node on the first read naming it; dropping needs a release, as in Milvus."""
    name, _ = coll
    ours = pair[0]
    base = f"http://127.0.0.1:{standalone.config.service.http_port}/v2/vectordb"
    body = {
        "collectionName": name,
        "indexParams": [
            {"fieldName": "u", "indexName": "u_idx", "params": {"index_type": "STL_SORT"}}
        ],
    }
    reply = requests.post(f"{base}/indexes/create", json=body, timeout=30).json()
    assert reply["code"] == 0, reply
    assert ours.describe_index(name, "u_idx")["index_type"] == "STL_SORT"
    before = _indexed_reads()
    got = sorted(r["id"] for r in ours.query(name, filter="u == 5", output_fields=["id"]))
    assert _indexed_reads() > before
    assert got == sorted(
        r["id"] for r in pair[1].query(name, filter="u == 5", output_fields=["id"])
    )
    with pytest.raises(MilvusException, match="release it first"):
        ours.drop_index(name, "u_idx")
    ours.release_collection(name)
    ours.drop_index(name, "u_idx")
    assert "u_idx" not in ours.list_indexes(name)
    ours.load_collection(name)
    again = sorted(r["id"] for r in ours.query(name, filter="u == 5", output_fields=["id"]))
    assert again == got


def test_rest_v2_creates_a_collection_with_vector_and_scalar_indexes(standalone):
    base = f"http://127.0.0.1:{standalone.config.service.http_port}/v2/vectordb"
    name = f"sidx_rest_{uuid.uuid4().hex[:6]}"
    body = {
        "collectionName": name,
        "schema": {
            "autoID": False,
            "fields": [
                {"fieldName": "pk", "dataType": "Int64", "isPrimary": True},
                {"fieldName": "year", "dataType": "Int32"},
                {
                    "fieldName": "title",
                    "dataType": "VarChar",
                    "elementTypeParams": {"max_length": 9},
                },
                {"fieldName": "vec", "dataType": "FloatVector", "elementTypeParams": {"dim": 2}},
            ],
        },
        "indexParams": [
            {"fieldName": "vec", "indexName": "vec", "indexType": "FLAT", "metricType": "L2"},
            {"fieldName": "year", "indexName": "year", "indexType": "STL_SORT"},
            {"fieldName": "title", "indexName": "title", "params": {"index_type": "TRIE"}},
        ],
        "params": {"consistencyLevel": "Strong"},
    }
    assert requests.post(f"{base}/collections/create", json=body, timeout=30).json()["code"] == 0
    rows = [{"pk": i, "year": 2000 + i % 30, "title": f"t{i}", "vec": [i, 1]} for i in range(600)]
    reply = requests.post(
        f"{base}/entities/insert", json={"collectionName": name, "data": rows}, timeout=30
    ).json()
    assert reply["code"] == 0, reply
    described = requests.post(
        f"{base}/indexes/describe", json={"collectionName": name, "indexName": "year"}, timeout=30
    ).json()
    assert described["data"][0]["indexType"] == "STL_SORT", described
    query = {"collectionName": name, "filter": 'year == 2007 and title like "t1%"', "limit": 100}
    got = requests.post(f"{base}/entities/query", json=query, timeout=30).json()
    assert sorted(r["pk"] for r in got["data"]) == [
        r["pk"] for r in rows if r["year"] == 2007 and r["title"].startswith("t1")
    ]
    requests.post(f"{base}/collections/drop", json={"collectionName": name}, timeout=30)
