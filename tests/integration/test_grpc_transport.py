"""The proxy's gRPC transport as Milvus's: requests up to 64 MB (larger ones fail with
RESOURCE_EXHAUSTED), gzip- and deflate-compressed requests, and the keepalive pings clients
send while idle, which must not cost them their connection."""

from __future__ import annotations

import time
import uuid

import grpc
import numpy as np
import pytest
from pymilvus import DataType, MilvusClient
from pymilvus.grpc_gen import common_pb2, milvus_pb2, milvus_pb2_grpc, schema_pb2

from vectide.services.proxy.service import MAX_REQUEST_BYTES

DIM = 768


@pytest.fixture(scope="module")
def collection(client):
    name = f"tr_{uuid.uuid4().hex[:6]}"
    schema = client.create_schema(auto_id=False)
    schema.add_field("pk", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    index = client.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    yield name
    client.drop_collection(name)


def stub(standalone, **channel) -> milvus_pb2_grpc.MilvusServiceStub:
    options = [("grpc.max_send_message_length", -1), *channel.pop("options", [])]
    address = standalone.uri.removeprefix("http://")
    return milvus_pb2_grpc.MilvusServiceStub(
        grpc.insecure_channel(address, options=options, **channel)
    )


def count(client: MilvusClient, name: str) -> int:
    return client.query(name, filter="", output_fields=["count(*)"])[0]["count(*)"]


def test_an_insert_over_grpcs_default_4mb_goes_through_pymilvus(client, collection):
    vectors = np.random.default_rng(0).standard_normal((2000, DIM)).astype(np.float32)
    assert vectors.nbytes > 5 * 1024 * 1024  # gRPC's default limit is 4 MB
    client.insert(collection, [{"pk": i, "vec": v} for i, v in enumerate(vectors)])
    assert count(client, collection) == 2000
    [hits] = client.search(collection, [vectors[1234].tolist()], limit=1)
    assert hits[0].id == 1234


def test_a_request_over_64mb_is_refused_as_milvus_refuses_it(standalone, collection):
    group = common_pb2.PlaceholderGroup()
    group.placeholders.add(
        tag="$0", type=common_pb2.PlaceholderType.FloatVector, values=[b"\0" * MAX_REQUEST_BYTES]
    )
    request = milvus_pb2.SearchRequest(
        collection_name=collection, placeholder_group=group.SerializeToString(), nq=1
    )
    with pytest.raises(grpc.RpcError) as refused:
        stub(standalone).Search(request, timeout=60)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


@pytest.mark.parametrize("algorithm", [grpc.Compression.Gzip, grpc.Compression.Deflate])
def test_compressed_requests_are_accepted(standalone, client, collection, algorithm):
    compressed = stub(standalone, compression=algorithm)
    before = count(client, collection)
    first = 10_000 + 100 * int(algorithm)
    pks = schema_pb2.FieldData(type=DataType.INT64, field_name="pk")
    pks.scalars.long_data.data.extend(range(first, first + 10))
    vecs = schema_pb2.FieldData(type=DataType.FLOAT_VECTOR, field_name="vec")
    vecs.vectors.dim = DIM
    vecs.vectors.float_vector.data.extend([0.5] * DIM * 10)
    inserted = compressed.Insert(
        milvus_pb2.InsertRequest(collection_name=collection, fields_data=[pks, vecs], num_rows=10),
        timeout=30,
    )
    assert inserted.status.code == 0 and inserted.insert_cnt == 10
    assert count(client, collection) == before + 10
    reply = compressed.HasCollection(milvus_pb2.HasCollectionRequest(collection_name=collection))
    assert reply.value is True


def test_an_idle_client_pinging_as_sdks_do_keeps_its_connection(standalone):
    """Pings every 5 s without calls (pymilvus sends one each 10 s): gRPC's default server
    policy answers the third with GOAWAY ``too_many_pings`` and the channel drops."""
    address = standalone.uri.removeprefix("http://")
    channel = grpc.insecure_channel(
        address,
        options=[
            ("grpc.keepalive_time_ms", 5000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
        ],
    )
    states: list[grpc.ChannelConnectivity] = []
    channel.subscribe(states.append, try_to_connect=True)
    milvus_pb2_grpc.MilvusServiceStub(channel).GetVersion(milvus_pb2.GetVersionRequest())
    time.sleep(17)  # three pings: enough for the default policy to give up on us
    assert states[-1] == grpc.ChannelConnectivity.READY, states
    assert states.count(grpc.ChannelConnectivity.READY) == 1, states  # never reconnected
    channel.unsubscribe(states.append)
    channel.close()
