"""The proxy's insert task: rows split to shard messages, and a one-shard request's columns
travel as views, not copies."""

from types import SimpleNamespace

import numpy as np
import pytest
from pymilvus.grpc_gen import schema_pb2

from vectide.services.common.hashing import shard_of
from vectide.services.common.msgstream.message import DataType, DeleteMsg, FieldColumn, InsertMsg
from vectide.services.proxy import convert, dml


def collection(shards: int) -> SimpleNamespace:
    proto = schema_pb2.CollectionSchema(name="c")
    proto.fields.add(name="id", data_type=DataType.INT64, is_primary_key=True)
    vec = proto.fields.add(name="v", data_type=DataType.FLOAT_VECTOR)
    vec.type_params.add(key="dim", value="4")
    schema = convert.schema_from_proto(proto.SerializeToString(), "c")
    vchannels = [f"dml_{i}_1v{i}" for i in range(shards)]
    return SimpleNamespace(schema=schema, shards_num=shards, vchannels=vchannels, collection_id=1)


def run(info: SimpleNamespace, rows: int, upsert: bool = False) -> list:
    written: list = []
    proxy = SimpleNamespace(
        partition_id=lambda info, name: 7,
        server_id=3,
        datacoord=None,
        writer=SimpleNamespace(write=written.extend),
    )
    vec = info.schema.field("v")
    columns = {
        "id": FieldColumn(100, "id", DataType.INT64, np.arange(rows, dtype=np.int64) * 7),
        "v": FieldColumn(vec.field_id, "v", DataType.FLOAT_VECTOR, np.random.rand(rows, 4), 4),
    }
    columns["v"].data = columns["v"].data.astype(np.float32)
    task = dml.InsertTask(proxy, info, "", columns, rows, upsert=upsert)
    task.pre_execute()
    task.ts = 99
    task.execute()
    return [(channel, msg, columns["v"].data) for channel, msg in written]


def test_a_one_shard_request_travels_as_views_of_its_columns():
    written = run(collection(1), 50)
    assert len(written) == 1
    _, msg, vectors = written[0]
    assert isinstance(msg, InsertMsg) and msg.num_rows == 50
    assert np.shares_memory(msg.fields[0].data, vectors)
    np.testing.assert_array_equal(msg.pks, np.arange(50) * 7)


@pytest.mark.parametrize("upsert", [False, True])
def test_rows_go_to_the_shard_of_their_key_once(upsert):
    info = collection(3)
    written = run(info, 200, upsert=upsert)
    inserts = [m for _, m, _ in written if isinstance(m, InsertMsg)]
    vectors = written[0][2]
    seen = np.concatenate([m.pks for m in inserts])
    assert sorted(seen.tolist()) == (np.arange(200) * 7).tolist()
    for msg in inserts:
        shard = info.vchannels.index(msg.shard)
        assert (shard_of(msg.pks, 3) == shard).all()
        np.testing.assert_array_equal(msg.fields[0].data, vectors[msg.pks // 7])
    deletes = [m for _, m, _ in written if isinstance(m, DeleteMsg)]
    assert len(deletes) == (len(inserts) if upsert else 0)


def test_a_large_one_shard_request_is_cut_into_message_sized_ranges(monkeypatch):
    monkeypatch.setattr(dml, "MAX_MSG_BYTES", 16 * 30)  # 30 rows of 16 vector bytes
    written = run(collection(1), 100)
    sizes = [m.num_rows for _, m, _ in written]
    assert sum(sizes) == 100 and max(sizes) < 100
    np.testing.assert_array_equal(
        np.concatenate([m.pks for _, m, _ in written]), np.arange(100) * 7
    )
