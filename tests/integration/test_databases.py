"""What Attu and pymilvus call when they connect and list, databases, aliases and renames,
through unmodified pymilvus (and the raw Milvus stub for RPCs pymilvus does not wrap)."""

from __future__ import annotations

import json
import time
import uuid

import grpc
import pytest
from pymilvus import MilvusClient, MilvusException
from pymilvus.grpc_gen import common_pb2, milvus_pb2, milvus_pb2_grpc

DIM = 4


@pytest.fixture(scope="module")
def stub(standalone):
    channel = grpc.insecure_channel(standalone.uri.removeprefix("http://"))
    yield milvus_pb2_grpc.MilvusServiceStub(channel)
    channel.close()


def _system_info(stub) -> milvus_pb2.GetMetricsResponse:
    request = json.dumps({"metric_type": "system_info"})
    return stub.GetMetrics(milvus_pb2.GetMetricsRequest(request=request))


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:6]}"


def _rows(n: int = 3, start: int = 0) -> list[dict]:
    return [{"id": start + i, "vector": [float(start + i)] * DIM} for i in range(n)]


def test_component_states_are_healthy(stub):
    reply = stub.GetComponentStates(milvus_pb2.GetComponentStatesRequest())
    assert reply.status.code == 0
    assert reply.state.state_code == common_pb2.StateCode.Healthy
    assert reply.state.role == "proxy"


def test_system_info_metrics_list_every_role(stub):
    reply = _system_info(stub)
    assert reply.status.code == 0
    nodes = json.loads(reply.response)["nodes_info"]
    roles = {n["infos"]["type"] for n in nodes}
    assert {"proxy", "rootcoord", "querynode"} <= roles
    assert nodes[0]["infos"]["type"] == "proxy"
    assert reply.component_name == nodes[0]["infos"]["name"]
    bad = stub.GetMetrics(milvus_pb2.GetMetricsRequest(request='{"metric_type": "nope"}'))
    assert bad.status.code != 0 and "nope" in bad.status.reason


def test_replicas_name_the_shards_and_their_query_nodes(client, stub):
    name = _name("rep")
    client.create_collection(name, dimension=DIM, num_shards=2)
    reply = stub.GetReplicas(milvus_pb2.GetReplicasRequest(collection_name=name))
    assert reply.status.code == 0
    client.release_collection(name)
    assert not stub.GetReplicas(milvus_pb2.GetReplicasRequest(collection_name=name)).replicas
    client.load_collection(name)
    request = milvus_pb2.GetReplicasRequest(collection_name=name, with_shard_nodes=True)
    (replica,) = stub.GetReplicas(request).replicas
    assert replica.collectionID == client.describe_collection(name)["collection_id"]
    assert len(replica.shard_replicas) == 2
    assert all(s.node_ids == [s.leaderID] for s in replica.shard_replicas)
    assert set(replica.node_ids) == {s.leaderID for s in replica.shard_replicas}
    client.drop_collection(name)


# -- databases -------------------------------------------------------------------------------


@pytest.fixture
def database(standalone, client):
    name = _name("db")
    client.create_database(name, properties={"owner": "tests"})
    yield name
    client.use_database("default")
    if name in client.list_databases():
        scoped = MilvusClient(standalone.uri, db_name=name)
        for collection in scoped.list_collections():
            scoped.drop_collection(collection)
        scoped.close()
        client.drop_database(name)


def test_default_plus_created_databases_are_listed(client, database):
    names = client.list_databases()
    assert names[0] == "default" and database in names
    described = client.describe_database(database)
    assert described["name"] == database and described["owner"] == "tests"
    with pytest.raises(MilvusException, match="database already exist"):
        client.create_database(database)
    with pytest.raises(MilvusException) as invalid:
        client.create_database("no-dashes")
    assert invalid.value.code == 802
    client.alter_database_properties(database, {"team": "search"})
    client.drop_database_properties(database, ["owner"])
    described = client.describe_database(database)
    assert described["team"] == "search" and "owner" not in described


