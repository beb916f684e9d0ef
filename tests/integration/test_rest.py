"""Milvus's RESTful API v2 over plain HTTP against a standalone deployment: what REST
writes, pymilvus reads the same (and the other way round); results of the same search and
query through both APIs are equal; bad requests get Milvus's codes, never a 500."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time

import pytest
import requests
from pymilvus import DataType

from tests.infra import REPO

DIM = 8


@pytest.fixture(scope="module")
def rest(standalone):
    """POST a body to /v2/vectordb/<path> of the module's standalone; the parsed reply."""
    base = f"http://127.0.0.1:{standalone.config.service.http_port}/v2/vectordb"
    session = requests.Session()

    def post(path: str, body: object = None, **kwargs: object) -> dict:
        response = session.post(f"{base}/{path}", json=body, timeout=60, **kwargs)
        assert response.status_code == 200, response.text
        return response.json()

    post.base = base
    post.session = session
    yield post
    session.close()


def ok(reply: dict) -> object:
    assert reply["code"] == 0, reply
    return reply["data"]


def vector(i: int) -> list[float]:
    return [float((i * 7 + k) % 11) / 10 for k in range(DIM)]


def test_quick_setup_matches_pymilvus(rest, client):
    ok(
        rest(
            "collections/create", {"collectionName": "quick", "dimension": DIM, "metricType": "L2"}
        )
    )
    rows = [{"id": i, "vector": vector(i), "color": ["red", "blue"][i % 2]} for i in range(60)]
    inserted = ok(rest("entities/insert", {"collectionName": "quick", "data": rows}))
    assert inserted == {"insertCount": 60, "insertIds": list(range(60))}

    search = {
        "collectionName": "quick",
        "data": [vector(3)],
        "limit": 5,
        "filter": 'color == "blue"',
        "outputFields": ["color"],
        "consistencyLevel": "Strong",
    }
    hits = ok(rest("entities/search", search))
    expected = client.search(
        "quick",
        [vector(3)],
        limit=5,
        filter='color == "blue"',
        output_fields=["color"],
        consistency_level="Strong",
    )[0]
    assert [h["id"] for h in hits] == [h["id"] for h in expected]
    assert [h["distance"] for h in hits] == pytest.approx([h["distance"] for h in expected])
    assert all(h["color"] == "blue" for h in hits) and hits[0]["id"] == 3

    query = {
        "collectionName": "quick",
        "filter": "id < 10",
        "outputFields": ["id", "color"],
        "consistencyLevel": "Strong",
    }
    got = sorted(ok(rest("entities/query", query)), key=lambda r: r["id"])
    want = client.query("quick", "id < 10", ["id", "color"], consistency_level="Strong")
    assert got == sorted(want, key=lambda r: r["id"])

    fetched = ok(rest("entities/get", {"collectionName": "quick", "id": [4, 5]}))
    by_id = {r["id"]: r for r in fetched}
    assert set(by_id) == {4, 5} and by_id[4]["vector"] == pytest.approx(vector(4))
    assert by_id[5]["color"] == "blue"

    described = ok(rest("collections/describe", {"collectionName": "quick"}))
    assert described["load"] == "LoadStateLoaded" and described["enableDynamicField"]
    assert [f["name"] for f in described["fields"]] == ["id", "vector"]
    assert described["indexes"] == [
        {"fieldName": "vector", "indexName": "vector", "metricType": "L2"}
    ]
    state = ok(rest("collections/get_load_state", {"collectionName": "quick"}))
    assert state == {"loadState": "LoadStateLoaded", "loadProgress": 100}
    assert ok(rest("collections/has", {"collectionName": "quick"})) == {"has": True}
    assert "quick" in ok(rest("collections/list", {}))
    assert _eventually_rows(rest, "quick", 60)


def _eventually_rows(rest, name: str, expected: int) -> bool:
    """get_stats counts at Eventually consistency (as GetCollectionStatistics does)."""
    for _ in range(50):
        if ok(rest("collections/get_stats", {"collectionName": name}))["rowCount"] == expected:
            return True
        time.sleep(0.1)
    return False


