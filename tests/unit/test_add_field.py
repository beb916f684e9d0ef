"""AddCollectionField: the field joins the schema, and rows written before it read as its
default value or null, wherever they are: growing in a query node, in binlogs the data node
wrote before or beside it, in a compacted segment."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from pymilvus.grpc_gen import milvus_pb2, schema_pb2

from tests.unit.test_nullable import insert_msg
from vectide.services.common.binlog import PK_FIELD
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.msgstream.message import DataType, FieldColumn
from vectide.services.common.schema import CollectionSchema, ConsistencyLevel, FieldSchema
from vectide.services.proxy import convert
from vectide.services.proxy.dql import QuerySpec
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.querynode.segment import ShardStore
from vectide.services.testing import Harness
from vectide.streaming.compaction import _merged
from vectide.streaming.poison import fit_inserts

SCORE = FieldSchema(0, "score", DataType.INT64, nullable=True, default_value=7)
NOTE = FieldSchema(0, "note", DataType.VARCHAR, max_length=8, nullable=True)


def base_schema() -> CollectionSchema:
    return CollectionSchema(
        "c",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "v", DataType.FLOAT_VECTOR, dim=2),
        ],
    )


def vectors(rows: int) -> FieldColumn:
    return FieldColumn(101, "v", DataType.FLOAT_VECTOR, np.ones((rows, 2), np.float32), 2)


def test_a_store_gives_old_rows_the_default_or_null_and_fills_messages_that_lack_it():
    store = ShardStore(base_schema())
    store.insert(insert_msg([vectors(2)], 2))
    store.add_field(FieldSchema(102, "score", DataType.INT64, nullable=True, default_value=7))
    store.add_field(FieldSchema(103, "note", DataType.VARCHAR, max_length=8, nullable=True))
    store.insert(insert_msg([vectors(1)], 1))  # written by a proxy that had not heard yet
    given = [
        vectors(1),
        FieldColumn(102, "score", DataType.INT64, np.array([1])),
        FieldColumn(103, "note", DataType.VARCHAR, ["new"]),
    ]
    store.insert(insert_msg(given, 1))
    rows = np.arange(4)
    assert store.output("score", rows) == [7, 7, 7, 1]
    assert store.output("note", rows) == [None, None, None, "new"]


def test_messages_with_and_without_a_field_are_written_together_not_as_poison():
    old = insert_msg([vectors(2)], 2)
    new = insert_msg([vectors(1), FieldColumn(102, "score", DataType.INT64, np.array([3]))], 1)
    wrong = insert_msg([vectors(1), FieldColumn(102, "score", DataType.VARCHAR, ["x"])], 1)
    keep, skip = fit_inserts([(0, old), (1, new), (2, wrong), (3, new)])
    assert [o for o, _ in keep] == [0, 1, 3]
    assert [o for o, _ in skip] == [2] and "field 102" in skip[0][1]


def test_compaction_gives_parts_without_a_field_nulls():
    before = {str(PK_FIELD): pa.array([1, 2]), "101": pa.array([0.5, 0.5])}
    after = {str(PK_FIELD): pa.array([3]), "101": pa.array([0.5]), "102": pa.array([9])}
    merged = _merged([before, after])
    assert merged["102"].to_pylist() == [None, None, 9]
    assert merged[str(PK_FIELD)].to_pylist() == [1, 2, 3]


def proto_field(**kwargs) -> bytes:
    return schema_pb2.FieldSchema(**kwargs).SerializeToString()


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (dict(name="n", data_type=DataType.INT64), "added field must be nullable"),
        (dict(name="id", data_type=DataType.INT64, nullable=True), "duplicate field name id"),
        (
            dict(name="k", data_type=DataType.INT64, nullable=True, is_partition_key=True),
            "partition key cannot be added",
        ),
        (dict(name="w", data_type=DataType.SPARSE_FLOAT_VECTOR, nullable=True), "sparse vector"),
        (dict(name="s", data_type=DataType.VARCHAR, nullable=True), "max_length in"),
    ],
)
def test_fields_milvus_would_not_add_are_refused(field, message):
    with pytest.raises(MilvusError, match=message):
        convert.added_field(proto_field(**field), base_schema())


def query(h: Harness, *outputs: str) -> dict[int, tuple]:
    spec = QuerySpec(
        collection_name="c",
        expr="id >= 0",
        output_fields=list(outputs),
        use_default_consistency=False,
        consistency_level=ConsistencyLevel.STRONG,
    )
    rows = h.proxy.query(spec)[1]
    values = [rows.fields[name] for name in outputs]
    return {int(pk): tuple(v[i] for v in values) for i, pk in enumerate(rows.pks)}


def insert_with(h: Harness, key: int, **values: object) -> None:
    info = h.proxy.meta.get("c")
    columns = {
        "id": FieldColumn(100, "id", DataType.INT64, np.array([key], np.int64)),
        "vec": FieldColumn(101, "vec", DataType.FLOAT_VECTOR, np.ones((1, 4), np.float32), 4),
    }
    for name, value in values.items():
        f = info.schema.field(name)
        data = [value] if f.data_type == DataType.VARCHAR else np.array([value])
        columns[name] = FieldColumn(f.field_id, name, f.data_type, data)
    h.proxy.insert("c", "", columns, 1)


def test_rows_before_and_after_a_field_was_added_read_alike_growing_and_flushed():
    h = Harness()
    h.create_collection("c")
    h.insert("c", [1, 2])
    h.proxy.flush(["c"])
    h.step()
    h.insert("c", [3])  # growing when the field comes
    h.proxy.add_collection_field("c", SCORE)
    h.proxy.add_collection_field("c", NOTE)
    assert [f.field_id for f in h.proxy.meta.get("c").schema.fields] == [100, 101, 102, 103]
    insert_with(h, 4, score=1, note="new")
    h.insert("c", [5])
    expected = {1: (7, None), 2: (7, None), 3: (7, None), 4: (1, "new"), 5: (7, None)}
    assert query(h, "score", "note") == expected
    h.proxy.flush(["c"])  # one binlog now holds rows with and without the fields
    for _ in range(3):
        h.step()
    [node] = [h.nodes.node(n) for n in h.nodes.live_nodes()]
    [shard] = node._shards.values()
    assert sum(s.num_rows for s in shard.sealed.values()) == 5  # all read from binlogs now
    assert query(h, "score", "note") == expected


def test_an_insert_built_against_the_schema_before_the_field_is_sent_back():
    """pymilvus sends the ``update_timestamp`` of the schema it converted the rows with;
    after AddCollectionField that is older, and the reply makes it describe and retry."""
    h = Harness()
    h.create_collection("c")
    service = MilvusService(h.proxy)
    before = h.proxy.describe_collection("c")
    h.proxy.add_collection_field("c", SCORE)
    after = h.proxy.describe_collection("c")
    assert after.update_ts > before.create_ts
    assert convert.describe_response(after).update_timestamp == after.update_ts
    stale = milvus_pb2.InsertRequest(
        collection_name="c", num_rows=0, schema_timestamp=before.create_ts
    )
    with pytest.raises(MilvusError) as refused:
        service._columns(stale, None)
    assert refused.value.code == Code.COLLECTION_SCHEMA_MISMATCH
    assert refused.value.legacy_code == 62  # common.proto SchemaMismatch: pymilvus retries
    current = milvus_pb2.InsertRequest(collection_name="c", schema_timestamp=after.update_ts)
    assert service._columns(current, None)[0] == "c"


def test_the_query_node_applies_a_field_added_before_the_inserts_of_its_pack():
    """A pack holds the AddCollectionField and inserts stamped after it: the field must
    exist before those are applied, whatever order the pack lists them in."""
    h = Harness()
    h.create_collection("c")
    h.pause_ticks()
    h.proxy.add_collection_field("c", SCORE)
    insert_with(h, 9, score=2)
    h.resume_ticks()
    h.tick()
    h.pump()
    assert query(h, "score") == {9: (2,)}
