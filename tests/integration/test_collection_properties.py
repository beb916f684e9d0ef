"""Collection properties through unmodified pymilvus: set at create, altered and dropped,
described; ``collection.ttl.seconds`` makes rows older than it unreadable (growing rows and
rows flushed to S3 alike)."""

from __future__ import annotations

import time
import uuid

import pytest
from pymilvus import MilvusException

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