def test_full_schema_writes_reads_and_deletes(rest, client):
    body = {
        "collectionName": "typed",
        "schema": {
            "autoID": False,
            "enableDynamicField": False,
            "fields": [
                {
                    "fieldName": "pk",
                    "dataType": "VarChar",
                    "isPrimary": True,
                    "elementTypeParams": {"max_length": 32},
                },
                {"fieldName": "n", "dataType": "Int32"},
                {"fieldName": "meta", "dataType": "JSON"},
                {"fieldName": "emb", "dataType": "FloatVector", "elementTypeParams": {"dim": DIM}},
            ],
        },
        "indexParams": [
            {
                "fieldName": "emb",
                "indexName": "emb_hnsw",
                "indexType": "HNSW",
                "metricType": "IP",
                "params": {"M": 8, "efConstruction": 64},
            },
        ],
        "params": {"consistencyLevel": "Strong"},
    }
    ok(rest("collections/create", body))
    described = ok(rest("collections/describe", {"collectionName": "typed"}))
    assert described["consistencyLevel"] == "Strong" and described["load"] == "LoadStateLoaded"
    assert {f["name"]: f["type"] for f in described["fields"]} == {
        "pk": "VarChar",
        "n": "Int32",
        "meta": "JSON",
        "emb": "FloatVector",
    }
    index = ok(rest("indexes/describe", {"collectionName": "typed", "indexName": "emb_hnsw"}))
    assert index[0]["indexType"] == "HNSW" and index[0]["metricType"] == "IP"
    assert ok(rest("indexes/list", {"collectionName": "typed"})) == ["emb_hnsw"]

    # pymilvus writes, REST reads
    client.insert(
        "typed", [{"pk": f"k{i}", "n": i, "meta": {"i": i}, "emb": vector(i)} for i in range(20)]
    )
    rows = ok(
        rest(
            "entities/query",
            {
                "collectionName": "typed",
                "filter": "n in {ns}",
                "exprParams": {"ns": [1, 2]},
                "outputFields": ["pk", "n", "meta"],
            },
        )
    )
    # a JSON field comes back as its JSON text, as Milvus's REST server renders it
    rows = [{**r, "meta": json.loads(r["meta"])} for r in rows]
    assert sorted(rows, key=lambda r: r["n"]) == [
        {"pk": "k1", "n": 1, "meta": {"i": 1}},
        {"pk": "k2", "n": 2, "meta": {"i": 2}},
    ]
    # REST upserts and deletes, pymilvus reads
    upserted = ok(
        rest(
            "entities/upsert",
            {
                "collectionName": "typed",
                "data": [{"pk": "k1", "n": 100, "meta": {}, "emb": vector(1)}],
            },
        )
    )
    assert upserted == {"upsertCount": 1, "upsertIds": ["k1"]}
    assert client.get("typed", ids=["k1"], output_fields=["n"])[0]["n"] == 100
    deleted = ok(rest("entities/delete", {"collectionName": "typed", "filter": "n >= 10"}))
    assert deleted["deleteCount"] == 11  # k10..k19, and k1 (n is 100 since the upsert)
    ok(rest("entities/delete", {"collectionName": "typed", "id": ["k2", "k3"]}))
    count = ok(rest("entities/query", {"collectionName": "typed", "outputFields": ["count(*)"]}))
    assert count == [{"count(*)": 7}]
    assert client.query("typed", "", output_fields=["count(*)"])[0]["count(*)"] == 7


