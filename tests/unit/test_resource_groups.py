"""Resource groups: the pure node accounting (``resource_groups.py``), then the query
coordinator keeping each replica's shards and segments on its group's nodes, over query
nodes of one process (the fixture of ``test_distribution.py``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.unit.test_distribution import count, deployment, held  # noqa: F401 (fixture)
from tests.unit.test_querynode import VCH, pack
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.kv.memory import MemoryKV
from vectide.services.common.names import DEFAULT_RESOURCE_GROUP as DEFAULT
from vectide.services.querycoord.core import QueryCoord
from vectide.services.querycoord.resource_groups import (
    GroupConfig,
    ResourceGroup,
    ResourceGroups,
)


def nodes_by_group(groups: ResourceGroups) -> dict[str, set[int]]:
    return {name: set(g.nodes) for name, g in groups.groups.items()}


# -- the accounting -----------------------------------------------------------------------


def test_joining_nodes_fill_requests_first_then_the_default_group():
    groups = ResourceGroups()
    groups.create("rg1", GroupConfig(requests=2, limits=3))
    groups.create("rg2", GroupConfig(requests=1, limits=1))
    assert groups.reconcile([1, 2, 3, 4, 5])
    placed = nodes_by_group(groups)
    assert len(placed["rg1"]) == 2 and len(placed["rg2"]) == 1 and len(placed[DEFAULT]) == 2
    assert not groups.reconcile([1, 2, 3, 4, 5])  # settled
    # a node of rg2 dies: the default group gives one back
    lost = next(iter(placed["rg2"]))
    assert groups.reconcile({1, 2, 3, 4, 5} - {lost})
    assert len(groups.nodes_of("rg2")) == 1 and len(groups.nodes_of(DEFAULT)) == 1
    # nodes stay where they are while the configs hold: the oldest keep what they serve
    keep = groups.nodes_of("rg1")
    groups.reconcile({1, 2, 3, 4, 5, 6} - {lost})
    assert groups.nodes_of("rg1") == keep and 6 in groups.nodes_of(DEFAULT)


def test_groups_over_their_limits_give_nodes_to_transfer_to_then_to_the_default():
    groups = ResourceGroups()
    groups.create("rg1", GroupConfig(requests=3, limits=3))
    groups.create("rg2", GroupConfig(requests=0, limits=5))
    groups.reconcile([1, 2, 3])
    assert groups.nodes_of("rg1") == {1, 2, 3}
    groups.update({"rg1": GroupConfig(requests=1, limits=1, transfer_to=("rg2",))})
    groups.reconcile([1, 2, 3])
    assert groups.nodes_of("rg1") == {1} and groups.nodes_of("rg2") == {2, 3}
    groups.update({"rg2": GroupConfig()})  # limits 0: everything goes to the default group
    groups.reconcile([1, 2, 3])
    assert nodes_by_group(groups) == {DEFAULT: {2, 3}, "rg1": {1}, "rg2": set()}


def test_a_group_short_of_requests_takes_from_its_transfer_from_first():
    groups = ResourceGroups()
    groups.create("rg1", GroupConfig(requests=2, limits=2))
    groups.create("rg2", GroupConfig(requests=1, limits=1))
    groups.reconcile([1, 2, 3, 4, 5])  # rg1 2, rg2 1, default 2
    groups.update({"rg1": GroupConfig(requests=0, limits=4)})  # rg1 holds 2 spare
    groups.create("rg3", GroupConfig(requests=1, limits=1, transfer_from=("rg1",)))
    before = groups.nodes_of("rg1")
    groups.reconcile([1, 2, 3, 4, 5])
    taken = groups.nodes_of("rg3")
    assert len(taken) == 1 and taken <= before  # from rg1 (2 spare), not the default (2)


def test_configs_are_checked_as_milvus_checks_them():
    groups = ResourceGroups()
    cases = [
        (GroupConfig(requests=-1, limits=1), "should not less than 0"),
        (GroupConfig(requests=2, limits=1), "limits node num should not less than requests"),
        (GroupConfig(limits=1, transfer_from=("rg1",)), "should not be itself"),
        (GroupConfig(limits=1, transfer_to=("nope",)), "TransferTo` nope not exist"),
    ]
    for config, message in cases:
        with pytest.raises(MilvusError, match=message) as bad:
            groups.create("rg1", config)
        assert bad.value.code == Code.RESOURCE_GROUP_ILLEGAL_CONFIG
    assert groups.create("rg1", GroupConfig(limits=1))
    assert not groups.create("rg1", GroupConfig(limits=1))  # the same again: a no-op
    with pytest.raises(MilvusError) as exists:
        groups.create("rg1", GroupConfig(limits=2))
    assert exists.value.code == Code.RESOURCE_GROUP_ALREADY_EXIST
    with pytest.raises(MilvusError) as missing:
        groups.update({"nope": GroupConfig()})
    assert missing.value.code == Code.RESOURCE_GROUP_NOT_FOUND
    with pytest.raises(MilvusError, match="couldn't be empty"):
        groups.create("", None)


def test_only_an_empty_unreferenced_group_without_replicas_is_dropped():
    groups = ResourceGroups()
    groups.create("rg1", GroupConfig(requests=1, limits=1))
    groups.create("rg2", GroupConfig(limits=1, transfer_to=("rg1",)))
    groups.reconcile([1, 2])
    with pytest.raises(MilvusError, match="default resource group is not deletable"):
        groups.drop(DEFAULT, [])
    with pytest.raises(MilvusError, match="limits node num is not 0"):
        groups.drop("rg1", [])
    groups.update({"rg1": GroupConfig()})
    with pytest.raises(MilvusError, match="used by rg2's `TransferTo`"):
        groups.drop("rg1", [])
    groups.update({"rg2": GroupConfig()})
    with pytest.raises(MilvusError, match="some replicas still loaded"):
        groups.drop("rg1", ["rg1"])
    assert groups.drop("rg1", [])
    assert not groups.drop("rg1", [])  # gone already: a no-op
    assert groups.nodes_of(DEFAULT) == {1, 2}  # its node came back at once


def test_a_group_with_a_node_filter_holds_only_the_nodes_carrying_its_labels():
    labels = {1: {}, 2: {"zone": "a"}, 3: {"zone": "b"}, 4: {"zone": "a", "disk": "ssd"}}
    groups = ResourceGroups()
    groups.create("zone_a", GroupConfig(requests=2, limits=2, node_labels=(("zone", "a"),)))
    # nodes 1 and 3 would be placed first, were labels not read
    groups.reconcile([1, 3, 2, 4], labels)
    assert nodes_by_group(groups) == {DEFAULT: {1, 3}, "zone_a": {2, 4}}
    # a stricter filter: node 2 no longer qualifies and leaves at once; no other node can
    # take its place, so the group stays short of its requests
    ssd = GroupConfig(requests=2, limits=2, node_labels=(("disk", "ssd"), ("zone", "a")))
    groups.update({"zone_a": ssd})
    groups.reconcile([1, 2, 3, 4], labels)
    assert nodes_by_group(groups) == {DEFAULT: {1, 2, 3}, "zone_a": {4}}
    # a node that joins with the labels fills the gap; one without them does not
    more = {**labels, 5: {"zone": "b"}, 6: {"zone": "a", "disk": "ssd"}}
    groups.reconcile([1, 2, 3, 4, 5, 6], more)
    assert nodes_by_group(groups) == {DEFAULT: {1, 2, 3, 5}, "zone_a": {4, 6}}
    # an unlabelled group short of nodes never takes them from the filtered group
    groups.create("any", GroupConfig(requests=4, limits=4))
    groups.reconcile([1, 2, 3, 4, 5, 6], more)
    assert nodes_by_group(groups) == {DEFAULT: set(), "zone_a": {4, 6}, "any": {1, 2, 3, 5}}
    # the filter survives a restart of the coordinator (the persisted form)
    restored = ResourceGroups.loads("zone_a", ResourceGroups.dumps(groups.get("zone_a")))
    assert restored.config == ssd and restored.nodes == {4, 6}


def test_a_node_moves_only_between_groups_that_accept_it():
    labels = {1: {"tier": "gold"}, 2: {"tier": "gold"}, 3: {}}
    gold = GroupConfig(requests=1, limits=1, node_labels=(("tier", "gold"),))
    groups = ResourceGroups()
    groups.create("gold", gold)
    groups.create("plain", GroupConfig(requests=1, limits=1))
    groups.reconcile([1, 2, 3], labels)
    assert nodes_by_group(groups) == {DEFAULT: {3}, "gold": {1}, "plain": {2}}
    # gold wants two; the default group's node has no label, and plain gives none of the
    # one node it requests (as Milvus: only nodes beyond requests move)
    groups.update({"gold": replace(gold, requests=2, limits=2)})
    assert not groups.reconcile([1, 2, 3], labels)
    # plain needs no node any more: its gold node goes to gold, not to the default group
    groups.update({"plain": GroupConfig(limits=1)})
    groups.reconcile([1, 2, 3], labels)
    assert nodes_by_group(groups) == {DEFAULT: {3}, "gold": {1, 2}, "plain": set()}


def test_transfer_node_moves_the_numbers_as_milvus_does():
    groups = ResourceGroups()
    groups.create("rg1", None)
    groups.reconcile([1, 2, 3])
    groups.transfer_node(DEFAULT, "rg1", 2)
    assert groups.get("rg1").config == GroupConfig(requests=2, limits=2)
    assert groups.get(DEFAULT).config.limits == 1_000_000  # the default keeps its limits
    groups.reconcile([1, 2, 3])
    assert len(groups.nodes_of("rg1")) == 2
    with pytest.raises(MilvusError) as few:
        groups.transfer_node(DEFAULT, "rg1", 2)
    assert few.value.code == Code.RESOURCE_GROUP_NODE_NOT_ENOUGH
    with pytest.raises(MilvusError, match="should not be the same"):
        groups.transfer_node("rg1", "rg1", 1)
    groups.transfer_node("rg1", DEFAULT, 1)
    assert groups.get("rg1").config == GroupConfig(requests=1, limits=1)


def test_groups_survive_a_round_trip_through_the_metastore():
    group = ResourceGroup("rg1", GroupConfig(1, 2, ("a",), ("b",)), {4, 2})
    assert ResourceGroups.loads("rg1", ResourceGroups.dumps(group)) == group


# -- the coordinator ---------------------------------------------------------------------


def leader_of(coord: QueryCoord, nodes, replica: int = 0):
    leader = nodes.node(coord.replicas(7)[replica][VCH])
    leader.apply(VCH, pack(0, 10))  # serviceable (a new leader starts from nothing)
    return leader


def test_a_replica_serves_only_from_its_groups_nodes(deployment):  # noqa: F811
    coord, nodes, *_ = deployment
    coord.create_resource_group("rg1", {"requests": 1, "limits": 1})
    # one node went to rg1; the collection's replica stays in the default group, on the other
    [moved] = coord.describe_resource_group("rg1")["nodes"]
    other = 3 - moved
    serving = leader_of(coord, nodes)
    assert serving.node_id == other and held(nodes)[moved] == []
    assert count(serving) == 200
    described = coord.describe_resource_group(DEFAULT)
    assert described["nodes"] == [other] and described["replicas"] == {"7": 1}
    assert described["config"]["limits"] == 1_000_000

    coord.transfer_replica(DEFAULT, "rg1", 7, 1)
    serving = leader_of(coord, nodes)
    assert serving.node_id == moved and held(nodes)[other] == []
    assert sorted(held(nodes)[moved]) == [10, 11, 12, 13]
    assert count(serving) == 200
    assert coord.replica_groups(7) == ["rg1"]
    assert coord.describe_resource_group("rg1")["replicas"] == {"7": 1}

    with pytest.raises(MilvusError, match="limits node num is not 0"):
        coord.drop_resource_group("rg1")
    with pytest.raises(MilvusError, match="only found \\[0\\] replicas"):
        coord.transfer_replica(DEFAULT, "rg1", 7, 1)
    coord.release_collection(7)
    coord.update_resource_groups({"rg1": {"requests": 0, "limits": 0}})
    coord.drop_resource_group("rg1")
    assert coord.list_resource_groups() == [DEFAULT]
    assert coord.describe_resource_group(DEFAULT)["nodes"] == [1, 2]


def test_replicas_load_into_named_groups_and_the_groups_outlive_a_restart(deployment):  # noqa: F811
    coord, nodes, store, _, _ = deployment
    coord.release_collection(7)
    for node_id in (3, 4):
        nodes.add(node_id, store)
    coord.create_resource_group("rg1", {"requests": 2, "limits": 2})
    coord.create_resource_group("rg2", {"requests": 1, "limits": 1})
    with pytest.raises(MilvusError) as unknown:
        coord.load_collection(7, 1, ["nope"])
    assert unknown.value.code == Code.RESOURCE_GROUP_NOT_FOUND
    with pytest.raises(MilvusError, match="resource group num can only be 0, 1 or same"):
        coord.load_collection(7, 3, ["rg1", "rg2"])
    with pytest.raises(MilvusError) as few:
        coord.load_collection(7, 2, ["rg2"])
    assert few.value.code == Code.RESOURCE_GROUP_NODE_NOT_ENOUGH
    coord.load_collection(7, 2, ["rg1", "rg2"])
    rg1, rg2 = (set(coord.describe_resource_group(g)["nodes"]) for g in ("rg1", "rg2"))
    assert coord.replica_groups(7) == ["rg1", "rg2"]
    for index, members in enumerate((rg1, rg2)):
        leader = leader_of(coord, nodes, index)
        served = coord.distribution.reports()[leader.node_id].leading[VCH]
        assert {leader.node_id, *served.values()} <= members
        assert count(leader) == 200
    with pytest.raises(MilvusError, match="can't change the resource groups"):
        coord.load_collection(7, 2, ["rg1"])
    coord.load_collection(7, 2)  # the same replicas, wherever they are: a no-op

    again = QueryCoord(coord._kv, coord._collections, nodes)
    again.start()
    assert again.list_resource_groups() == sorted([DEFAULT, "rg1", "rg2"])
    assert set(again.describe_resource_group("rg1")["nodes"]) == rg1
    assert again.replica_groups(7) == ["rg1", "rg2"]


def test_a_group_that_loses_its_node_takes_one_from_the_default_group(deployment):  # noqa: F811
    coord, nodes, store, _, _ = deployment
    nodes.add(3, store)
    coord.rebalance()
    coord.create_resource_group("rg1", {"requests": 1, "limits": 1})
    coord.transfer_replica(DEFAULT, "rg1", 7, 1)
    [first] = coord.describe_resource_group("rg1")["nodes"]
    assert count(leader_of(coord, nodes)) == 200
    del nodes.nodes[first]  # its session expired
    coord.rebalance()
    [second] = coord.describe_resource_group("rg1")["nodes"]
    assert second != first and len(coord.describe_resource_group(DEFAULT)["nodes"]) == 1
    serving = leader_of(coord, nodes)
    assert serving.node_id == second and count(serving) == 200
    assert {n for n, held_ in held(nodes).items() if held_} == {second}


def test_a_replica_whose_group_is_empty_keeps_its_nodes(deployment):  # noqa: F811
    coord, nodes, *_ = deployment
    coord.create_resource_group("rg1", {"requests": 2, "limits": 2})  # both nodes
    for _ in range(3):  # every later round too: nothing to move the replica to
        coord.rebalance()
    described = coord.describe_resource_group(DEFAULT)
    assert described["nodes"] == [] and described["outgoing"] == {"7": 1}
    assert count(leader_of(coord, nodes)) == 200


def test_the_coordinator_keeps_groups_apart_from_a_fresh_metastore():
    coord = QueryCoord(
        MemoryKV(),
        None,
        type("Nodes", (), {"live_nodes": lambda self: [1], "labels": lambda self, n: {}})(),
    )
    coord.start()
    assert coord.list_resource_groups() == [DEFAULT]
    with pytest.raises(MilvusError) as missing:
        coord.describe_resource_group("rg1")
    assert missing.value.code == Code.RESOURCE_GROUP_NOT_FOUND


# -- the RPCs ------------------------------------------------------------------------------


def test_the_rpcs_take_and_give_milvus_shapes():
    from pymilvus.client.prepare import Prepare
    from pymilvus.grpc_gen import milvus_pb2, rg_pb2

    from benchmarks.search_path import Context
    from vectide.services.proxy.grpc_service import MilvusService
    from vectide.services.testing import Harness

    h = Harness()
    h.create_collection("c")
    service, ctx = MilvusService(h.proxy), Context()

    def limit(n: int) -> rg_pb2.ResourceGroupLimit:
        return rg_pb2.ResourceGroupLimit(node_num=n)

    one = rg_pb2.ResourceGroupConfig(
        requests=limit(1),
        limits=limit(1),
        transfer_to=[rg_pb2.ResourceGroupTransfer(resource_group=DEFAULT)],
    )
    created = service.CreateResourceGroup(Prepare.create_resource_group("rg1", config=one), ctx)
    assert created.code == 0
    assert service.CreateResourceGroup(Prepare.create_resource_group("rg0"), ctx).code == 0
    partial = rg_pb2.ResourceGroupConfig(requests=limit(1))
    refused = service.UpdateResourceGroups(Prepare.update_resource_groups({"rg0": partial}), ctx)
    assert refused.code == Code.RESOURCE_GROUP_ILLEGAL_CONFIG
    assert "requests or limits is required" in refused.reason
    listed = service.ListResourceGroups(milvus_pb2.ListResourceGroupsRequest(), ctx)
    assert sorted(listed.resource_groups) == sorted([DEFAULT, "rg0", "rg1"])

    # the harness's one query node went to rg1: the loaded collection follows it there
    again = Prepare.load_collection("c", replica_number=1, _resource_groups=["rg1"])
    assert "can't change the resource groups" in service.LoadCollection(again, ctx).reason
    moving = Prepare.transfer_replica(DEFAULT, "rg1", "c", 1)
    assert service.TransferReplica(moving, ctx).code == 0
    group = service.DescribeResourceGroup(Prepare.describe_resource_group("rg1"), ctx)
    assert group.status.code == 0
    described = group.resource_group
    assert described.num_available_node == 1 and len(described.nodes) == 1
    assert described.config.limits.node_num == 1 and described.capacity == 1
    default = service.DescribeResourceGroup(Prepare.describe_resource_group(DEFAULT), ctx)
    assert default.resource_group.capacity == 1_000_000
    assert [t.resource_group for t in described.config.transfer_to] == [DEFAULT]
    assert dict(described.num_loaded_replica) == {"c": 1}
    replicas = service.GetReplicas(
        milvus_pb2.GetReplicasRequest(collection_name="c", with_shard_nodes=True), ctx
    )
    assert [r.resource_group_name for r in replicas.replicas] == ["rg1"]
    moved = service.TransferReplica(Prepare.transfer_replica("rg0", "rg1", "c", 1), ctx)
    assert moved.code == Code.PARAMETER_INVALID and "only found [0]" in moved.reason
    unknown = service.DescribeResourceGroup(Prepare.describe_resource_group("nope"), ctx)
    assert unknown.status.code == Code.RESOURCE_GROUP_NOT_FOUND
    not_empty = service.DropResourceGroup(Prepare.drop_resource_group("rg1"), ctx)
    assert not_empty.code == Code.PARAMETER_INVALID
    assert service.TransferNode(Prepare.transfer_node("rg1", "rg0", 1), ctx).code == 0
    rg0 = service.DescribeResourceGroup(Prepare.describe_resource_group("rg0"), ctx)
    assert rg0.resource_group.config.requests.node_num == 1  # the numbers moved, then the node
    assert rg0.resource_group.num_available_node == 1
    still = service.DropResourceGroup(Prepare.drop_resource_group("rg1"), ctx)
    assert "some replicas still loaded" in still.reason


def test_the_rest_routes_take_and_give_milvus_shapes():
    import json

    from vectide.services.proxy.grpc_service import MilvusService
    from vectide.services.proxy.rest_api import RestApi
    from vectide.services.testing import Harness

    h = Harness()
    h.create_collection("c")
    api = RestApi(MilvusService(h.proxy))

    def post(action: str, body: dict) -> dict:
        return api.handle(f"/v2/vectordb/resource_groups/{action}", json.dumps(body).encode(), {})

    one = {"requests": {"node_num": 1}, "limits": {"node_num": 1}}
    assert post("create", {"name": "rg1", "config": one}) == {"code": 0, "data": {}}
    assert post("create", {"name": "rg2"})["code"] == 0
    assert sorted(post("list", {})["data"]) == sorted([DEFAULT, "rg1", "rg2"])
    missing = post("alter", {"resource_groups": {"rg2": {"limits": {"node_num": 1}}}})
    assert missing["code"] == Code.RESOURCE_GROUP_ILLEGAL_CONFIG
    moving = {"sourceRgName": DEFAULT, "targetRgName": "rg1", "collectionName": "c"}
    assert post("transfer_replica", {**moving, "replicaNum": 1})["code"] == 0
    group = post("describe", {"name": "rg1"})["data"]["resource_group"]
    assert group["name"] == "rg1" and group["num_available_node"] == 1
    assert group["config"]["limits"] == {"node_num": 1}
    assert group["num_loaded_replica"] == {"c": 1} and len(group["nodes"]) == 1
    assert post("describe", {"name": "nope"})["code"] == Code.RESOURCE_GROUP_NOT_FOUND
    assert post("transfer_replica", moving)["code"] == 1802  # replicaNum is required
    none = {"requests": {"node_num": 0}, "limits": {"node_num": 0}}
    assert post("alter", {"resource_groups": {"rg2": none}})["code"] == 0
    assert post("drop", {"name": "rg2"})["code"] == 0
    assert sorted(post("list", {})["data"]) == sorted([DEFAULT, "rg1"])


def test_a_node_filter_given_over_grpc_and_rest_takes_only_the_labelled_node():
    import json

    from pymilvus.client.prepare import Prepare
    from pymilvus.grpc_gen import common_pb2, rg_pb2

    from benchmarks.search_path import Context
    from vectide.services.proxy.grpc_service import MilvusService
    from vectide.services.proxy.rest_api import RestApi
    from vectide.services.testing import Harness

    h = Harness()  # its first query node has no label
    labelled = h.add_querynode(labels={"QUERYNODE_LOCATION": "dc1"})
    service, ctx = MilvusService(h.proxy), Context()
    api = RestApi(service)

    def describe(name: str) -> rg_pb2.ResourceGroupConfig:
        reply = service.DescribeResourceGroup(Prepare.describe_resource_group(name), ctx)
        assert reply.status.code == 0, reply.status
        return reply.resource_group

    dc1 = rg_pb2.ResourceGroupConfig(
        requests=rg_pb2.ResourceGroupLimit(node_num=2),
        limits=rg_pb2.ResourceGroupLimit(node_num=2),
        node_filter=rg_pb2.ResourceGroupNodeFilter(
            node_labels=[common_pb2.KeyValuePair(key="QUERYNODE_LOCATION", value="dc1")]
        ),
    )
    created = service.CreateResourceGroup(Prepare.create_resource_group("dc1", config=dc1), ctx)
    assert created.code == 0
    group = describe("dc1")
    # two requested, one node carries the label: the group holds it and stays short
    assert [n.node_id for n in group.nodes] == [labelled.node_id]
    assert [(kv.key, kv.value) for kv in group.config.node_filter.node_labels] == [
        ("QUERYNODE_LOCATION", "dc1")
    ]
    assert len(describe(DEFAULT).nodes) == 1

    def post(action: str, body: dict) -> dict:
        return api.handle(f"/v2/vectordb/resource_groups/{action}", json.dumps(body).encode(), {})

    # over REST: a filter no node meets; the group takes nothing, the label node stays
    dc2 = {
        "requests": {"node_num": 1},
        "limits": {"node_num": 1},
        "node_filter": {"node_labels": [{"key": "QUERYNODE_LOCATION", "value": "dc2"}]},
    }
    assert post("create", {"name": "dc2", "config": dc2})["code"] == 0
    described = post("describe", {"name": "dc2"})["data"]["resource_group"]
    assert described["nodes"] == [] and described["config"]["node_filter"] == dc2["node_filter"]
    # dc1's filter changed to dc2's label: its node no longer qualifies and leaves
    assert post("alter", {"resource_groups": {"dc1": dc2}})["code"] == 0
    assert describe("dc1").nodes == [] and len(describe(DEFAULT).nodes) == 2


def test_server_labels_come_from_the_environment_and_travel_in_the_session():
    from vectide.services.common.session import SessionInfo, labels_from_env

    env = {
        "VECTIDE_SERVER_LABEL_ZONE": "z1",
        "MILVUS_SERVER_LABEL_QUERYNODE_LOCATION": "dc1",  # a manifest written for Milvus
        "MILVUS_SERVER_LABEL_ZONE": "ignored: Vectide's own name wins",
        "VECTIDE_SERVER_LABEL_": "no key",
        "VECTIDE_SERVICE_HOST": "not a label",
    }
    labels = labels_from_env(env)
    assert labels == {"ZONE": "z1", "QUERYNODE_LOCATION": "dc1"}
    info = SessionInfo("querynode", -1, "h:1", labels=labels)
    assert SessionInfo.from_json(7, info.to_json()).labels == labels
    # a session written before labels existed reads as unlabelled; an unlabelled one is
    # written as before (readers of the earlier version take it); a newer key is skipped
    assert SessionInfo.from_json(7, b'{"role": "querynode", "address": "h:1"}').labels == {}
    assert b"labels" not in SessionInfo("querynode", -1, "h:1").to_json()
    newer = b'{"role": "querynode", "address": "h:1", "weight": 3}'
    assert SessionInfo.from_json(7, newer).address == "h:1"
