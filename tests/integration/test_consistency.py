"""Consistency levels across processes: 2 proxies and 2 query nodes, each its own process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from pymilvus import MilvusClient, MilvusException

from tests.infra import REPO
from tests.integration.conftest import vectide_status

VEC = [0.1, 0.2, 0.3, 0.4]


@pytest.fixture(scope="module")
def clients(cluster):
    pair = [MilvusClient(uri) for uri in cluster.uris]
    yield pair
    for c in pair:
        c.close()


class Reader:
    """Client 2: another process, connected to another proxy."""

    def __init__(self, uri: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.reader_child", uri],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        assert json.loads(self.proc.stdout.readline()) == {"ready": True}

    def search(self, collection: str) -> list[int]:
        self.proc.stdin.write(json.dumps({"collection": collection, "vector": VEC}) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        assert "error" not in answer, answer
        return answer["ids"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def test_seeds_timeline_strong_reads_from_another_process_and_proxy(cluster, clients):
    writer = clients[0]
    reader = Reader(cluster.uris[1])
    try:
        for round_ in range(20):
            name = f"timeline_{round_}_{uuid.uuid4().hex[:4]}"
            writer.create_collection(name, dimension=4)  # Bounded by default
            assert reader.search(name) == []
            writer.insert(name, [{"id": 1, "vector": VEC}])
            assert reader.search(name) == [1]
            writer.insert(name, [{"id": 2, "vector": VEC}])
            assert reader.search(name) == [1, 2]
            writer.delete(name, ids=[1])
            assert reader.search(name) == [2]
            writer.drop_collection(name)
    finally:
        reader.close()


def test_session_reads_its_own_writes_with_the_default_level(clients):
    client = clients[1]
    name = f"session_{uuid.uuid4().hex[:6]}"
    client.create_collection(name, dimension=4, consistency_level="Session")
    for i in range(30):
        client.insert(name, [{"id": i, "vector": [float(i), 1.0, 0.0, 0.0]}])
        # no consistency_level: pymilvus sends its last write ts, the collection says Session
        got = client.query(name, filter=f"id == {i}", output_fields=["id"])
        assert got == [{"id": i}], f"write {i} not visible to its own session"
    client.drop_collection(name)


def proxy_pid(cluster, index: int) -> int:
    proxies = [r for r in cluster.manager.status() if r.role == "proxy"]
    return proxies[index].pid


def test_stalled_channel_strong_fails_bounded_and_eventually_do_not_wait(cluster, clients):
    client = clients[0]
    name = f"stall_{uuid.uuid4().hex[:6]}"
    client.create_collection(name, dimension=4)
    client.insert(name, [{"id": i, "vector": VEC} for i in range(5)])
    assert len(client.query(name, filter="id >= 0", consistency_level="Strong")) == 5
    time.sleep(0.5)
    stalled = proxy_pid(cluster, 1)
    os.kill(stalled, signal.SIGSTOP)  # a live proxy that stops reporting holds every channel
    try:
        for level in ("Eventually", "Bounded"):
            start = time.monotonic()
            hits = client.search(name, [VEC], limit=10, consistency_level=level)[0]
            assert len(hits) == 5
            assert time.monotonic() - start < 1.0, f"{level} waited for the stalled channel"
        start = time.monotonic()
        with pytest.raises(MilvusException, match="not reached within") as strong:
            client.search(name, [VEC], limit=10, consistency_level="Strong")
        waited = time.monotonic() - start
        assert 1.5 < waited < 6, waited
        assert "Bounded/Eventually" in strong.value.message
    finally:
        os.kill(stalled, signal.SIGCONT)
    # once the proxy reports again, Strong reads work again
    assert len(client.search(name, [VEC], limit=10, consistency_level="Strong")[0]) == 5
    client.drop_collection(name)


def test_sharded_collection_spreads_over_nodes_and_merges_exactly(cluster, clients):
    import numpy as np

    client = clients[0]
    name = f"sharded_{uuid.uuid4().hex[:6]}"
    client.create_collection(
        name, dimension=8, num_shards=2, metric_type="L2", consistency_level="Strong"
    )
    assert client.describe_collection(name)["num_shards"] == 2
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((1000, 8)).astype(np.float32)
    client.insert(name, [{"id": i, "vector": v.tolist()} for i, v in enumerate(vectors)])
    queries = vectors[:5] + 0.05
    results = client.search(name, queries.tolist(), limit=20, search_params={"metric_type": "L2"})
    for q, hits in zip(queries, results, strict=True):
        truth = np.argsort(((vectors - q) ** 2).sum(1))[:20].tolist()
        assert [h["id"] for h in hits] == truth
    assert client.query(name, filter="", output_fields=["count(*)"])[0]["count(*)"] == 1000
    page = client.query(name, filter="id >= 0", output_fields=["id"], limit=10, offset=495)
    assert [r["id"] for r in page] == list(range(495, 505))
    client.drop_collection(name)


def test_vectide_status_json_lists_every_role_with_pid_and_endpoint(cluster):
    status = vectide_status(cluster.config)
    roles = {r["name"]: r for r in status["roles"]}
    assert {"querynode-0", "querynode-1", "proxy-0", "proxy-1", "ingest-0"} <= set(roles)
    assert roles["ingest-0"]["role"] == "ingest" and roles["ingest-0"]["pid"]
    for role in roles.values():
        if role["pid"] is not None:  # the failover test may have replaced the rootcoord
            assert role["healthy"]
            assert role["endpoint"] == "-" or role["endpoint"].startswith("127.0.0.1:")
    assert roles["proxy-1"]["endpoint"].endswith(str(cluster.config.service.proxy_port + 1))
    assert all(s["healthy"] for s in status["infra"])