def test_partitions_aliases_databases_rename(rest, client):
    ok(rest("collections/create", {"collectionName": "parts", "dimension": DIM}))
    ok(rest("partitions/create", {"collectionName": "parts", "partitionName": "p1"}))
    assert ok(rest("partitions/list", {"collectionName": "parts"})) == ["_default", "p1"]
    assert ok(rest("partitions/has", {"collectionName": "parts", "partitionName": "p1"}))["has"]
    rows = [{"id": i, "vector": [float(i)] * DIM} for i in range(3)]
    client.insert("parts", rows, partition_name="p1")
    stats = {"collectionName": "parts", "partitionName": "p1"}
    deadline = time.monotonic() + 10  # counted at Eventually consistency
    while ok(rest("partitions/get_stats", stats))["rowCount"] != 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ok(rest("partitions/get_stats", stats)) == {"rowCount": 3}
    default = {"collectionName": "parts", "partitionName": "_default"}
    assert ok(rest("partitions/get_stats", default)) == {"rowCount": 0}
    ok(rest("collections/release", {"collectionName": "parts"}))
    state = ok(rest("collections/get_load_state", {"collectionName": "parts"}))
    assert state == {"loadState": "LoadStateNotLoad"}
    ok(rest("partitions/load", {"collectionName": "parts", "partitionNames": ["p1"]}))
    loaded = {"collectionName": "parts", "partitionNames": ["p1"]}
    assert ok(rest("collections/get_load_state", loaded))["loadState"] == "LoadStateLoaded"
    ok(rest("partitions/release", {"collectionName": "parts", "partitionNames": ["p1"]}))
    ok(rest("partitions/drop", {"collectionName": "parts", "partitionName": "p1"}))
    assert ok(rest("partitions/list", {"collectionName": "parts"})) == ["_default"]

    ok(rest("aliases/create", {"collectionName": "parts", "aliasName": "parts_alias"}))
    alias = ok(rest("aliases/describe", {"aliasName": "parts_alias"}))
    assert alias == {"dbName": "default", "collectionName": "parts", "aliasName": "parts_alias"}
    assert ok(rest("aliases/list", {"collectionName": "parts"})) == ["parts_alias"]
    assert ok(rest("collections/has", {"collectionName": "parts_alias"}))["has"]
    ok(rest("aliases/drop", {"aliasName": "parts_alias"}))

    ok(rest("databases/create", {"dbName": "restdb"}))
    assert "restdb" in ok(rest("databases/list", {}))
    assert ok(rest("databases/describe", {"dbName": "restdb"}))["dbName"] == "restdb"
    ok(
        rest(
            "collections/create", {"dbName": "restdb", "collectionName": "inner", "dimension": DIM}
        )
    )
    assert ok(rest("collections/list", {"dbName": "restdb"})) == ["inner"]
    assert ok(rest("collections/list", {}, headers={"db-name": "restdb"})) == ["inner"]
    ok(rest("collections/drop", {"dbName": "restdb", "collectionName": "inner"}))
    ok(rest("databases/drop", {"dbName": "restdb"}))

    ok(rest("collections/rename", {"collectionName": "parts", "newCollectionName": "renamed"}))
    assert client.has_collection("renamed") and not client.has_collection("parts")
    ok(rest("collections/drop", {"collectionName": "renamed"}))
    assert ok(rest("collections/has", {"collectionName": "renamed"})) == {"has": False}


def test_collection_properties_at_create_alter_and_drop(rest, client):
    """``params.ttlSeconds`` is stored as Milvus stores it (``collection.ttl.seconds``, which
    Vectide acts on); ``alter_properties`` and ``drop_properties`` change the set."""
    body = {"collectionName": "props", "dimension": DIM, "params": {"ttlSeconds": 3600}}
    ok(rest("collections/create", body))
    try:
        assert client.describe_collection("props")["properties"] == {
            "collection.ttl.seconds": "3600"
        }
        altered = {"collectionName": "props", "properties": {"mmap.enabled": True}}
        ok(rest("collections/alter_properties", altered))
        dropped = {"collectionName": "props", "propertyKeys": ["collection.ttl.seconds"]}
        ok(rest("collections/drop_properties", dropped))
        described = ok(rest("collections/describe", {"collectionName": "props"}))
        assert described["properties"] == [{"key": "mmap.enabled", "value": "true"}]
        bad = {"collectionName": "props", "properties": {"collection.ttl.seconds": "soon"}}
        assert rest("collections/alter_properties", bad)["code"] != 0
    finally:
        client.drop_collection("props")


