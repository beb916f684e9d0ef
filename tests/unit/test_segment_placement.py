"""A shard's sealed segments on other query nodes: the leader forwards deletes and scatters
reads, in one process (the cores without a network)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fakes import DictStore
from tests.unit.test_querynode import DIM, VCH, collection, delete, insert, pack, persisted
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.requests import ShardQueryRequest, ShardSearchRequest
from vectide.services.querynode.core import QueryNode


class Peers:
    """Nodes of this process by id; a node in ``down`` does not answer."""

    def __init__(self) -> None:
        self.nodes: dict[int, QueryNode] = {}
        self.down: set[int] = set()

    def add(self, node: QueryNode) -> QueryNode:
        self.nodes[node.node_id] = node
        node.set_peers(self)
        return node

    def node(self, node_id: int):
        if node_id in self.down:
            raise ConnectionError(f"node {node_id} is gone")
        return self.nodes[node_id]


def ids(node: QueryNode, ts: int, expr: str = "id >= 0") -> list[int]:
    rows = node.query(ShardQueryRequest(7, [VCH], ts, 0.2, expr=expr, output_fields=["n"]))
    assert rows.fields["n"].tolist() == [i * 10 for i in rows.pks.tolist()]
    return rows.pks.tolist()


def count(node: QueryNode, ts: int) -> int:
    return node.query(ShardQueryRequest(7, [VCH], ts, 0.2, count_only=True)).count


@pytest.fixture
def cluster():
    """Leader 1 with 50 growing rows of segment 9 (3 and 4 deleted), nodes 2 and 3 idle."""
    store, peers = DictStore(), Peers()
    leader, two, three = (peers.add(QueryNode(n, binlogs=store)) for n in (1, 2, 3))
    leader.watch(collection(), VCH)
    vectors = np.random.default_rng(2).standard_normal((50, DIM)).astype(np.float32)
    rows = insert(range(50), 5, vectors)
    rows.segment_id = 9
    leader.apply(VCH, pack(0, 10, rows))
    leader.apply(VCH, pack(10, 20, delete([3, 4], 15)))
    return leader, two, three, persisted([rows], store), vectors, peers


def test_a_handed_off_segment_served_by_another_node_reads_the_same(cluster):
    leader, two, _, segment, vectors, _ = cluster
    before = ids(leader, 20)
    assert two.host_segment(collection(), VCH, segment, [])
    assert ids(leader, 20) == before  # hosted, not attached: still the growing rows
    leader.attach_segment(VCH, 9, 2, since_ts=0)  # the deletes at 15 are not persisted
    assert ids(leader, 20) == before == [i for i in range(50) if i not in (3, 4)]
    assert leader.held_segments() == [] and two.held_segments() == [9]
    # a later delete is forwarded before tsafe passes it
    leader.apply(VCH, pack(20, 30, delete([5], 25)))
    assert 5 not in ids(leader, 30)
    assert count(leader, 30) == 47
    hits = leader.search(ShardSearchRequest(7, [VCH], "vec", vectors[:3], "L2", 2, 30, 0.1))
    assert np.asarray(hits.pks).reshape(3, 2)[:, 0].tolist() == [0, 1, 2]
    report = leader.load_report()
    assert report.leading == {VCH: {9: 2}}
    assert report.rows == 0  # every growing row was handed off: freed, node 2 holds them
    assert two.load_report().hosted == {VCH: [9]}
    assert two.load_report().segments_mb[9] == pytest.approx(
        50 * collection().schema.row_bytes() / 2**20
    )


def test_a_segment_moves_between_nodes_and_back_without_a_gap(cluster):
    leader, two, three, segment, _, _ = cluster
    two.host_segment(collection(), VCH, segment, [])
    leader.attach_segment(VCH, 9, 2, since_ts=0)
    leader.apply(VCH, pack(20, 30, delete([5], 25)))
    expected = [i for i in range(50) if i not in (3, 4, 5)]
    # 2 -> 3: loaded there first, announced, then released by 2
    three.host_segment(collection(), VCH, segment, [])
    leader.attach_segment(VCH, 9, 3, since_ts=0)
    assert two.release_hosted(VCH, [9]) == 1
    assert ids(leader, 30) == expected
    # 3 -> the leader itself
    assert leader.load_segment(VCH, segment, [], since_ts=0)
    three.release_hosted(VCH, [9])
    assert ids(leader, 30) == expected and leader.held_segments() == [9]
    assert leader.load_report().leading == {VCH: {9: 1}}


def test_a_read_follows_a_move_that_finished_while_it_ran(cluster):
    leader, two, three, segment, _, peers = cluster
    two.host_segment(collection(), VCH, segment, [])
    three.host_segment(collection(), VCH, segment, [])
    leader.attach_segment(VCH, 9, 2, since_ts=0)
    asked = []

    class Moving:
        """Node 2, finishing a move to 3 just before it answers the read."""

        def __getattr__(self, name):
            return getattr(two, name)

        def query_segments(self, *args):
            asked.append(2)
            leader.attach_segment(VCH, 9, 3, since_ts=0)
            two.release_hosted(VCH, [9])
            return two.query_segments(*args)

    peers.nodes[2] = Moving()
    assert count(leader, 20) == 48
    assert asked == [2]


def test_a_node_that_misses_deletes_has_its_segments_refused_until_placed_again(cluster):
    leader, two, three, segment, _, peers = cluster
    two.host_segment(collection(), VCH, segment, [])
    leader.attach_segment(VCH, 9, 2, since_ts=0)
    peers.down.add(2)
    leader.apply(VCH, pack(20, 30, delete([6], 25)))  # tsafe moves on; the shard does not stop
    assert leader.load_report().lost == [9]
    with pytest.raises(MilvusError) as refused:
        count(leader, 30)
    assert refused.value.code == Code.SERVICE_NOT_READY and "[9]" in refused.value.message
    three.host_segment(collection(), VCH, segment, [])
    leader.attach_segment(VCH, 9, 3, since_ts=0)  # every delete since the checkpoint goes along
    assert ids(leader, 30) == [i for i in range(50) if i not in (3, 4, 6)]
    assert leader.load_report().lost == []


def test_a_new_leader_takes_the_segments_it_holds_and_scatters_the_rest(cluster):
    from vectide.services.common.segment import LoadPlan

    _, two, three, segment, _, _ = cluster
    two.host_segment(collection(), VCH, segment, [])
    # node 3 takes the shard over, replaying from after segment 9 (its deletes are in no
    # deltalog in this test, so they come again from the replay: 3 and 4 at 15)
    three.watch(collection(), VCH, LoadPlan([], [], replay_offset=0, remote={9: 2}))
    three.apply(VCH, pack(0, 20, delete([3, 4], 15)))
    assert ids(three, 20) == [i for i in range(50) if i not in (3, 4)]
    two.watch(collection(), VCH, LoadPlan([segment], [], replay_offset=0))
    assert two.load_report().hosted == {} and two.held_segments() == [9]


def test_handed_off_growing_rows_are_freed_in_whole_chunks_and_reads_stay_whole():
    """Rows a sealed copy serves leave the growing store's memory, leading chunks first,
    with their interim indexes; the rows after them keep theirs and stay searchable."""
    from vectide.services.querynode.segment import ShardStore

    store = DictStore()
    node = QueryNode(1, chunk_rows=16, binlogs=store)
    node.watch(collection("IVF_FLAT"), VCH)
    vectors = np.random.default_rng(4).standard_normal((80, DIM)).astype(np.float32)
    old, new = insert(range(40), 5, vectors[:40]), insert(range(40, 80), 6, vectors[40:])
    old.segment_id, new.segment_id = 9, 10
    node.apply(VCH, pack(0, 10, old, new))
    assert node.build_pending_indexes() == 1 and node.build_pending_indexes() == 1
    while node.build_pending_indexes():
        pass
    growing: ShardStore = node._shards[VCH].store  # the store under test
    assert growing.indexes["vec"].indexed_rows == 80
    assert node.load_segment(VCH, persisted([old], store))
    assert growing.num_rows == 48  # rows 0..31 freed (2 chunks); 32..39 share a chunk with 40..
    assert growing.indexes["vec"].indexed_rows == 48
    assert count(node, 10) == 80 and ids(node, 10) == list(range(80))
    hits = node.search(ShardSearchRequest(7, [VCH], "vec", vectors[70:72], "L2", 1, 10, 0.2))
    assert np.asarray(hits.pks).tolist() == [70, 71]


def test_the_leader_keeps_only_the_removals_no_deltalog_holds_yet(cluster):
    """Deletes a handoff's deltalogs hold (stamped up to its checkpoint) are not kept for
    later loads: an upsert-heavy shard's memory of them stays bounded."""
    leader, _, _, segment, _, _ = cluster
    shard = leader._shards[VCH]
    leader.apply(VCH, pack(20, 30, delete([5], 25)))
    assert [m.ts for m in shard.removals] == [15, 25]
    assert leader.load_segment(VCH, segment, [], since_ts=20)
    assert [m.ts for m in shard.removals] == [25]
    with pytest.raises(MilvusError):  # deltalogs ending before 20 cannot be completed here
        shard.removals_since(10)
    assert 5 not in ids(leader, 30) and count(leader, 30) == 47
    leader.apply(VCH, pack(30, 40, delete([6], 35)))
    assert [m.ts for m in shard.removals] == [25, 35] and count(leader, 40) == 46
