"""Schema features through unmodified pymilvus: a partition key is kept, reported and
filtered on. Nullable fields and default values: ``test_nullable.py``."""

from __future__ import annotations

import uuid

import pytest
from pymilvus import DataType, MilvusClient, MilvusException

DIM = 4


def _schema(client: MilvusClient):
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    return schema


def test_a_partition_key_is_kept_reported_and_filtered_on(client):
    name = f"pkey_{uuid.uuid4().hex[:6]}"
    schema = _schema(client)
    schema.add_field("tenant", DataType.VARCHAR, max_length=16, is_partition_key=True)
    index = client.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    client.create_collection(name, schema=schema, index_params=index)
    try:
        rows = [{"id": i, "vec": [float(i)] * DIM, "tenant": f"t{i % 3}"} for i in range(30)]
        client.insert(name, rows)
        fields = {f["name"]: f for f in client.describe_collection(name)["fields"]}
        assert fields["tenant"].get("is_partition_key") is True
        hits = client.search(
            name, [[1.0] * DIM], limit=30, filter='tenant == "t1"', consistency_level="Strong"
        )[0]
        assert sorted(h["id"] for h in hits) == list(range(1, 30, 3))
        with pytest.raises(MilvusException, match="partition key mode"):
            client.create_partition(name, "p1")
    finally:
        client.drop_collection(name)
