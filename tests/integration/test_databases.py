"""What Attu and pymilvus call when they connect and list, databases, aliases and renames,
through unmodified pymilvus (and the raw Milvus stub for RPCs pymilvus does not wrap)."""

from __future__ import annotations

import json
import uuid

import grpc
import pytest
from pymilvus import MilvusClient
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
