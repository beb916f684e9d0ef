"""DropPartition on the query node: the partition's rows vanish from reads at the drop's
stamp, growing and sealed alike, and its sealed segments are unloaded once tsafe passed."""

from __future__ import annotations

import numpy as np

from tests.fakes import DictStore
from tests.unit.test_querynode import DIM, VCH, collection, insert, pack, persisted, query
from vectide.services.common.msgstream.message import CollectionDDLMsg, DDLOp
from vectide.services.querynode.core import QueryNode


def drop(partition_id: int, ts: int) -> CollectionDDLMsg:
    return CollectionDDLMsg(ts, ts, 0, DDLOp.DROP_PARTITION, 7, "c", partition_id, "p")


def test_a_dropped_partition_is_hidden_at_its_stamp_and_its_segments_freed():
    store = DictStore()
    node = QueryNode(1, chunk_rows=256, binlogs=store)
    node.watch(collection(), VCH)
    vectors = np.eye(DIM, dtype=np.float32)
    kept = insert([1, 2], 5, vectors[:2])  # partition 1
    doomed = insert([3, 4], 5, vectors[2:4])
    doomed.partition_id, doomed.segment_id = 2, 9
    growing = insert([5], 6, vectors[4:5])
    growing.partition_id, growing.segment_id = 2, 10
    node.apply(VCH, pack(0, 10, kept, doomed, growing))
    assert node.load_segment(VCH, persisted([doomed], store))
    assert node.sealed_segments(VCH) == [9] and query(node, 10) == [1, 2, 3, 4, 5]

    node.apply(VCH, pack(10, 20, drop(2, 15)))
    assert query(node, 20) == [1, 2]  # growing row 5 and sealed rows 3, 4 are gone
    assert node.sealed_segments(VCH) == []  # tsafe 20 passed the drop: unloaded
    shard = node._shards[VCH]
    assert shard.store.candidates(14).mask.sum() == 3  # before the drop's stamp: visible
    assert shard.store.candidates(15).mask.sum() == 2
    # the data node flushed the partition's last rows: handoff refuses them
    late = insert([6], 7, vectors[5:6])
    late.partition_id, late.segment_id = 2, 11
    assert not node.load_segment(VCH, persisted([late], store))
    assert node.sealed_segments(VCH) == [] and query(node, 20) == [1, 2]


def test_a_drop_of_another_collection_or_partition_hides_nothing():
    node = QueryNode(1, chunk_rows=256)
    node.watch(collection(), VCH)
    node.apply(VCH, pack(0, 10, insert([1, 2, 3], 5, np.ones((3, DIM), np.float32))))
    other = drop(1, 15)
    other.collection_id = 8
    node.apply(VCH, pack(10, 20, other, drop(2, 16)))
    assert query(node, 20) == [1, 2, 3]