def test_fields_add_and_alter_properties(rest, client):
    """``collections/fields/add`` adds a nullable field to a collection holding rows (they
    read it as null, new rows carry it); ``fields/alter_properties`` changes its max_length,
    and inserts are checked against the new bound."""
    ok(rest("collections/create", {"collectionName": "grow", "dimension": DIM}))
    try:
        old = {"collectionName": "grow", "data": [{"id": 1, "vector": vector(1)}]}
        ok(rest("entities/insert", old))
        field = {
            "fieldName": "tag",
            "dataType": "VarChar",
            "nullable": True,
            "elementTypeParams": {"max_length": 4},
        }
        ok(rest("collections/fields/add", {"collectionName": "grow", "schema": field}))
        described = {f["name"]: f for f in client.describe_collection("grow")["fields"]}
        assert described["tag"]["params"]["max_length"] == 4
        assert described["tag"]["nullable"] is True
        long_tag = {
            "collectionName": "grow",
            "data": [{"id": 2, "vector": vector(2), "tag": "longer"}],
        }
        assert rest("entities/insert", long_tag)["code"] != 0
        widen = {"collectionName": "grow", "fieldName": "tag", "fieldParams": {"max_length": 16}}
        ok(rest("collections/fields/alter_properties", widen))
        ok(rest("entities/insert", long_tag))
        query = {
            "collectionName": "grow",
            "filter": "id in [1, 2]",
            "outputFields": ["tag"],
            "consistencyLevel": "Strong",
        }
        rows = sorted(ok(rest("entities/query", query)), key=lambda r: r["id"])
        assert [(r["id"], r["tag"]) for r in rows] == [(1, None), (2, "longer")]
        not_nullable = {"collectionName": "grow", "schema": {"fieldName": "n", "dataType": "Int64"}}
        assert rest("collections/fields/add", not_nullable)["code"] != 0
        pk = {"collectionName": "grow", "fieldName": "id", "fieldParams": {"max_length": 9}}
        assert rest("collections/fields/alter_properties", pk)["code"] != 0
    finally:
        client.drop_collection("grow")


def test_int64_as_strings_on_request(rest):
    ok(rest("collections/create", {"collectionName": "js", "dimension": DIM}))
    rows = [{"id": 2**60 + 1, "vector": vector(1)}]
    reply = rest(
        "entities/insert",
        {"collectionName": "js", "data": rows},
        headers={"Accept-Type-Allow-Int64": "false"},
    )
    assert ok(reply)["insertIds"] == [str(2**60 + 1)]
    body = {"collectionName": "js", "id": 2**60 + 1, "consistencyLevel": "Strong"}
    got = ok(rest("entities/get", body, headers={"Request-Timeout": "5"}))
    assert got[0]["id"] == 2**60 + 1  # numbers again without the header


