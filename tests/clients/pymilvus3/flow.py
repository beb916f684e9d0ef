"""pymilvus 3 (unmodified, what ``pip install pymilvus`` gives) against a Vectide standalone:
the common Milvus 2.6 workflows, and its ORDER BY. Prints one JSON object of what it
observed; the test (tests/integration/test_pymilvus3.py) checks it.

Usage: flow.py URI COLLECTION
"""

from __future__ import annotations

import json
import logging
import sys

import numpy as np
from pymilvus import AnnSearchRequest, DataType, MilvusClient, MilvusException, RRFRanker

DIM = 8
ROWS = 400


class Warnings(logging.Handler):
    """pymilvus's own warnings (an iterator falling back to a client-side stamp, ...)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def create(client: MilvusClient, name: str) -> None:
    schema = client.create_schema(enable_dynamic_field=True)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("w", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("title", DataType.VARCHAR, max_length=32, nullable=True)
    schema.add_field("n", DataType.INT64, default_value=7)
    schema.add_field("tags", DataType.ARRAY, element_type=DataType.INT64, max_capacity=4)
    index = client.prepare_index_params()
    index.add_index("v", index_type="HNSW", metric_type="L2", params={"M": 8, "efConstruction": 32})
    index.add_index("w", index_type="IVF_FLAT", metric_type="L2", params={"nlist": 8})
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")


def pages(iterator) -> list[int]:
    keys: list[int] = []
    while page := iterator.next():
        keys += [row.get("id", row.get("pk")) for row in page]
    iterator.close()
    return keys


def main(uri: str, name: str) -> None:
    warned = Warnings()
    logging.getLogger("pymilvus").addHandler(warned)
    client = MilvusClient(uri)
    create(client, name)
    rng = np.random.default_rng(0)
    vectors = rng.random((ROWS, 2, DIM)).astype(np.float32)
    rows = [
        {
            "id": i,
            "v": vectors[i, 0].tolist(),
            "w": vectors[i, 1].tolist(),
            "title": None if i % 5 == 0 else f"t{i}",
            "n": None if i % 3 else i,
            "tags": [i, i + 1],
            "extra": i * 2,
        }
        for i in range(ROWS)
    ]
    out: dict = {"version": __import__("pymilvus").__version__}
    out["inserted"] = client.insert(name, rows)["insert_count"]
    client.upsert(name, [{**rows[1], "title": "up"}])
    out["count"] = client.query(name, output_fields=["count(*)"])[0]["count(*)"]
    out["queried"] = client.query(
        name, filter="n > 100 and n < 110", output_fields=["title", "n", "extra", "tags"]
    )
    out["got"] = client.get(name, ids=[1, 5], output_fields=["title", "n"])
    query = vectors[42, 0].tolist()
    hits = client.search(
        name, [query], anns_field="v", limit=3, filter="title is not null", output_fields=["extra"]
    )[0]
    out["searched"] = [(h["id"], h["entity"]["extra"]) for h in hits]
    grouped = client.search(name, [query], anns_field="v", limit=3, group_by_field="n")[0]
    out["groups"] = len({client.get(name, ids=[h["id"]])[0]["n"] for h in grouped})
    ranged = client.search(
        name, [query], anns_field="v", limit=50, search_params={"params": {"radius": 0.5}}
    )[0]
    out["ranged"] = max(h["distance"] for h in ranged) < 0.5
    subs = [
        AnnSearchRequest([query], "v", {"metric_type": "L2"}, 5),
        AnnSearchRequest([vectors[42, 1].tolist()], "w", {"metric_type": "L2"}, 5),
    ]
    out["hybrid"] = client.hybrid_search(name, subs, RRFRanker(), limit=1)[0][0]["id"]
    out["search_iterator"] = len(
        pages(client.search_iterator(name, [query], anns_field="v", batch_size=50, limit=120))
    )
    out["query_iterator"] = sorted(
        pages(client.query_iterator(name, batch_size=64, filter="id >= 0", output_fields=["id"]))
    ) == list(range(ROWS))
    client.create_partition(name, "p1")
    client.insert(name, [{**rows[2], "id": 10_000}], partition_name="p1")
    out["partition"] = [r["id"] for r in client.query(name, "id > 0", partition_names=["p1"])]
    client.delete(name, filter="id < 10")
    out["after_delete"] = client.query(name, output_fields=["count(*)"])[0]["count(*)"]
    client.flush(name)
    client.release_collection(name)
    client.load_collection(name)
    out["loaded"] = str(client.get_load_state(name)["state"])
    out["after_reload"] = client.search(name, [query], anns_field="v", limit=1)[0][0]["id"]
    client.add_collection_field(name, "later", DataType.INT64, nullable=True)
    out["added"] = client.query(name, "id == 42", output_fields=["later"])[0]["later"]
    ordered = client.query(
        name,
        "id > 10 and id < 40",
        limit=3,
        offset=4,
        output_fields=["title"],
        order_by_fields=[{"field": "title", "order": "desc"}, {"field": "id"}],
    )
    out["order_by"] = [r["id"] for r in ordered]
    hits = client.search(
        name,
        [query],
        anns_field="v",
        limit=5,
        output_fields=["extra"],
        order_by_fields=[{"field": "extra", "order": "desc"}],  # a dynamic key
    )[0]
    out["search_order_by"] = [h["id"] for h in hits]
    grouped_rows = client.query(
        name,
        "id >= 10 and id < 40",
        limit=100,
        group_by_fields=["n"],
        output_fields=["n", "count(*)", "count(title)", "max(title)", "avg(id)"],
    )
    out["group_by_fields"] = [dict(r) for r in grouped_rows]
    out["aggregated"] = dict(
        client.query(name, "id < 40", output_fields=["count(title)", "sum(id)"])[0]
    )
    try:
        client.search(name, [query], anns_field="v", limit=3, group_by_fields=["n", "title"])
        out["search_group_by_fields"] = "answered"
    except MilvusException as exc:
        out["search_group_by_fields"] = exc.message
    client.drop_collection(name)
    out["warnings"] = warned.messages
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