def test_show_collections_in_memory_lists_the_loaded_ones(client, stub):
    loaded, released = _name("loaded"), _name("released")
    for name in (loaded, released):
        client.create_collection(name, dimension=DIM)
    client.release_collection(released)
    try:
        request = milvus_pb2.ShowCollectionsRequest(type=milvus_pb2.ShowType.InMemory)
        reply = stub.ShowCollections(request)
        names = dict(zip(reply.collection_names, reply.inMemory_percentages, strict=True))
        assert names[loaded] == 100 and released not in names
    finally:
        client.drop_collection(loaded)
        client.drop_collection(released)


def test_collections_are_scoped_by_database(standalone, client, database):
    name = _name("docs")
    client.create_collection(name, dimension=DIM)
    scoped = MilvusClient(standalone.uri, db_name=database)
    try:
        assert name not in scoped.list_collections()
        scoped.create_collection(name, dimension=DIM + 4, metric_type="L2")  # another database
        assert scoped.describe_collection(name)["fields"][1]["params"]["dim"] == DIM + 4
        assert client.describe_collection(name)["fields"][1]["params"]["dim"] == DIM
        rows = [{"id": i, "vector": [float(i)] * (DIM + 4)} for i in range(5)]
        scoped.insert(name, rows)
        hits = scoped.search(name, [[4.0] * (DIM + 4)], limit=2, consistency_level="Strong")
        assert [h["id"] for h in hits[0]] == [4, 3]
        got = scoped.query(name, filter="id >= 0", consistency_level="Strong")
        assert len(got) == 5
        assert client.query(name, filter="id >= 0", consistency_level="Strong") == []
        client.use_database(database)  # switch the first client over
        assert name in client.list_collections()
        assert client.get_collection_stats(name)["row_count"] == 5
    finally:
        client.use_database("default")
        client.drop_collection(name)
        scoped.close()


def test_drop_database_rules_follow_milvus(standalone, client, database):
    scoped = MilvusClient(standalone.uri, db_name=database)
    name = _name("docs")
    scoped.create_collection(name, dimension=DIM)
    with pytest.raises(MilvusException, match="must drop all collections before drop database"):
        client.drop_database(database)
    scoped.drop_collection(name)
    scoped.close()
    client.drop_database(database)
    assert database not in client.list_databases()
    with pytest.raises(MilvusException, match="can not drop default database"):
        client.drop_database("default")


def test_a_missing_database_is_an_error(standalone, client):
    with pytest.raises(MilvusException) as err:
        client.use_database("no_such_db")
        client.list_collections()
    assert err.value.code == 800
    client.use_database("default")


# -- aliases ---------------------------------------------------------------------------------
# milvus-lite is no oracle here: it lets an alias name an alias, drops a collection that has
# aliases, and answers code 1; these tests follow Milvus's rootcoord (internal/rootcoord).


def test_an_alias_works_wherever_a_collection_name_does(client):
    blue, green, alias = _name("blue"), _name("green"), _name("live")
    for name in (blue, green):
        client.create_collection(name, dimension=DIM, metric_type="L2")
    client.insert(blue, _rows(3))
    client.insert(green, _rows(4, start=100))
    client.create_alias(blue, alias)
    try:
        assert client.describe_alias(alias)["collection_name"] == blue
        described = client.describe_collection(alias)
        assert described["collection_name"] == blue and described["aliases"] == [alias]
        assert client.list_aliases(blue)["aliases"] == [alias]
        assert alias in client.list_aliases()["aliases"]
        client.insert(alias, _rows(1, start=3))  # writes through the alias
        hits = client.search(alias, [[3.0] * DIM], limit=1, consistency_level="Strong")
        assert hits[0][0]["id"] == 3
        assert len(client.query(alias, filter="id >= 0", consistency_level="Strong")) == 4
        client.release_collection(alias)
        assert client.get_load_state(blue)["state"].name == "NotLoad"
        client.load_collection(alias)
        client.alter_alias(green, alias)  # the blue-green switch
        got = client.query(alias, filter="id >= 0", consistency_level="Strong")
        assert sorted(r["id"] for r in got) == [100, 101, 102, 103]
        assert client.list_aliases(blue)["aliases"] == []
    finally:
        client.drop_alias(alias)
        client.drop_collection(blue)
        client.drop_collection(green)


