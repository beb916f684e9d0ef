"""The query node core without a network: packs in, reads out."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fakes import DictStore
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.msgstream.message import (
    DataType,
    DeleteMsg,
    FieldColumn,
    InsertMsg,
    MsgPack,
)
from vectide.services.common.requests import ShardQueryRequest, ShardSearchRequest
from vectide.services.common.schema import (
    CollectionInfo,
    CollectionSchema,
    ConsistencyLevel,
    FieldSchema,
    IndexInfo,
)
from vectide.services.querynode.core import QueryNode

DIM = 8
VCH = "c-dml_0_7v0"


def collection(index_type: str = "FLAT", metric: str = "L2") -> CollectionInfo:
    schema = CollectionSchema(
        "c",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "vec", DataType.FLOAT_VECTOR, dim=DIM),
            FieldSchema(102, "n", DataType.INT64),
        ],
    )
    index = IndexInfo(1, "vec", "vec", index_type, metric, {"nlist": "16"})
    return CollectionInfo(
        7,
        "c",
        schema,
        1,
        [VCH],
        ["c-dml_0"],
        ConsistencyLevel.STRONG,
        1,
        {"c-dml_0": 0},
        indexes=[index],
    )


def insert(ids, ts, vectors) -> InsertMsg:
    ids = np.asarray(ids, dtype=np.int64)
    return InsertMsg(
        ts,
        ts,
        0,
        7,
        1,
        0,
        VCH,
        ids,
        np.zeros(len(ids), np.int64),
        np.full(len(ids), ts, np.int64),
        [
            FieldColumn(101, "vec", DataType.FLOAT_VECTOR, vectors, DIM),
            FieldColumn(102, "n", DataType.INT64, ids * 10),
        ],
    )


def delete(ids, ts) -> DeleteMsg:
    ids = np.asarray(ids, dtype=np.int64)
    return DeleteMsg(ts, ts, 0, 7, -1, VCH, ids, np.full(len(ids), ts, np.int64))


def pack(begin, end, *msgs) -> MsgPack:
    return MsgPack(begin, end, list(msgs), {})


def query(node, ts, expr="id >= 0", wait=0.2):
    rows = node.query(ShardQueryRequest(7, [VCH], ts, wait, expr=expr, output_fields=["n"]))
    return rows.pks.tolist()


@pytest.fixture
def node():
    n = QueryNode(1, chunk_rows=256)
    n.watch(collection(), VCH)
    return n


def test_reads_wait_for_tsafe_and_see_the_snapshot(node):
    vec = np.eye(DIM, dtype=np.float32)[:3]
    node.apply(VCH, pack(0, 10, insert([1, 2, 3], 5, vec)))
    assert query(node, 10) == [1, 2, 3]
    with pytest.raises(MilvusError) as lag:
        query(node, 20)
    assert lag.value.code == Code.TIMETICK_LAG
    node.apply(VCH, pack(10, 20, delete([2], 15)))
    assert query(node, 20) == [1, 3]


def test_upsert_at_one_stamp_keeps_the_new_row(node):
    vec = np.ones((1, DIM), np.float32)
    node.apply(VCH, pack(0, 10, insert([1], 5, vec)))
    node.apply(VCH, pack(10, 20, delete([1], 12), insert([1], 12, vec * 2)))
    rows = node.query(ShardQueryRequest(7, [VCH], 20, 0.1, expr="id == 1", output_fields=["vec"]))
    assert rows.pks.tolist() == [1]
    np.testing.assert_array_equal(rows.fields["vec"][0], vec[0] * 2)


def test_a_bad_insert_changes_nothing_and_the_shard_keeps_serving(node):
    """Poison on the channel: each bad message is skipped whole (no column takes its rows),
    tsafe moves on, and the rows around it stay aligned."""
    good = np.eye(DIM, dtype=np.float32)[:2]
    wrong_dim = insert([3], 5, np.ones((1, DIM - 1), np.float32))
    missing_field = insert([4], 5, np.ones((1, DIM), np.float32))
    missing_field.fields = missing_field.fields[:1]
    short_pks = insert([5, 6], 5, np.ones((2, DIM), np.float32))
    short_pks.fields[1] = FieldColumn(102, "n", DataType.INT64, np.array([60]))
    not_numbers = insert([7], 5, np.ones((1, DIM), np.float32))
    not_numbers.fields[1] = FieldColumn(102, "n", DataType.INT64, ["x"])
    node.apply(
        VCH,
        pack(0, 10, insert([1], 5, good[:1]), wrong_dim, missing_field, short_pks, not_numbers),
    )
    node.apply(VCH, pack(10, 20, insert([2], 15, good[1:])))
    store = node._shards[VCH].store
    assert store.num_rows == 2 and len(store.column("n")) == 2 and len(store.pks()) == 2
    assert node.skipped_messages == 4  # /metrics: vectide_querynode_skipped_messages
    rows = node.query(ShardQueryRequest(7, [VCH], 20, 0.1, expr="id >= 0", output_fields=["n"]))
    assert rows.pks.tolist() == [1, 2] and rows.fields["n"].tolist() == [10, 20]
    hits = node.search(ShardSearchRequest(7, [VCH], "vec", good[1:], "L2", 1, 1, 0.1))
    assert hits.pks.tolist() == [2]


def test_messages_of_other_shards_are_ignored(node):
    other = insert([9], 5, np.ones((1, DIM), np.float32))
    other.shard = "c-dml_0_8v0"
    node.apply(VCH, pack(0, 10, other))
    assert query(node, 10) == []


def test_unknown_shard_and_bad_expression_are_clear_errors(node):
    with pytest.raises(MilvusError, match="does not serve"):
        node.query(ShardQueryRequest(7, ["nope"], 1, 0.1))
    node.apply(VCH, pack(0, 10))
    with pytest.raises(MilvusError, match="in expression"):
        query(node, 10, expr="id >")


@pytest.mark.parametrize(
    ("index_type", "metric"), [("HNSW", "L2"), ("IVF_FLAT", "IP"), ("HNSW", "COSINE")]
)
def test_interim_index_recall_against_brute_force(index_type, metric):
    node = QueryNode(1, chunk_rows=1000)
    node.watch(collection(index_type, metric), VCH)
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((3500, DIM)).astype(np.float32)
    node.apply(VCH, pack(0, 10, insert(np.arange(3500), 5, vectors)))
    assert node.build_pending_indexes() == 1
    while node.build_pending_indexes():
        pass
    assert node._shards[VCH].store.indexes["vec"].indexed_rows == 3000
    queries = rng.standard_normal((50, DIM)).astype(np.float32)
    hits = node.search(
        ShardSearchRequest(
            7, [VCH], "vec", queries, metric, 10, 10, 0.1, search_params={"ef": 64, "nprobe": 8}
        )
    )
    if metric == "COSINE":
        base = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        scores = queries @ base.T
    elif metric == "IP":
        scores = queries @ vectors.T
    else:
        scores = -((queries[:, None, :] - vectors[None]) ** 2).sum(-1)
    truth = np.argsort(-scores, axis=1)[:, :10]
    found = np.asarray(hits.pks).reshape(50, 10)
    recall = np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth, strict=True)])
    assert recall >= 0.95, recall


def test_deleted_rows_never_come_back_from_an_indexed_chunk():
    node = QueryNode(1, chunk_rows=100)
    node.watch(collection("HNSW", "L2"), VCH)
    vectors = np.random.default_rng(1).standard_normal((200, DIM)).astype(np.float32)
    node.apply(VCH, pack(0, 10, insert(np.arange(200), 5, vectors)))
    node.apply(VCH, pack(10, 20, delete(np.arange(0, 200, 2), 15)))
    node.build_pending_indexes()
    node.build_pending_indexes()
    hits = node.search(ShardSearchRequest(7, [VCH], "vec", vectors[:20], "L2", 5, 20, 0.1))
    assert all(pk % 2 == 1 for pk in np.asarray(hits.pks).tolist())
    assert hits.counts == [5] * 20


def persisted(msgs, store, state="Flushed"):
    """Write ``msgs`` as the data node would and describe the segment as datacoord would."""
    from vectide.services.common.msgstream import codec
    from vectide.services.common.segment import SegmentInfo, SegmentState
    from vectide.streaming.flush import Record, process_batch

    report, _ = process_batch(
        [Record("c-dml_0", i, codec.encode(m)) for i, m in enumerate(msgs)], store
    )
    [(segment_id, coll, part, vchannel, entry, start)] = report.binlogs
    return SegmentInfo(
        segment_id,
        coll,
        part,
        vchannel,
        SegmentState(state),
        binlogs={entry.log_id: entry},
        start_position=start,
    )


def test_handoff_swaps_growing_rows_for_the_sealed_copy_without_gaps_or_duplicates():
    store = DictStore()
    node = QueryNode(1, chunk_rows=256, binlogs=store)
    node.watch(collection(), VCH)
    vectors = np.random.default_rng(2).standard_normal((50, DIM)).astype(np.float32)
    first = insert(np.arange(50), 5, vectors)
    first.segment_id = 9
    node.apply(VCH, pack(0, 10, first))
    node.apply(VCH, pack(10, 20, delete([3, 4], 15)))
    segment = persisted([first], store)
    before = query(node, 20)
    assert node.load_segment(VCH, segment)
    assert not node.load_segment(VCH, segment)  # idempotent
    assert query(node, 20) == before == [i for i in range(50) if i not in (3, 4)]
    assert node.sealed_segments(VCH) == [9]
    # later deletes reach the sealed copy; a late replay of the segment's insert is skipped
    node.apply(VCH, pack(20, 30, delete([5], 25), first))
    assert query(node, 30) == [i for i in range(50) if i not in (3, 4, 5)]
    hits = node.search(ShardSearchRequest(7, [VCH], "vec", vectors[:3], "L2", 2, 30, 0.1))
    assert np.asarray(hits.pks).reshape(3, 2)[:, 0].tolist() == [0, 1, 2]


def test_sealed_search_sees_each_snapshot_while_deletes_arrive():
    """Searches of a sealed segment reuse the rows a snapshot sees; a later delete hides
    its row from later snapshots only, and the growing rows beside it are searched too."""
    store = DictStore()
    node = QueryNode(1, chunk_rows=256, binlogs=store)
    node.watch(collection("HNSW"), VCH)
    vectors = np.random.default_rng(3).standard_normal((60, DIM)).astype(np.float32)
    sealed = insert(np.arange(40), 5, vectors[:40])
    sealed.segment_id = 9
    node.apply(VCH, pack(0, 10, sealed))
    assert node.load_segment(VCH, persisted([sealed], store))

    def nearest(ts: int, travel: int = 0) -> list[int]:
        req = ShardSearchRequest(7, [VCH], "vec", vectors[:3], "L2", 1, ts, 0.1)
        req.travel_ts = travel
        return np.asarray(node.search(req).pks).tolist()

    assert nearest(10) == nearest(10) == [0, 1, 2]
    node.apply(VCH, pack(10, 20, delete([1], 15)))
    after = nearest(20)
    assert after == nearest(20) and after[0::2] == [0, 2] and after[1] != 1
    assert nearest(20, travel=12) == [0, 1, 2]  # the older snapshot still has row 1
    node.apply(VCH, pack(20, 30, insert([100], 25, vectors[2:3] + 1e-4)))
    hits = node.search(ShardSearchRequest(7, [VCH], "vec", vectors[2:3], "L2", 2, 30, 0.1))
    assert sorted(np.asarray(hits.pks).tolist()) == [2, 100]


def test_loading_from_a_plan_uses_binlogs_deltalogs_and_replays_the_rest():
    from vectide.services.common import binlog
    from vectide.services.common.segment import Deltalog, LoadPlan

    store = DictStore()
    vectors = np.eye(DIM, dtype=np.float32)
    old = insert([1, 2, 3], 5, vectors[:3])
    old.segment_id = 9
    segment = persisted([old], store)
    store.put("delta", binlog.encode_deltas(np.array([2, 7]), np.array([8, 8])))
    plan = LoadPlan([segment], [Deltalog(VCH, "d", "delta", 2, 8)], replay_offset=0)
    node = QueryNode(1, binlogs=store)
    node.watch(collection(), VCH, plan)
    late = insert([7, 8], 6, vectors[3:5])  # replayed: 7 was deleted at 8 in the deltalog
    late.segment_id = 10
    node.apply(VCH, pack(0, 10, old, late))  # old's insert is skipped: it is sealed
    assert query(node, 10) == [1, 3, 8]


def test_scalar_indexes_follow_inserts_handoff_and_deletes():
    """Growing chunks are indexed by the builder, the handed-off segment as it loads; reads
    through the indexes see deletes before and after the swap, and an index created after
    the load is built on the first read naming it."""
    store = DictStore()
    info = collection()
    info.indexes.append(IndexInfo(2, "id", "id", "STL_SORT", ""))
    node = QueryNode(1, chunk_rows=64, binlogs=store)
    node.watch(info, VCH)
    vectors = np.random.default_rng(3).standard_normal((200, DIM)).astype(np.float32)
    first = insert(np.arange(200), 5, vectors)
    first.segment_id = 9
    node.apply(VCH, pack(0, 10, first, delete([3, 150], 8)))
    assert [node.build_pending_indexes() for _ in range(4)] == [1, 1, 1, 0]  # a chunk a round
    assert node._shard(VCH).store.scalar_views()["id"].covered == 192
    expected = [i for i in range(10, 180) if i not in (150,)]
    assert query(node, 10, "id >= 10 and id < 180") == expected
    node.load_segment(VCH, persisted([first], store))
    shard = node._shard(VCH)
    sealed = shard.sealed[9]
    assert sealed.scalar_views()["id"].covered == 200
    assert shard.store.scalar_views() == {}  # the growing chunks left with their rows
    node.apply(VCH, pack(10, 20, delete([11], 15)))
    assert query(node, 20, "id >= 10 and id < 180") == [i for i in expected if i != 11]
    request = ShardQueryRequest(
        7, [VCH], 20, 0.2, expr="n == 40", scalar_indexes={"id": "STL_SORT", "n": "INVERTED"}
    )
    assert node.query(request).pks.tolist() == [4]
    assert sealed.scalar_views()["n"].covered == 200
