"""TLS on the proxy's gRPC and REST ports through unmodified pymilvus (one-way and mutual, as
Milvus's ``common.security.tlsMode``), the readiness probe over TLS, and a local cluster whose
roles talk mutual TLS to each other (``security.internal_tls``)."""

from __future__ import annotations

import json
import ssl
import urllib.request
import uuid
from types import SimpleNamespace

import grpc
import pytest
from pymilvus import MilvusClient
from pymilvus.grpc_gen import milvus_pb2, milvus_pb2_grpc

from tests.certs import CertFiles, make_certs
from tests.integration.conftest import TEST_PORTS, cluster_ports, free_block, free_port, isolated
from vectide.services.common import tls
from vectide.services.common.config import SecurityConfig
from vectide.services.common.rpc.transport import use_tls
from vectide.services.infra.deployment import DeploymentManager, milvus_answers
from vectide.services.launcher import start_standalone

pytestmark = pytest.mark.integration

DIM = 4


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> CertFiles:
    return make_certs(tmp_path_factory.mktemp("certs"))


def _with_tls(config, certs: CertFiles, mode: int) -> None:
    config.security.tls_mode = mode
    config.security.tls_cert_file = str(certs.cert)
    config.security.tls_key_file = str(certs.key)
    config.security.tls_ca_file = str(certs.ca)


def _standalone(infra, certs: CertFiles, mode: int):
    config = isolated(infra, f"t{mode}")
    _with_tls(config, certs, mode)
    port = free_port()
    deployment = start_standalone(config, querynodes=1, proxy_port=port, ingest=False)
    return deployment, SimpleNamespace(
        address=f"127.0.0.1:{port}", rest=f"https://127.0.0.1:{config.service.http_port}"
    )


@pytest.fixture(scope="module")
def one_way(infra, certs):
    deployment, server = _standalone(infra, certs, tls.ONE_WAY)
    yield server
    deployment.stop()
    use_tls(SecurityConfig())  # this process's RPC clients back to plain for later modules


@pytest.fixture(scope="module")
def mutual(infra, certs):
    deployment, server = _standalone(infra, certs, tls.MUTUAL)
    yield server
    deployment.stop()
    use_tls(SecurityConfig())


def _roundtrip(client: MilvusClient) -> None:
    """Create, insert and read back over the connection: the whole API goes through TLS."""
    name = f"tls_{uuid.uuid4().hex[:6]}"
    client.create_collection(name, dimension=DIM, consistency_level="Strong")
    rows = [{"id": i, "vector": [1.0, float(i), 0.0, 0.0]} for i in range(5)]
    client.insert(name, rows)
    hits = client.search(name, [[1.0, 4.0, 0.0, 0.0]], limit=1)  # COSINE: 4 is the nearest
    assert hits[0][0]["id"] == 4
    assert client.query(name, filter="id >= 0", output_fields=["count(*)"])[0]["count(*)"] == 5
    client.drop_collection(name)


def _mutual_roundtrip(address: str, certs: CertFiles) -> None:
    """``_roundtrip`` through pymilvus presenting the client certificate (mutual TLS)."""
    client = MilvusClient(
        uri=f"https://{address}",
        client_pem_path=str(certs.client_cert),
        client_key_path=str(certs.client_key),
        ca_pem_path=str(certs.ca),
        server_name="localhost",
    )
    try:
        _roundtrip(client)
    finally:
        client.close()


def _rest_list(url: str, context: ssl.SSLContext) -> dict:
    request = urllib.request.Request(f"{url}/v2/vectordb/collections/list", data=b"{}")
    with urllib.request.urlopen(request, context=context, timeout=10) as reply:
        return json.loads(reply.read())


def test_one_way_tls_serves_pymilvus_and_rest(one_way, certs):
    client = MilvusClient(
        uri=f"https://{one_way.address}", server_pem_path=str(certs.ca), server_name="localhost"
    )
    try:
        _roundtrip(client)
    finally:
        client.close()
    trusted = ssl.create_default_context(cafile=str(certs.ca))
    assert _rest_list(one_way.rest, trusted)["code"] == 0
    # a client that does not trust the CA is refused by its own TLS check
    with pytest.raises(urllib.error.URLError):
        _rest_list(one_way.rest, ssl.create_default_context())