def test_alias_errors_follow_milvus(client):
    name, other, alias = _name("c"), _name("o"), _name("a")
    client.create_collection(name, dimension=DIM)
    client.create_collection(other, dimension=DIM)
    client.create_alias(name, alias)
    try:
        client.create_alias(name, alias)  # again, same collection: fine
        cases = [
            (lambda: client.create_alias("no_such", "x"), 100),
            (lambda: client.create_alias(alias, "x"), 100),  # an alias of an alias
            (lambda: client.create_alias(other, alias), 1602),
            (lambda: client.create_alias(name, other), 1601),
            (lambda: client.alter_alias(other, "no_such_alias"), 1600),
            (lambda: client.describe_alias("no_such_alias"), 1600),
            (lambda: client.create_collection(alias, dimension=DIM), 1601),
            (lambda: client.drop_collection(name), 65535),  # it has aliases
            (lambda: client.drop_collection(alias), 65535),  # not through an alias
        ]
        for call, code in cases:
            with pytest.raises(MilvusException) as err:
                call()
            assert err.value.code == code, err.value.message
    finally:
        client.drop_alias(alias)
        client.drop_alias(alias)  # a missing alias: fine, as Milvus
        client.drop_collection(name)
        client.drop_collection(other)


def test_aliases_are_scoped_by_database(standalone, client, database):
    scoped = MilvusClient(standalone.uri, db_name=database)
    name, alias = _name("c"), _name("a")
    scoped.create_collection(name, dimension=DIM)
    scoped.create_alias(name, alias)
    try:
        assert scoped.describe_collection(alias)["collection_name"] == name
        assert alias not in client.list_aliases()["aliases"]
        with pytest.raises(MilvusException):
            client.describe_collection(alias)
    finally:
        scoped.drop_alias(alias)
        scoped.drop_collection(name)
        scoped.close()


# -- rename_collection -------------------------------------------------------------------------


def test_rename_keeps_the_data_and_follows_milvus_errors(standalone, client, database):
    old, new, taken = _name("old"), _name("new"), _name("taken")
    client.create_collection(old, dimension=DIM, metric_type="L2")
    client.create_collection(taken, dimension=DIM)
    client.insert(old, _rows(3))
    client.rename_collection(old, new)
    try:
        assert old not in client.list_collections() and new in client.list_collections()
        got = client.query(new, filter="id >= 0", consistency_level="Strong")
        assert sorted(r["id"] for r in got) == [0, 1, 2]  # still loaded, same data
        with pytest.raises(MilvusException, match="duplicated new collection name"):
            client.rename_collection(new, taken)
        client.rename_collection(new, new, target_db=database)  # into another database
        scoped = MilvusClient(standalone.uri, db_name=database)
        assert scoped.list_collections() == [new]
        assert len(scoped.query(new, filter="id >= 0", consistency_level="Strong")) == 3
        scoped.drop_collection(new)
        scoped.close()
    finally:
        client.drop_collection(taken)
        if client.has_collection(new):
            client.drop_collection(new)


# -- across processes --------------------------------------------------------------------------


def test_databases_and_aliases_across_two_proxies(cluster):
    """The rootcoord serves the catalog over RPC, and an alias moved through one proxy is
    followed at once by the other (its cache entry is invalidated, not left to expire)."""
    first, second = (MilvusClient(uri) for uri in cluster.uris[:2])
    db, blue, green, alias = _name("db"), _name("blue"), _name("green"), _name("live")
    first.create_database(db)
    a, b = MilvusClient(cluster.uris[0], db_name=db), MilvusClient(cluster.uris[1], db_name=db)
    try:
        for name, start in ((blue, 0), (green, 100)):
            a.create_collection(name, dimension=DIM, metric_type="L2")
            a.insert(name, _rows(2, start=start))
        a.create_alias(blue, alias)
        assert db in second.list_databases()
        ids = b.query(alias, filter="id >= 0", consistency_level="Strong")
        assert sorted(r["id"] for r in ids) == [0, 1]  # cached in the second proxy
        a.alter_alias(green, alias)
        ids = b.query(alias, filter="id >= 0", consistency_level="Strong")
        assert sorted(r["id"] for r in ids) == [100, 101]
        # a TTL set through one proxy bounds the other's next read (its cache entry goes)
        b.alter_collection_properties(green, {"collection.ttl.seconds": 1})
        time.sleep(1.5)
        assert a.query(alias, filter="id >= 0", consistency_level="Strong") == []
        b.drop_collection_properties(green, ["collection.ttl.seconds"])
        ids = a.query(alias, filter="id >= 0", consistency_level="Strong")
        assert sorted(r["id"] for r in ids) == [100, 101]  # hidden, not yet removed
        b.rename_collection(blue, "renamed")
        assert sorted(a.list_collections()) == sorted([green, "renamed"])
        with grpc.insecure_channel(cluster.uris[0].removeprefix("http://")) as channel:
            reply = _system_info(milvus_pb2_grpc.MilvusServiceStub(channel))
        nodes = json.loads(reply.response)["nodes_info"]
        roles = sorted(n["infos"]["type"] for n in nodes)
        assert roles.count("proxy") == 2 and roles.count("querynode") == 2
        assert "rootcoord" in roles
    finally:
        a.drop_alias(alias)
        for name in a.list_collections():
            a.drop_collection(name)
        first.drop_database(db)
        for client in (first, second, a, b):
            client.close()


