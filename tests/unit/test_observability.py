"""The process's metrics/health HTTP server, its gauges, and the Kafka security settings."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

import pytest
from prometheus_client import REGISTRY
from pymilvus.grpc_gen import common_pb2, milvus_pb2

from vectide.services.common.config import Config, KafkaConfig, ServiceConfig
from vectide.services.common.msgstream import kafka
from vectide.services.common.observability import Health, Observability, StateGauge
from vectide.services.infra.deployment import METRICS_PORT_OFFSETS, plan
from vectide.services.proxy.interceptor import reply_status


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture
def served():
    obs = Observability()
    port = free_port()
    release = obs.serve("127.0.0.1", port)
    yield obs, port
    release()


def test_healthz_is_503_until_a_role_registers_then_follows_its_checks(served) -> None:
    obs, port = served
    status, body = get(port, "/healthz")
    assert status == 503 and "no role registered" in json.loads(body)["status"]
    obs.add_check("proxy", lambda: Health(True, "serving"))
    assert get(port, "/healthz")[0] == 200
    remove = obs.add_check("querynode", lambda: Health(False, "dml_0: broker down"))
    status, body = get(port, "/healthz")
    assert status == 503
    assert json.loads(body)["checks"]["querynode"] == {"ok": False, "detail": "dml_0: broker down"}
    remove()
    assert get(port, "/healthz")[0] == 200


def test_a_raising_check_fails_the_probe_with_its_reason(served) -> None:
    obs, port = served

    def broken() -> Health:
        raise RuntimeError("session gone")

    obs.add_check("rootcoord", broken)
    status, body = get(port, "/healthz")
    assert status == 503 and "session gone" in body


def test_metrics_serve_the_default_registry_and_unknown_paths_404(served) -> None:
    _, port = served
    status, body = get(port, "/metrics")
    assert status == 200 and "process_resident_memory_bytes" in body
    assert get(port, "/nope")[0] == 404


def test_one_server_per_process_shared_until_its_last_user_releases_it() -> None:
    obs = Observability()
    port = free_port()
    first = obs.serve("127.0.0.1", port)
    second = obs.serve("127.0.0.1", free_port())  # already serving: shares the first
    assert obs.port == port
    first()
    assert get(port, "/metrics")[0] == 200
    second()
    assert obs.port is None
    with pytest.raises(urllib.error.URLError):
        get(port, "/metrics")


def test_a_taken_metrics_port_is_named_with_the_setting_that_moves_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"127.0.0.1:{port}.*service.metrics_port"):
            Observability().serve("127.0.0.1", port)


def test_state_gauge_merges_sources_and_survives_a_failing_one() -> None:
    gauge = StateGauge("vectide_test_lag_ms", "test", ("vchannel",))
    try:
        drop_a = gauge.add_source(lambda: [(("a",), 1.0)])
        gauge.add_source(lambda: [(("b",), 2.0)])
        gauge.add_source(lambda: 1 / 0)
        (family,) = gauge.collect()
        assert {s.labels["vchannel"]: s.value for s in family.samples} == {"a": 1.0, "b": 2.0}
        drop_a()
        assert REGISTRY.get_sample_value("vectide_test_lag_ms", {"vchannel": "a"}) is None
        assert REGISTRY.get_sample_value("vectide_test_lag_ms", {"vchannel": "b"}) == 2.0
    finally:
        REGISTRY.unregister(gauge)


def test_kafka_security_settings_reach_every_client_conf() -> None:
    assert kafka.security_settings(KafkaConfig()) == {}  # defaults: plaintext
    secured = KafkaConfig(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="u",
        sasl_password="p",
    )
    try:
        kafka.use_security(secured)
        conf = kafka._client_conf("b:9092", **{"acks": "all"})
        assert conf["security.protocol"] == "SASL_SSL"
        assert conf["sasl.mechanisms"] == "SCRAM-SHA-512"
        assert (conf["sasl.username"], conf["sasl.password"]) == ("u", "p")
        assert "ssl.ca.location" not in conf and conf["acks"] == "all"
    finally:
        kafka.use_security(KafkaConfig())
    assert "security.protocol" not in kafka._client_conf("b:9092")


def test_bind_host_changes_where_servers_listen_not_what_they_advertise() -> None:
    assert ServiceConfig().listen_address("10.0.0.7:19530") == "10.0.0.7:19530"
    assert ServiceConfig(bind_host="0.0.0.0").listen_address("10.0.0.7:19530") == "0.0.0.0:19530"


def test_request_status_label_is_the_milvus_code_of_the_reply() -> None:
    ok = milvus_pb2.MutationResult(status=common_pb2.Status(code=0), insert_cnt=3)
    missing = milvus_pb2.BoolResponse(status=common_pb2.Status(code=100))
    legacy = common_pb2.Status(error_code=common_pb2.ErrorCode.UnexpectedError)
    assert [reply_status(r) for r in (ok, missing, legacy)] == ["0", "100", "1"]


def test_local_cluster_metrics_ports_are_distinct_per_role() -> None:
    """`vectide up --mode cluster` runs every role on one host: no two share a port."""
    roles = plan(Config(), "cluster", querynodes=3, proxies=2)
    ports = [r.metrics_port for r in roles]
    assert len(set(ports)) == len(ports)
    assert {r.role for r in roles} <= set(METRICS_PORT_OFFSETS)
    assert all(r.args[-2:] == ["--metrics-port", str(r.metrics_port)] for r in roles)


def test_local_cluster_proxies_serve_rest_on_consecutive_ports() -> None:
    """Proxy i serves the RESTful API on service.http_port + i; other roles serve none."""
    roles = plan(Config(), "cluster", querynodes=2, proxies=3)
    rest = {r.name: r.http_port for r in roles if r.http_port}
    assert rest == {"proxy-0": 19121, "proxy-1": 19122, "proxy-2": 19123}
    proxy = next(r for r in roles if r.name == "proxy-1")
    assert proxy.args[proxy.args.index("--http-port") + 1] == "19122"
    assert proxy.rest_endpoint("h") == "http://h:19122/v2/vectordb"
    (standalone,) = [r for r in plan(Config(), "standalone", 1, 1, datanode=False)]
    assert standalone.http_port == 19121 and "--http-port" in standalone.args
