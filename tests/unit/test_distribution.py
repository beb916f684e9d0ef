"""The query coordinator placing, moving and recovering sealed segments over query nodes of
one process (the cores without a network): reads stay whole through every change."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fakes import DictStore
from tests.unit.test_querynode import DIM, VCH, collection, delete, insert, pack, persisted
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.kv.memory import MemoryKV
from vectide.services.common.requests import ShardQueryRequest
from vectide.services.querycoord.balance import BalanceConfig
from vectide.services.querycoord.core import QueryCoord
from vectide.services.querynode.core import QueryNode

ROWS = 50
#: each segment is 10 % of a node's memory limit
LIMIT_MB = ROWS * collection().schema.row_bytes() * 10 / 2**20


class Nodes:
    """Live query nodes of this process, by id."""

    def __init__(self) -> None:
        self.nodes: dict[int, QueryNode] = {}
        self.node_labels: dict[int, dict[str, str]] = {}

    def add(
        self, node_id: int, store: DictStore, labels: dict[str, str] | None = None
    ) -> QueryNode:
        node = QueryNode(node_id, binlogs=store, peers=self, memory_limit_mb=LIMIT_MB)
        self.nodes[node_id] = node
        self.node_labels[node_id] = dict(labels or {})
        return node

    def live_nodes(self) -> list[int]:
        return sorted(self.nodes)

    def labels(self, node_id: int) -> dict[str, str]:
        return self.node_labels.get(node_id, {})

    def node(self, node_id: int) -> QueryNode:
        return self.nodes[node_id]


class DataCoord:
    def __init__(self, segments) -> None:
        self.by_id = {s.segment_id: s for s in segments}

    def segments(self, collection_id, states=None):
        return [s for s in self.by_id.values() if states is None or s.state in states]

    def segment(self, segment_id):
        return self.by_id.get(segment_id)

    def deltalogs(self, collection_id, vchannel):
        return []

    def checkpoint(self, pchannel):
        return None


class Catalog:
    def describe_collection(self, collection_id=None, **_):
        return collection()


def flushed(store: DictStore, segment_ids: list[int]) -> list:
    """Segments of ``ROWS`` rows each (ids 0.. in order), as the data node writes them."""
    rng = np.random.default_rng(segment_ids[0])
    segments = []
    for i, segment_id in enumerate(segment_ids):
        msg = insert(range(i * ROWS, (i + 1) * ROWS), 5, rng.random((ROWS, DIM), np.float32))
        msg.segment_id = segment_id
        segments.append(persisted([msg], store))
    return segments


@pytest.fixture
def deployment():
    """Four flushed segments of 50 rows (ids 10..13; ids 0..199), two nodes."""
    store, nodes = DictStore(), Nodes()
    segments = flushed(store, [10, 11, 12, 13])
    for node_id in (1, 2):
        nodes.add(node_id, store)
    datacoord = DataCoord(segments)
    coord = QueryCoord(MemoryKV(), Catalog(), nodes, datacoord, BalanceConfig(90.0, 15.0))
    coord.load_collection(7)
    leader = nodes.node(coord.replicas(7)[0][VCH])
    leader.apply(VCH, pack(0, 10))  # serviceable
    return coord, nodes, store, leader, datacoord


def count(leader: QueryNode, ts: int = 10) -> int:
    return leader.query(ShardQueryRequest(7, [VCH], ts, 0.5, count_only=True)).count


def held(nodes: Nodes) -> dict[int, list[int]]:
    return {n: node.held_segments() for n, node in nodes.nodes.items()}


def test_loading_places_segments_by_memory_over_every_node(deployment):
    _, nodes, _, leader, _ = deployment
    assert held(nodes) == {1: [10, 12], 2: [11, 13]}
    assert count(leader) == 200
    served = leader.load_report().leading[VCH]
    assert sorted(served) == [10, 11, 12, 13] and set(served.values()) == {1, 2}


def test_a_new_node_gets_segments_in_the_next_balance_round(deployment):
    coord, nodes, store, leader, _ = deployment
    nodes.add(3, store)
    assert coord.balance() >= 1
    usage = [r.memory_percentage for r in coord.distribution.reports().values()]
    assert all(held(nodes).values()) and max(usage) - min(usage) <= 15.0
    assert count(leader) == 200
    assert coord.balance() == 0  # settled: a second round has nothing to do


def test_load_balance_moves_the_named_segment_and_deletes_follow_it(deployment):
    coord, nodes, _, leader, _ = deployment
    source = next(n for n, segments in held(nodes).items() if 11 in segments)
    target = 3 - source
    coord.load_balance(7, source, [target], [11])
    assert 11 in held(nodes)[target] and 11 not in held(nodes)[source]
    leader.apply(VCH, pack(10, 20, delete([ROWS + 1], 15)))  # a row of segment 11
    assert count(leader, 20) == 199
    with pytest.raises(MilvusError) as unknown:
        coord.load_balance(7, source, [target], [999])
    assert unknown.value.code == Code.SEGMENT_NOT_FOUND
    with pytest.raises(MilvusError) as no_node:
        coord.load_balance(7, 42, [], [])
    assert no_node.value.code == Code.NODE_NOT_FOUND


def test_segments_of_a_dead_node_are_placed_again(deployment):
    coord, nodes, store, leader, _ = deployment
    other = 3 - leader.node_id
    nodes.add(3, store)
    del nodes.nodes[other]  # its session expired
    coord.rebalance()
    assert sorted(s for segments in held(nodes).values() for s in segments) == [10, 11, 12, 13]
    assert count(leader) == 200


def test_a_stopping_leader_hands_its_shard_and_segments_over(deployment):
    coord, nodes, store, leader, _ = deployment
    nodes.add(3, store)
    leader.stopping = True
    coord.rebalance()
    new_leader = nodes.node(coord.replicas(7)[0][VCH])
    assert new_leader is not leader and leader.drained()
    new_leader.apply(VCH, pack(0, 10))
    assert count(new_leader) == 200
    assert len([s for s in coord.distribution.reports()[3].segments_mb]) >= 1


def test_handoff_places_a_new_segment_on_the_least_used_node(deployment):
    coord, nodes, store, leader, datacoord = deployment
    coord.handoff()  # the four loaded ones are known: nothing to do
    assert sum(len(s) for s in held(nodes).values()) == 4
    rows = insert(range(200, 250), 25, np.ones((ROWS, DIM), np.float32))
    rows.segment_id = 14
    leader.apply(VCH, pack(20, 30, rows))
    datacoord.by_id[14] = persisted([rows], store)
    assert coord.handoff() == 1
    assert count(leader, 30) == 250
    assert sum(len(s) for s in held(nodes).values()) == 5
    del datacoord.by_id[10]  # retired (compacted away, or its partition dropped)
    assert coord.handoff() == 0
    assert sorted(key[1] for key in coord._loader._handed) == [11, 12, 13, 14]


def test_replicas_live_on_their_own_nodes_and_a_dead_node_takes_down_one_copy(deployment):
    coord, nodes, store, _, _ = deployment
    coord.release_collection(7)
    assert all(not node.held_segments() and node.drained() for node in nodes.nodes.values())
    for node_id in (3, 4):
        nodes.add(node_id, store)
    with pytest.raises(MilvusError, match="no enough nodes"):
        coord.load_collection(7, replica_number=5)
    # refused by the node count as fast: no replica is ever listed one by one (a fuzzed
    # request's 2**31 - 1 once held the process for the 16 GB list it built)
    with pytest.raises(MilvusError, match="2147483647 replicas need 2147483647 query nodes"):
        coord.load_collection(7, replica_number=2**31 - 1)
    coord.load_collection(7, replica_number=2)
    with pytest.raises(MilvusError, match="can't change the replica number"):
        coord.load_collection(7, replica_number=1)
    first, second = coord.replicas(7)
    leaders = [nodes.node(first[VCH]), nodes.node(second[VCH])]
    reports = coord.distribution.reports()
    copies = [reports[leader.node_id].leading[VCH] for leader in leaders]
    assert sorted(copies[0]) == sorted(copies[1]) == [10, 11, 12, 13]
    sets = [
        {leader.node_id, *served.values()} for leader, served in zip(leaders, copies, strict=True)
    ]
    assert not sets[0] & sets[1]  # no node serves both copies
    for leader in leaders:
        leader.apply(VCH, pack(0, 10))
        assert count(leader) == 200
    # a node of the second replica dies: the first one reads as before, the second recovers
    victim = next(n for n in sets[1] if n != leaders[1].node_id)
    del nodes.nodes[victim]
    assert count(leaders[0]) == 200
    coord.rebalance()
    assert count(leaders[1]) == 200
    assert coord.replicas(7)[0] == first


def test_replica_node_sets_stay_even_as_nodes_come_and_go():
    from vectide.services.querycoord.replicas import assign_nodes, dumps, loads, new_replicas

    replicas = new_replicas(2, [1, 2, 3])
    assert [r.nodes for r in replicas] == [{1, 3}, {2}]
    assert assign_nodes(replicas, [1, 2, 3, 4]) and replicas[1].nodes == {2, 4}
    assert not assign_nodes(replicas, [1, 2, 3, 4])
    assert assign_nodes(replicas, [2, 3, 4]) and [r.nodes for r in replicas] == [{3}, {2, 4}]
    replicas[0].shards = {VCH: 3}
    assert loads(dumps(replicas)) == replicas
    assert loads(b'{"c-dml_0_7v0": 5}')[0].shards == {VCH: 5}  # the one-replica format
    assert new_replicas(1, [1, 2])[0].usable([2, 1]) == [1, 2]


def test_segments_beyond_every_nodes_limit_are_still_served_on_the_least_used():
    store, nodes = DictStore(), Nodes()
    segments = flushed(store, [20, 21, 22])
    for node_id in (1, 2):
        nodes.add(node_id, store).memory_limit_mb = LIMIT_MB / 20  # a segment is 200 %
    coord = QueryCoord(MemoryKV(), Catalog(), nodes, DataCoord(segments), BalanceConfig())
    coord.load_collection(7)
    leader = nodes.node(coord.replicas(7)[0][VCH])
    leader.apply(VCH, pack(0, 10))
    assert count(leader) == 150
    assert sorted(len(s) for s in held(nodes).values()) == [1, 2]
