"""Collection properties through unmodified pymilvus: set at create, altered and dropped,
described; ``collection.ttl.seconds`` makes rows older than it unreadable (growing rows and
rows flushed to S3 alike)."""

from __future__ import annotations

import time
import uuid

import pytest
from pymilvus import DataType, MilvusException

TTL = "collection.ttl.seconds"
DIM = 4


def _rows(keys):
    return [{"id": k, "vector": [float(k)] * DIM} for k in keys]


def _count(client, name) -> int:
    found = client.query(name, output_fields=["count(*)"], consistency_level="Strong")
    return found[0]["count(*)"]


@pytest.fixture
def name(client):
    name = f"props_{uuid.uuid4().hex[:6]}"
    yield name
    client.drop_collection(name)


def test_properties_are_set_altered_dropped_and_described(client, name):
    client.create_collection(name, dimension=DIM, properties={TTL: 3600})
    assert client.describe_collection(name)["properties"] == {TTL: "3600"}
    client.alter_collection_properties(name, {"mmap.enabled": True, TTL: 7200})
    assert client.describe_collection(name)["properties"] == {
        TTL: "7200",
        "mmap.enabled": "True",
    }
    client.drop_collection_properties(name, [TTL])
    assert client.describe_collection(name)["properties"] == {"mmap.enabled": "True"}
    with pytest.raises(MilvusException, match="not a valid positive integer"):
        client.alter_collection_properties(name, {TTL: "a day"})
    assert client.describe_collection(name)["properties"] == {"mmap.enabled": "True"}


def test_rows_past_the_ttl_are_not_read_growing_or_flushed(client, name):
    client.create_collection(name, dimension=DIM, consistency_level="Strong")
    client.alter_collection_properties(name, {TTL: 4})
    written = time.monotonic()
    client.insert(name, _rows(range(3)))
    client.flush(name)  # these three persisted to S3 binlogs, the query node may serve them sealed
    client.insert(name, _rows(range(3, 5)))  # these two stay growing
    assert _count(client, name) == 5
    time.sleep(max(0.0, written + 4.5 - time.monotonic()))
    client.insert(name, _rows(range(10, 12)))
    assert _count(client, name) == 2
    hits = client.search(name, [[0.0] * DIM], limit=10, consistency_level="Strong")[0]
    assert sorted(h["id"] for h in hits) == [10, 11]
    assert [r["id"] for r in client.get(name, ids=[0, 4, 10])] == [10]


def test_a_field_altered_takes_longer_values_and_describes_its_params(client, name):
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("title", DataType.VARCHAR, max_length=8)
    index = client.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    client.create_collection(name, schema=schema, index_params=index)
    row = {"id": 1, "vec": [0.0] * DIM, "title": "a longer title"}
    with pytest.raises(MilvusException, match="max_length"):
        client.insert(name, [row])
    client.alter_collection_field(name, "title", {"max_length": 32, "mmap.enabled": True})
    client.insert(name, [row])
    got = client.query(name, filter="id == 1", output_fields=["title"], consistency_level="Strong")
    assert got[0]["title"] == "a longer title"
    title = next(f for f in client.describe_collection(name)["fields"] if f["name"] == "title")
    assert title["params"] == {"max_length": 32, "mmap_enabled": True}  # as pymilvus shows it
    with pytest.raises(MilvusException, match="applies to VarChar fields"):
        client.alter_collection_field(name, "vec", {"max_length": 32})
