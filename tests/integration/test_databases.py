"""What Attu and pymilvus call when they connect and list, databases, aliases and renames,
through unmodified pymilvus (and the raw Milvus stub for RPCs pymilvus does not wrap)."""

from __future__ import annotations

import json
import uuid

import grpc
import pytest
from pymilvus import MilvusClient, MilvusException
from pymilvus.grpc_gen import common_pb2, milvus_pb2, milvus_pb2_grpc

DIM = 4


@pytest.fixture(scope="module")
def client(standalone):
    client = MilvusClient(standalone.uri)
    yield client
    client.close()


@pytest.fixture(scope="module")
def stub(standalone):
    channel = grpc.insecure_channel(standalone.uri.removeprefix("http://"))
    yield milvus_pb2_grpc.MilvusServiceStub(channel)
    channel.close()


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
    request = json.dumps({"metric_type": "system_info"})
    reply = stub.GetMetrics(milvus_pb2.GetMetricsRequest(request=request))
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
