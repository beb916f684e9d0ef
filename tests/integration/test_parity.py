"""Result parity with milvus-lite (a real Milvus-API server) as the oracle: the same random
inserts, deletes and upserts applied to both, then the same searches and queries."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from pymilvus import DataType, MilvusClient

DIM = 24
FILTERS = [
    "",
    "cat in [1, 3]",
    "score > 0.5 and cat != 2",
    'tag like "t1%" or cat == 0',
    "not (score < 0.2)",
]


def create(client: MilvusClient, name: str) -> None:
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("cat", DataType.INT64)
    schema.add_field("score", DataType.DOUBLE)
    schema.add_field("tag", DataType.VARCHAR, max_length=32)
    index = client.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")


def random_rows(rng: np.random.Generator, ids: np.ndarray) -> list[dict]:
    vectors = rng.standard_normal((len(ids), DIM)).astype(np.float32)
    return [
        {
            "id": int(i),
            "vec": v.tolist(),
            "cat": int(rng.integers(0, 4)),
            "score": float(rng.random()),
            "tag": f"t{int(rng.integers(0, 30))}",
        }
        for i, v in zip(ids, vectors, strict=True)
    ]


def test_same_operations_same_results(pair):
    name = f"parity_{uuid.uuid4().hex[:6]}"
    for client in pair:
        create(client, name)
    rng = np.random.default_rng(42)
    next_id = 0
    for step in range(12):
        op = step % 4
        if op in (0, 1):  # insert a batch
            rows = random_rows(rng, np.arange(next_id, next_id + 400))
            next_id += 400
            for client in pair:
                client.insert(name, rows)
        elif op == 2:  # delete by ids, and by expression
            victims = rng.choice(next_id, size=60, replace=False).tolist()
            for client in pair:
                client.delete(name, ids=victims)
                client.delete(name, filter=f"cat == 2 and score < 0.1 and id < {next_id // 2}")
        else:  # upsert: rewrite existing keys and add new ones
            ids = np.concatenate(
                [rng.choice(next_id, size=80, replace=False), np.arange(next_id, next_id + 20)]
            )
            next_id += 20
            rows = random_rows(rng, ids)
            for client in pair:
                client.upsert(name, rows)

    count = [c.query(name, filter="", output_fields=["count(*)"])[0]["count(*)"] for c in pair]
    assert count[0] == count[1] > 0

    queries = rng.standard_normal((8, DIM)).astype(np.float32).tolist()
    for expr in FILTERS:
        got = [c.search(name, queries, limit=15, filter=expr, output_fields=["cat"]) for c in pair]
        for ours_hits, lite_hits in zip(*got, strict=True):
            assert [h["id"] for h in ours_hits] == [h["id"] for h in lite_hits], expr
            np.testing.assert_allclose(
                [h["distance"] for h in ours_hits],
                [h["distance"] for h in lite_hits],
                atol=1e-4,
                rtol=1e-5,
            )
            assert [h["entity"]["cat"] for h in ours_hits] == [
                h["entity"]["cat"] for h in lite_hits
            ]
        if expr:
            rows = [
                sorted(
                    c.query(name, filter=expr, output_fields=["cat", "score", "tag"]),
                    key=lambda r: r["id"],
                )
                for c in pair
            ]
            assert len(rows[0]) == len(rows[1])
            for a, b in zip(*rows, strict=True):
                assert (a["id"], a["cat"], a["tag"]) == (b["id"], b["cat"], b["tag"])
                assert a["score"] == pytest.approx(b["score"])
    for client in pair:
        client.drop_collection(name)
