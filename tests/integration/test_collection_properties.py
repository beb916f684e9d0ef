"""Collection properties through unmodified pymilvus: set at create, altered and dropped,
described; ``collection.ttl.seconds`` makes rows older than it unreadable (growing rows and
rows flushed to S3 alike), and so does ``truncate_collection`` for every row before it."""

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


def test_truncate_collection_removes_growing_and_flushed_rows_and_keeps_the_rest(client, name):
    client.create_collection(name, dimension=DIM, consistency_level="Strong")
    client.insert(name, _rows(range(3)))
    client.flush(name)
    client.insert(name, _rows(range(3, 5)))
    assert _count(client, name) == 5
    client.truncate_collection(name)
    assert _count(client, name) == 0
    assert client.get_load_state(name)["state"].name == "Loaded"
    client.insert(name, _rows([1, 9]))
    hits = client.search(name, [[1.0] * DIM], limit=10, consistency_level="Strong")[0]
    assert sorted(h["id"] for h in hits) == [1, 9]


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


def test_a_field_added_to_a_collection_with_rows_reads_as_its_default_or_null(client, name):
    """AddCollectionField: rows flushed to S3 before, rows still growing, rows written after
    (given or left out), all read through pymilvus before and after a flush and reload."""
    client.create_collection(name, dimension=DIM, consistency_level="Strong")
    client.insert(name, _rows(range(3)))
    client.flush(name)  # sealed: binlogs without the new fields
    client.insert(name, _rows(range(3, 5)))  # growing
    client.add_collection_field(name, "score", DataType.INT64, nullable=True, default_value=7)
    client.add_collection_field(name, "note", DataType.VARCHAR, max_length=16, nullable=True)
    fields = {f["name"]: f for f in client.describe_collection(name)["fields"]}
    assert fields["score"]["default_value"].long_data == 7 and fields["note"]["nullable"] is True
    client.insert(name, [{"id": 5, "vector": [5.0] * DIM, "score": 1, "note": "new"}])
    client.insert(name, _rows([6]))  # leaves both out

    def rows() -> dict[int, tuple]:
        got = client.query(name, filter="id >= 0", output_fields=["score", "note"])
        return {r["id"]: (r["score"], r["note"]) for r in got}

    expected = {i: (7, None) for i in (0, 1, 2, 3, 4, 6)} | {5: (1, "new")}
    assert rows() == expected
    assert sorted(r["id"] for r in client.query(name, filter="score == 1")) == [5]
    assert len(client.query(name, filter="note is null")) == 6
    client.flush(name)  # old and new rows in the same binlogs now
    client.release_collection(name)
    client.load_collection(name)  # everything from S3
    assert rows() == expected
    with pytest.raises(MilvusException, match="must be nullable"):
        client.add_collection_field(name, "other", DataType.INT64, nullable=False)
    with pytest.raises(MilvusException, match="duplicate field name score"):
        client.add_collection_field(name, "score", DataType.INT64, nullable=True)