# -- partitions --------------------------------------------------------------------------------


def test_load_and_release_partitions(client):
    name = _name("parts")
    client.create_collection(name, dimension=DIM, metric_type="L2")
    client.create_partition(name, "p1")
    client.insert(name, _rows(2))
    client.insert(name, _rows(2, start=10), partition_name="p1")
    client.release_collection(name)
    try:
        client.load_partitions(name, ["p1"])
        assert client.get_load_state(name)["state"].name == "Loaded"
        assert client.get_load_state(name, partition_name="p1")["state"].name == "Loaded"
        assert client.get_load_state(name, partition_name="_default")["state"].name == "NotLoad"
        got = client.query(name, filter="id >= 0", consistency_level="Strong")
        assert sorted(r["id"] for r in got) == [10, 11]  # only the loaded partition
        hits = client.search(name, [[0.0] * DIM], limit=5, consistency_level="Strong")
        assert sorted(h["id"] for h in hits[0]) == [10, 11]
        with pytest.raises(MilvusException) as err:
            client.query(name, filter="id >= 0", partition_names=["_default"])
        assert err.value.code == 201
        with pytest.raises(MilvusException, match="partition is loaded"):
            client.drop_partition(name, "p1")
        client.load_partitions(name, ["_default"])
        got = client.query(name, filter="id >= 0", consistency_level="Strong")
        assert len(got) == 4
        client.release_partitions(name, ["p1"])
        got = client.query(name, filter="id >= 0", consistency_level="Strong")
        assert sorted(r["id"] for r in got) == [0, 1]
        client.release_partitions(name, ["_default"])  # the last one
        assert client.get_load_state(name)["state"].name == "NotLoad"
        client.drop_partition(name, "p1")
    finally:
        client.drop_collection(name)


def test_index_state_and_build_progress(client, stub):
    name = _name("idx")
    client.create_collection(name, dimension=DIM)
    client.insert(name, _rows(3))
    try:
        request = milvus_pb2.GetIndexStateRequest(collection_name=name)
        reply = stub.GetIndexState(request)
        assert reply.status.code == 0
        assert reply.state in (common_pb2.IndexState.Finished, common_pb2.IndexState.InProgress)
        build = milvus_pb2.GetIndexBuildProgressRequest(collection_name=name)
        progress = stub.GetIndexBuildProgress(build)
        assert progress.status.code == 0 and progress.indexed_rows <= progress.total_rows
        missing = stub.GetIndexState(milvus_pb2.GetIndexStateRequest(collection_name="nope"))
        assert missing.status.code == 100
    finally:
        client.drop_collection(name)


def test_the_default_resource_group_holds_every_query_node(client):
    name = _name("rg")
    client.create_collection(name, dimension=DIM)
    try:
        assert client.list_resource_groups() == ["__default_resource_group"]
        group = client.describe_resource_group("__default_resource_group")
        assert group.num_available_node == 1 and len(group.nodes) == 1
        assert group.num_loaded_replica[name] == 1
        with pytest.raises(MilvusException) as err:
            client.describe_resource_group("rg_nope")
        assert err.value.code == 300
    finally:
        client.drop_collection(name)