def test_one_way_refuses_plain_clients(one_way):
    # (raw channels: pymilvus shares one connection per address between clients)
    assert not milvus_answers(one_way.address, timeout_s=2)
    with grpc.insecure_channel(one_way.address) as channel, pytest.raises(grpc.RpcError):
        milvus_pb2_grpc.MilvusServiceStub(channel).GetVersion(
            milvus_pb2.GetVersionRequest(), timeout=3
        )


def test_probe_uses_the_configured_ca(one_way, certs):
    config = SecurityConfig(tls_mode=1, tls_cert_file=str(certs.cert), tls_key_file=str(certs.key))
    config.tls_ca_file = str(certs.ca)
    assert milvus_answers(one_way.address, files=tls.client_files(config))
    config.tls_ca_file = str(certs.stranger_cert)  # a CA that did not sign the server's
    assert not milvus_answers(one_way.address, files=tls.client_files(config))


def test_mutual_tls_needs_a_client_certificate(mutual, certs):
    _mutual_roundtrip(mutual.address, certs)
    # without a client certificate, or with one the CA did not sign, the handshake fails
    # (raw channels: pymilvus shares one connection per address between clients)
    ca = certs.ca.read_bytes()
    refused = [
        grpc.ssl_channel_credentials(root_certificates=ca),
        grpc.ssl_channel_credentials(
            ca, certs.stranger_key.read_bytes(), certs.stranger_cert.read_bytes()
        ),
    ]
    for credentials in refused:
        with grpc.secure_channel(mutual.address, credentials) as channel:
            with pytest.raises(grpc.RpcError) as caught:
                milvus_pb2_grpc.MilvusServiceStub(channel).GetVersion(
                    milvus_pb2.GetVersionRequest(), timeout=3
                )
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


def test_mutual_tls_on_rest(mutual, certs):
    context = ssl.create_default_context(cafile=str(certs.ca))
    context.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    assert _rest_list(mutual.rest, context)["code"] == 0
    without = ssl.create_default_context(cafile=str(certs.ca))
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
        _rest_list(mutual.rest, without)


def test_cluster_roles_talk_mutual_tls(infra, certs):
    """`vectide up --mode cluster` with mutual TLS on the proxy and between roles: the
    readiness probe and `status` pass, and pymilvus's writes and reads cross every internal
    hop (proxy -> rootcoord, querycoord, query node) over TLS."""
    config = isolated(infra, "tc")
    _with_tls(config, certs, tls.MUTUAL)
    config.security.internal_tls = True
    cluster_ports(config, free_block(TEST_PORTS["kafka"] + 1500, 200))  # clear of the others
    manager = DeploymentManager(config, progress=lambda line: print(f"[tls-cluster] {line}"))
    try:
        manager.up("cluster", querynodes=1, proxies=1, datanode=False)
        roles = manager.status()
        assert all(r.healthy for r in roles), roles
        proxy = next(r for r in roles if r.role == "proxy")
        assert proxy.rest.startswith("https://"), proxy.rest
        _mutual_roundtrip(proxy.endpoint, certs)
        _assert_internal_port_needs_tls(f"127.0.0.1:{config.service.querynode_port}", certs)
    finally:
        manager.down(infra=False)


def _assert_internal_port_needs_tls(address: str, certs: CertFiles) -> None:
    """A query node's internal port completes a handshake with the roles' certificate only."""
    files = tls.TlsFiles(
        str(certs.cert),
        str(certs.key),
        certs.cert.read_bytes(),
        certs.key.read_bytes(),
        certs.ca.read_bytes(),
        "",
    )
    with grpc.secure_channel(address, tls.channel_credentials(files)) as channel:
        grpc.channel_ready_future(channel).result(timeout=5)
    with grpc.insecure_channel(address) as channel, pytest.raises(grpc.FutureTimeoutError):
        grpc.channel_ready_future(channel).result(timeout=2)