@pytest.mark.parametrize(
    ("path", "body", "code"),
    [
        ("collections/describe", {}, 1802),  # collectionName missing
        ("collections/describe", {"collectionName": 7}, 1801),  # wrong type
        ("collections/describe", {"collectionName": "nope"}, 100),
        ("collections/create", {"collectionName": "bad", "dimension": 0}, 1100),
        (
            "collections/create",
            {
                "collectionName": "bad",
                "schema": {"fields": [{"fieldName": "id", "dataType": "int64", "isPrimary": True}]},
            },
            1100,
        ),
        ("entities/insert", {"collectionName": "errs", "data": [{"id": 1, "vector": [1.0]}]}, 1804),
        (
            "entities/insert",
            {"collectionName": "errs", "data": [{"id": "x", "vector": [0] * DIM}]},
            1804,
        ),
        ("entities/insert", {"collectionName": "errs", "data": [{"vector": [0] * DIM}]}, 1804),
        (
            "entities/insert",
            {"collectionName": "errs", "data": [{"id": 1, "vector": [0] * DIM, "extra": 1}]},
            1804,
        ),
        ("entities/search", {"collectionName": "errs", "data": [[1.0, 2.0]]}, 1801),
        (
            "entities/search",
            {"collectionName": "errs", "data": [[0.0] * DIM], "consistencyLevel": "Sometimes"},
            1100,
        ),
        ("entities/get", {"collectionName": "errs", "id": "text"}, 1806),
        ("entities/query", {"collectionName": "errs", "filter": "id >"}, 1100),
    ],
)
def test_bad_requests_get_milvus_codes(rest, path, body, code):
    if not _exists(rest, "errs"):
        ok(
            rest(
                "collections/create",
                {
                    "collectionName": "errs",
                    "dimension": DIM,
                    "params": {"enableDynamicField": False},
                },
            )
        )
    reply = rest(path, body)
    assert reply["code"] == code, reply
    assert reply["message"] and "Traceback" not in reply["message"]


def _exists(rest, name: str) -> bool:
    return ok(rest("collections/has", {"collectionName": name}))["has"]


def test_malformed_http(rest):
    session, base = rest.session, rest.base
    reply = session.post(f"{base}/collections/list", data=b"{not json", timeout=10)
    assert reply.status_code == 200 and reply.json()["code"] == 1801
    reply = session.post(f"{base}/collections/list", data=b"[1, 2]", timeout=10)
    assert reply.json()["code"] == 1801
    reply = session.post(f"{base}/collections/nope", json={}, timeout=10)
    assert reply.status_code == 404 and reply.json()["code"] != 0
    reply = session.get(f"{base}/collections/list", timeout=10)
    assert reply.status_code == 405 and reply.json()["code"] != 0


def test_pymilvus_schema_reads_over_rest(rest, client):
    """A collection made with pymilvus (nullable-free, two scalar types) described over REST."""
    schema = client.create_schema(auto_id=True)
    schema.add_field("pk", DataType.INT64, is_primary=True)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=DIM)
    client.create_collection("from_sdk", schema=schema)
    described = ok(rest("collections/describe", {"collectionName": "from_sdk"}))
    assert described["autoId"] is True and described["load"] == "LoadStateNotLoad"
    assert described["fields"][1]["params"] == [{"key": "dim", "value": str(DIM)}]
    inserted = ok(
        rest(
            "entities/insert",
            {"collectionName": "from_sdk", "data": [{"v": vector(0)}, {"v": vector(1)}]},
        )
    )
    assert inserted["insertCount"] == 2 and len(set(inserted["insertIds"])) == 2
    reply = rest(
        "entities/insert", {"collectionName": "from_sdk", "data": [{"pk": 5, "v": vector(0)}]}
    )
    assert reply["code"] == 1804


def _doc_examples() -> list[tuple[str, object]]:
    """(curl command, the reply documented under it or None) of docs/rest.md's examples."""
    text = (REPO / "docs" / "rest.md").read_text()
    examples: list[tuple[str, object]] = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        command, reply = [], []
        for line in [*block.splitlines(), "curl"]:
            if line.startswith("#"):
                reply.append(line[1:])
                continue
            if line.startswith("curl") and command:
                examples.append((" ".join(command), json.loads("".join(reply)) if reply else None))
                command, reply = [], []
            command.append(line.strip())
    return [(c, r) for c, r in examples if c != "curl"]


def test_documented_curl_examples_answer_as_documented(standalone):
    port = standalone.config.service.http_port
    examples = _doc_examples()
    assert len(examples) >= 10
    for command, documented in examples:
        argv = shlex.split(command.replace("localhost:19121", f"127.0.0.1:{port}"))
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
        reply = json.loads(done.stdout)
        assert reply["code"] == 0, (command, reply)
        if documented is not None:
            assert reply == documented, command
