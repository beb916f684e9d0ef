"""The quota section enforced end to end: nq, topk and collection-count limits through
pymilvus, and a per-user search rate answered with Milvus's RATE_LIMIT (code 8)."""

from __future__ import annotations

import struct
import time
import uuid
from types import SimpleNamespace

import grpc
import pytest
from pymilvus import MilvusClient, MilvusException
from pymilvus.grpc_gen import common_pb2, milvus_pb2, milvus_pb2_grpc

from tests.integration.conftest import free_port, isolated
from vectide.services.launcher import start_standalone

DIM = 4


@pytest.fixture(scope="module")
def limited(infra):
    config = isolated(infra, "l")
    config.quota.max_nq = 3
    config.quota.max_topk = 50
    config.quota.max_collections = 2
    config.quota.rate_limit_enabled = True
    config.quota.search_rate_vps = 4
    port = free_port()
    deployment = start_standalone(config, querynodes=1, proxy_port=port, ingest=False)
    client = MilvusClient(f"http://127.0.0.1:{port}")
    name = f"lim_{uuid.uuid4().hex[:6]}"
    client.create_collection(name, dimension=DIM, consistency_level="Strong")
    client.insert(name, [{"id": i, "vector": [1.0, float(i), 0, 0]} for i in range(10)])
    yield SimpleNamespace(address=f"127.0.0.1:{port}", client=client, name=name)
    client.close()
    deployment.stop()


def _search(address: str, name: str, nq: int) -> common_pb2.Status:
    vectors = [struct.pack("<4f", 1.0, 2.0, 0.0, 0.0)] * nq
    holder = common_pb2.PlaceholderValue(
        tag="$0", type=common_pb2.PlaceholderType.FloatVector, values=vectors
    )
    request = milvus_pb2.SearchRequest(
        collection_name=name,
        placeholder_group=common_pb2.PlaceholderGroup(placeholders=[holder]).SerializeToString(),
        search_params=[common_pb2.KeyValuePair(key="topk", value="3")],
        nq=nq,
        dsl_type=1,
    )
    with grpc.insecure_channel(address) as channel:
        return milvus_pb2_grpc.MilvusServiceStub(channel).Search(request, timeout=10).status


def test_search_rate_per_user_is_a_token_bucket(limited):
    time.sleep(1.1)  # a full bucket: 4 vectors
    assert _search(limited.address, limited.name, 3).code == 0
    refused = _search(limited.address, limited.name, 3)
    assert refused.code == 8 and refused.error_code == common_pb2.RateLimit
    assert "rate limit exceeded" in refused.reason and "anonymous" in refused.reason
    time.sleep(1.1)  # refilled
    assert _search(limited.address, limited.name, 3).code == 0


def test_nq_and_topk_limits_reach_pymilvus(limited):
    time.sleep(1.1)
    with pytest.raises(MilvusException, match=r"quota\.max_nq") as caught:
        limited.client.search(limited.name, [[1.0, 2.0, 0, 0]] * 4, limit=3)
    assert caught.value.code == 1100
    time.sleep(1.1)
    with pytest.raises(MilvusException, match=r"quota\.max_topk"):
        limited.client.search(limited.name, [[1.0, 2.0, 0, 0]], limit=51)


def test_collection_count_limit(limited):
    limited.client.create_collection(f"lim2_{uuid.uuid4().hex[:6]}", dimension=DIM)
    with pytest.raises(MilvusException, match=r"quota\.max_collections") as caught:
        limited.client.create_collection(f"lim3_{uuid.uuid4().hex[:6]}", dimension=DIM)
    assert caught.value.code == 102
