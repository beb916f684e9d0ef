"""/metrics, /healthz and gRPC health of running deployments: what Kubernetes probes and
Prometheus see (the chart points its probes and ServiceMonitor at exactly these)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families
from pymilvus import DataType, MilvusClient

from tests.infra import TEST_PORTS
from tests.integration.conftest import free_block, isolated, vectide_status
from vectide.services.common.msgstream.channels import pchannels
from vectide.services.common.msgstream.kafka import ChannelProducer
from vectide.services.infra.deployment import DeploymentManager
from vectide.services.proxy.interceptor import MILVUS_SERVICE


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: dict, name: str, **labels: str) -> float | None:
    return found.get((name, frozenset(labels.items())))


@pytest.fixture(scope="module")
def written(standalone):
    """A loaded collection with 50 rows inserted, 5 deleted and one search done."""
    client = MilvusClient(standalone.uri)
    name = f"obs_{uuid.uuid4().hex[:6]}"
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=4)
    index = client.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    client.insert(name, [{"id": i, "vec": [float(i), 0, 0, 0]} for i in range(50)])
    client.delete(name, ids=[0, 1, 2, 3, 4])
    assert len(client.search(name, [[1.0, 0, 0, 0]], limit=3)[0]) == 3
    yield name
    client.drop_collection(name)
    client.close()


def test_healthz_is_200_with_every_role_serving(standalone):
    status, body = get(f"http://127.0.0.1:{standalone.config.service.metrics_port}/healthz")
    report = json.loads(body)
    assert status == 200, report
    checks = report["checks"]
    assert {"zookeeper", "querynode", "rootcoord", "proxy"} <= set(checks)
    assert all(c["ok"] for c in checks.values())
    assert checks["rootcoord"]["detail"] == "active"


def test_metrics_count_requests_rows_and_role_state(standalone, written):
    port = standalone.config.service.metrics_port
    status, body = get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    found = samples(body.decode())
    assert value(found, "vectide_proxy_requests_total", method="Insert", status="0") >= 1
    assert value(found, "vectide_proxy_requests_total", method="Search", status="0") >= 1
    latency = value(
        found, "vectide_proxy_request_latency_seconds_count", method="Insert", status="0"
    )
    assert latency >= 1
    assert value(found, "vectide_proxy_rows_total", op="insert") >= 50
    assert value(found, "vectide_proxy_rows_total", op="delete") >= 5
    assert value(found, "vectide_leader", role="rootcoord") == 1
    assert value(found, "vectide_datacoord_segments", state="Growing") >= 1
    assert value(found, "vectide_datacoord_segment_rows", state="Growing") >= 50
    lags = [v for (name, _), v in found.items() if name == "vectide_querynode_tsafe_lag_ms"]
    idle_tick_ms = standalone.config.time.idle_broadcast_interval_ms
    assert lags and all(0 <= lag < idle_tick_ms + 5_000 for lag in lags)  # loaded, ticking
    assert value(found, "vectide_index_build_queue", state="pending") == 0
    assert value(found, "process_resident_memory_bytes") > 10_000_000


def test_grpc_health_on_the_milvus_port(standalone):
    with grpc.insecure_channel(standalone.uri.removeprefix("http://")) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", MILVUS_SERVICE):
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as err:
            stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=5)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_each_cluster_role_serves_its_own_metrics_port(cluster):
    """`vectide status --json` names every role's metrics endpoint, and each one answers."""
    roles = [r for r in vectide_status(cluster.config)["roles"] if r["pid"] is not None]
    ports = {r["metrics"].rsplit(":", 1)[1].split("/")[0] for r in roles}
    assert len(ports) == len(roles) >= 5  # rootcoord, 2 query nodes, 2 proxies
    for role in roles:
        status, body = get(role["metrics"].replace("/metrics", "/healthz"))
        assert status == 200, (role["name"], body)
        assert role["role"] in json.loads(body)["checks"]
        status, body = get(role["metrics"])
        assert status == 200 and b"process_resident_memory_bytes" in body


@pytest.mark.heavy
def test_standalone_and_data_node_processes_report_flushes(infra, tmp_path):
    """`vectide up` (standalone + the Spark data node, each its own process): the data node's
    own /healthz is 200 once its query runs; a flush shows up as Flushed segments and a
    per-channel flush lag on the standalone's /metrics."""
    config = isolated(infra, "o")
    config.infra.run_dir = str(tmp_path)  # its own deployment record, beside the cluster's
    config.kafka.managed = config.zookeeper.managed = config.s3.managed = False
    base = free_block(TEST_PORTS["kafka"] + 900, 160)  # clear of the cluster fixture's
    config.service.metrics_port = base  # the standalone's; the data node's is + 150
    config.service.proxy_port = base + 20
    config.service.rootcoord_port = base + 30
    config.service.http_port = base + 40
    # a Spark session starting on a busy 2-core box: the cluster fixture's session timeout
    config.infra.startup_timeout_s = 180
    config.zookeeper.session_timeout_s = 10.0
    manager = DeploymentManager(config)
    try:
        manager.up("standalone", datanode=True)
        roles = {r["role"]: r for r in vectide_status(config)["roles"]}
        status, body = get(roles["datanode"]["metrics"].replace("/metrics", "/healthz"))
        assert status == 200
        assert json.loads(body)["checks"]["datanode"]["detail"].startswith("active")
        client = MilvusClient(f"http://{roles['standalone']['endpoint']}")
        schema = client.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("vec", DataType.FLOAT_VECTOR, dim=4)
        index = client.prepare_index_params()
        index.add_index("vec", index_type="FLAT", metric_type="L2")
        client.create_collection("flushed", schema=schema, index_params=index)
        client.insert("flushed", [{"id": i, "vec": [float(i), 0, 0, 0]} for i in range(1000)])
        client.flush("flushed")  # waits until the data node persisted the segment
        client.close()
        found = samples(get(roles["standalone"]["metrics"])[1].decode())
        assert value(found, "vectide_datacoord_segments", state="Flushed") >= 1
        assert value(found, "vectide_datacoord_segment_rows", state="Flushed") >= 1000
        lags = [v for (name, _), v in found.items() if name == "vectide_datacoord_flush_lag_ms"]
        assert lags and min(lags) < 60_000
        found = samples(get(roles["datanode"]["metrics"])[1].decode())
        assert value(found, "vectide_leader", role="datanode") == 1
    finally:
        manager.down(infra=False)


def test_poison_on_the_channels_is_skipped_and_counted(standalone, written):
    """Garbage written straight into every channel: the query node skips it, keeps applying
    what follows, and /metrics counts what it skipped."""
    config = standalone.config
    producer = ChannelProducer(config.kafka.bootstrap_servers)
    for channel in pchannels(config.cluster.name, config.cluster.dml_channels):
        producer.send_raw(channel, b"\x00\xffnot a vectide message")
    producer.close()
    client = MilvusClient(standalone.uri)
    before = client.query(written, output_fields=["count(*)"], consistency_level="Strong")
    client.insert(written, [{"id": 1000 + i, "vec": [0.5, 0, 0, 0]} for i in range(3)])
    after = client.query(written, output_fields=["count(*)"], consistency_level="Strong")
    assert after[0]["count(*)"] == before[0]["count(*)"] + 3
    client.close()
    found = samples(get(f"http://127.0.0.1:{config.service.metrics_port}/metrics")[1].decode())
    undecodable = [
        v
        for (name, labels), v in found.items()
        if name == "vectide_querynode_skipped_messages" and ("reason", "undecodable") in labels
    ]
    assert undecodable and sum(undecodable) >= 1
