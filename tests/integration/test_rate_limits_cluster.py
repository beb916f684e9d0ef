"""A cluster-wide rate limit over two real proxy processes: each enforces half of
``quota.query_rate_qps``, so a client hammering both gets the configured rate in all (not
twice it); when one proxy leaves, the other takes the whole rate."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field
from types import SimpleNamespace

import grpc
import pytest
from pymilvus import MilvusClient
from pymilvus.grpc_gen import milvus_pb2, milvus_pb2_grpc

from tests.infra import TEST_PORTS
from tests.integration.conftest import cluster_ports, free_block, isolated
from vectide.services.infra.deployment import DeploymentManager

RATE = 20  # queries per second, cluster-wide
SECONDS = 4.0


@pytest.fixture(scope="module")
def two_proxies(infra):
    config = isolated(infra, "r")
    config.zookeeper.session_timeout_s = 10.0
    config.supervisor.enabled = False  # a stopped proxy stays stopped
    config.quota.rate_limit_enabled = True
    config.quota.query_rate_qps = RATE
    cluster_ports(config, free_block(TEST_PORTS["kafka"] + 1250, 200))  # clear of the others
    manager = DeploymentManager(config, progress=lambda line: print(f"[cluster] {line}"))
    try:
        manager.up("cluster", querynodes=1, proxies=2, datanode=False, ingest=0, rootcoords=1)
        proxies = [r for r in manager.status() if r.role == "proxy"]
        name = f"rate_{uuid.uuid4().hex[:6]}"
        client = MilvusClient(f"http://{proxies[0].endpoint}")
        client.create_collection(name, dimension=4, consistency_level="Eventually")
        client.insert(name, [{"id": i, "vector": [float(i), 1.0, 0.0, 0.0]} for i in range(10)])
        client.close()
        yield SimpleNamespace(proxies=proxies, name=name)
    finally:
        manager.down(infra=False)


@dataclass
class Answers:
    """What one proxy answered during a run."""

    admitted: int = 0
    limited: int = 0  # code 8, RATE_LIMIT
    other: list[str] = field(default_factory=list)
    reason: str = ""  # the last refusal's message


def _hammer(endpoints: list[str], name: str, seconds: float) -> dict[str, Answers]:
    """Queries sent as fast as 2 threads per proxy can for ``seconds``, raw gRPC (pymilvus
    would retry refusals)."""
    answers = {e: Answers() for e in endpoints}
    lock = threading.Lock()
    request = milvus_pb2.QueryRequest(collection_name=name, expr="id >= 0", output_fields=["id"])
    stop = time.monotonic() + seconds

    def run(endpoint: str) -> None:
        with grpc.insecure_channel(endpoint) as channel:
            stub = milvus_pb2_grpc.MilvusServiceStub(channel)
            while time.monotonic() < stop:
                status = stub.Query(request, timeout=10).status
                with lock:
                    seen = answers[endpoint]
                    if status.code == 0:
                        seen.admitted += 1
                    elif status.code == 8:
                        seen.limited += 1
                        seen.reason = status.reason
                    else:
                        seen.other.append(f"{status.code}: {status.reason}")

    threads = [threading.Thread(target=run, args=(e,)) for e in endpoints for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def _allowed(seconds: float) -> float:
    """What the cluster-wide rate admits in ``seconds`` from full buckets: the rate over the
    run plus one second's burst (each proxy's bucket holds a second of its share)."""
    return RATE * seconds + RATE


def test_two_proxies_admit_the_cluster_wide_rate_in_all(two_proxies):
    endpoints = [p.endpoint for p in two_proxies.proxies]
    time.sleep(1.1)  # full buckets
    answers = _hammer(endpoints, two_proxies.name, SECONDS)
    print("per proxy:", answers)
    for seen in answers.values():
        assert seen.limited > 0 and not seen.other
        assert f"= {RATE} / 2 proxies" in seen.reason  # each enforces its half
    admitted = sum(seen.admitted for seen in answers.values())
    # without the split each proxy would admit the whole rate: about twice as many
    print(f"admitted {admitted} in {SECONDS} s; the limit allows ~{_allowed(SECONDS):.0f}")
    assert 0.75 * _allowed(SECONDS) <= admitted <= 1.1 * _allowed(SECONDS)


def test_a_proxy_leaving_gives_the_other_the_whole_rate(two_proxies):
    gone, kept = two_proxies.proxies
    os.kill(gone.pid, signal.SIGTERM)  # its session ends; the other's watch fires
    time.sleep(2.0)
    seen = _hammer([kept.endpoint], two_proxies.name, SECONDS)[kept.endpoint]
    print("one proxy left:", seen)
    assert f"= {RATE} / 1 proxies" in seen.reason and not seen.other
    assert 0.75 * _allowed(SECONDS) <= seen.admitted <= 1.1 * _allowed(SECONDS)
