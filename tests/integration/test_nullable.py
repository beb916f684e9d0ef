"""Nullable fields and default values through unmodified pymilvus, with milvus-lite (a real
Milvus-API server) as the oracle: rows with None and missing values, query and search
outputs, ``is null`` filters and null-aware logic, upsert, then flush and reload (release +
load) so the values come back from the data node's binlogs on S3."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
import requests
from pymilvus import DataType, MilvusClient, MilvusException
from pymilvus.grpc_gen.common_pb2 import SegmentState

from tests.integration.conftest import free_port, isolated
from tests.integration.test_persistence import Persistent
from vectide.services.common import binlog
from vectide.services.common.msgstream.message import DataType as Dt
from vectide.services.common.objectstore import ObjectStore

DIM = 4
FILTERS = [
    "n is null",
    "n is not null",
    "n > 2",
    "not (n > 2)",
    "not (n > 2 and m > 0)",
    "not (n > 2 or m > 0)",
    "n == m",
    's == "a"',
    "s is null",
    "f < 1.0",
    "b == true",
    "b is null",
    "j is null",
    'j["k"] == 1',
    'not (j["k"] == 1)',
    "d == 1.5",
    'tag == "none"',
    "n in [1, 3]",
    'not (s like "a%")',
]


@pytest.fixture(scope="module")
def deployment(infra):
    config = isolated(infra, "n")
    config.data.trigger_s = 1.0
    config.service.rootcoord_port = free_port()
    holder = Persistent(config)
    holder.start()
    holder.datanode.start()
    try:
        yield holder
    finally:
        holder.stop()
        holder.datanode.stop()


@pytest.fixture(scope="module")
def clients(deployment, tmp_path_factory):
    lite = MilvusClient(str(tmp_path_factory.mktemp("lite") / "oracle.db"))
    yield deployment.client, lite
    lite.close()


def _create(client: MilvusClient, name: str) -> None:
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("n", DataType.INT32, nullable=True)
    schema.add_field("m", DataType.INT64, nullable=True)
    schema.add_field("f", DataType.FLOAT, nullable=True)
    schema.add_field("b", DataType.BOOL, nullable=True)
    schema.add_field("s", DataType.VARCHAR, max_length=16, nullable=True)
    schema.add_field("j", DataType.JSON, nullable=True)
    schema.add_field("d", DataType.DOUBLE, default_value=1.5)
    schema.add_field("tag", DataType.VARCHAR, max_length=8, default_value="none", nullable=True)
    index = client.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")


def _rows(start: int, count: int) -> list[dict]:
    rows = []
    for i in range(start, start + count):
        vec = np.random.default_rng(i).standard_normal(DIM).round(3)  # no ties in a search
        row: dict = {"id": i, "vec": vec.tolist()}
        if i % 3:  # every third row leaves the nullable fields out entirely
            row |= {
                "n": None if i % 4 == 0 else i % 5,
                "m": None if i % 5 == 0 else i % 3,
                "f": None if i % 6 == 0 else (i % 4) * 0.5,
                "b": None if i % 7 == 0 else bool(i % 2),
                "s": None if i % 8 == 0 else ["a", "ab", "b"][i % 3],
                "j": None if i % 9 == 0 else {"k": i % 2},
            }
        if i % 2:
            row["d"] = None if i % 5 == 0 else float(i)
            row["tag"] = None if i % 3 == 0 else f"t{i % 4}"
        rows.append(row)
    return rows


def _query(client: MilvusClient, name: str, expr: str) -> list[dict]:
    rows = client.query(name, filter=expr or "id >= 0", output_fields=["*"])
    return sorted((_plain(r) for r in rows), key=lambda r: r["id"])


def _plain(row: dict) -> dict:
    out = dict(row)
    out["vec"] = [round(float(x), 4) for x in out["vec"]]
    if out.get("f") is not None:
        out["f"] = round(out["f"], 4)
    return out


def _search(client: MilvusClient, name: str, expr: str) -> list[list[tuple]]:
    """Each query's hits as (id, output fields); distances are compared apart, with a
    tolerance (float32 sums differ in the last digit between engines)."""
    results = client.search(
        name,
        [[0.5, -0.2, 0.1, 0.3], [-1.0, 0.4, 0.7, -0.2]],
        limit=10,
        filter=expr,
        output_fields=["n", "s", "j", "d", "tag", "b"],
    )
    return [sorted((h["id"], sorted(h["entity"].items())) for h in hits) for hits in results]


def _distances(client: MilvusClient, name: str) -> list[float]:
    hits = client.search(name, [[0.5, -0.2, 0.1, 0.3]], limit=10)[0]
    return [h["distance"] for h in sorted(hits, key=lambda h: h["id"])]


def _same_everywhere(clients, name: str) -> None:
    ours, lite = clients
    for expr in ["", *FILTERS]:
        assert _query(ours, name, expr) == _query(lite, name, expr), expr
    for expr in ["", "n is null", "s is not null and n > 1"]:
        got, want = _search(ours, name, expr), _search(lite, name, expr)
        assert got == want, (expr, [_diff(g, w) for g, w in zip(got, want, strict=True)])
    assert _distances(ours, name) == pytest.approx(_distances(lite, name), abs=1e-3)


def _diff(got: list, want: list) -> tuple[list, list]:
    """What only Vectide returned, and what only milvus-lite did."""
    return [x for x in got if x not in want], [x for x in want if x not in got]


def _binlog_nulls(config, collection_id: int) -> int:
    """Parquet nulls in the binlogs of field ``n`` (the third field: id 102)."""
    store = ObjectStore(config.s3)
    keys = [k for k in store.list(f"insert_log/{collection_id}/") if "/102/" in k]
    assert keys
    total = 0
    for key in keys:
        _, valid = binlog.read_column(store.get(key), Dt.INT32)
        total += 0 if valid is None else int((~valid).sum())
    return total


def test_nulls_and_defaults_match_milvus_through_flush_and_reload(deployment, clients):
    name = f"nul_{uuid.uuid4().hex[:6]}"
    for client in clients:
        _create(client, name)
        client.insert(name, _rows(0, 60))
    ours, lite = clients
    fields = {f["name"]: f for f in ours.describe_collection(name)["fields"]}
    assert fields["n"].get("nullable") is True
    assert fields["d"]["default_value"].double_data == 1.5
    assert fields["tag"]["default_value"].string_data == "none"
    nulls = ours.query(name, filter="n is null", output_fields=["n", "d"])
    assert nulls and all(r["n"] is None for r in nulls)
    _same_everywhere(clients, name)

    for client in clients:  # an upsert turns values into nulls, defaults and back
        client.upsert(name, [{"id": 1, "vec": [1.0] * DIM, "n": None, "s": "z", "d": None}])
        client.upsert(name, [{"id": 3, "vec": [2.0] * DIM, "n": 4, "m": 1, "tag": None}])
    _same_everywhere(clients, name)

    ours.flush(name)  # sealed segments from S3 binlogs after the reload
    assert _binlog_nulls(deployment.config, ours.describe_collection(name)["collection_id"]) > 10
    ours.insert(name, _rows(60, 20))  # and growing rows beside them
    lite.insert(name, _rows(60, 20))
    ours.release_collection(name)
    ours.load_collection(name)
    sealed = [
        s for s in ours.list_loaded_segments(name) if s.num_rows and s.state == SegmentState.Flushed
    ]
    assert sealed, "the reload serves the flushed rows from a sealed segment"
    _same_everywhere(clients, name)
    assert len(_query(ours, name, "n is null")) > 10


def test_nulls_in_fields_that_are_not_nullable_are_refused(deployment, clients):
    ours, _ = clients
    name = f"nul_{uuid.uuid4().hex[:6]}"
    _create(ours, name)
    ours.insert(name, [{"id": 1, "vec": [0.0] * DIM}])
    schema = ours.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("r", DataType.INT64)
    strict = f"{name}_strict"
    ours.create_collection(strict, schema=schema)
    with pytest.raises(MilvusException, match="r"):
        ours.insert(strict, [{"id": 1, "vec": [0.0] * DIM}])
    bad = ours.create_schema(auto_id=False)
    bad.add_field("id", DataType.INT64, is_primary=True, nullable=True)
    bad.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    with pytest.raises(MilvusException, match="primary key cannot be nullable"):
        ours.create_collection(f"{name}_bad", schema=bad)


def test_rest_creates_inserts_and_reads_nulls_and_defaults(deployment):
    """REST v2 end to end: a nullable field and a default value in ``create``, rows with
    null and left-out values, ``describe``, and a query with ``is null``."""
    base = f"http://127.0.0.1:{deployment.config.service.http_port}/v2/vectordb"

    def post(path: str, body: dict) -> dict:
        reply = requests.post(f"{base}/{path}", json=body, timeout=60).json()
        assert reply["code"] == 0, reply
        return reply.get("data")

    name = f"nul_rest_{uuid.uuid4().hex[:6]}"
    fields = [
        {"fieldName": "id", "dataType": "Int64", "isPrimary": True},
        {"fieldName": "vec", "dataType": "FloatVector", "elementTypeParams": {"dim": DIM}},
        {"fieldName": "n", "dataType": "Int32", "nullable": True},
        {"fieldName": "tag", "dataType": "VarChar", "elementTypeParams": {"max_length": 8},
         "defaultValue": "none"},
    ]  # fmt: skip
    index = [{"fieldName": "vec", "metricType": "L2", "indexType": "FLAT"}]
    post(
        "collections/create",
        {"collectionName": name, "schema": {"fields": fields}, "indexParams": index},
    )
    described = {
        f["name"]: f for f in post("collections/describe", {"collectionName": name})["fields"]
    }
    assert described["n"]["nullable"] is True and described["tag"]["defaultValue"] == "none"
    rows = [
        {"id": 1, "vec": [0.1] * DIM, "n": None, "tag": "a"},
        {"id": 2, "vec": [0.2] * DIM, "n": 5},
        {"id": 3, "vec": [0.3] * DIM, "tag": None},
    ]
    post("entities/insert", {"collectionName": name, "data": rows})
    got = post(
        "entities/query",
        {"collectionName": name, "filter": "n is null or tag == \"none\"",
         "outputFields": ["n", "tag"], "consistencyLevel": "Strong"},
    )  # fmt: skip
    assert sorted((r["id"], r["n"], r["tag"]) for r in got) == [
        (1, None, "a"),
        (2, 5, "none"),
        (3, None, "none"),
    ]
