"""Reads while the coordinator is stalled (SIGSTOP): Eventually reads need no timestamp and no
placement from it, so they keep answering from the proxy's caches and the query nodes."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
from pymilvus import MilvusClient


def test_eventually_reads_answer_while_the_coordinator_is_stopped(cluster):
    client = MilvusClient(cluster.uris[1])
    name = "stall_reads"
    client.create_collection(name, dimension=8, num_shards=2, consistency_level="Eventually")
    rng = np.random.default_rng(3)
    vectors = rng.random((500, 8)).astype(np.float32)
    client.insert(name, [{"id": i, "vector": v.tolist()} for i, v in enumerate(vectors)])
    strong = {"consistency_level": "Strong"}
    assert client.query(name, output_fields=["count(*)"], **strong)[0]["count(*)"] == 500
    client.search(name, [vectors[0].tolist()], limit=1)  # the proxy has seen the placement
    rootcoord = next(r for r in cluster.manager.status() if r.role == "rootcoord")
    os.kill(rootcoord.pid, signal.SIGSTOP)
    try:
        answered = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            started = time.monotonic()
            hits = client.search(name, [vectors[7].tolist()], limit=1, timeout=2)
            count = client.query(name, output_fields=["count(*)"], timeout=2)[0]["count(*)"]
            answered.append(time.monotonic() - started)
            assert hits[0][0]["id"] == 7 and count == 500
        assert len(answered) >= 5 and max(answered) < 1.0
    finally:
        os.kill(rootcoord.pid, signal.SIGCONT)
    assert client.query(name, output_fields=["count(*)"], **strong)[0]["count(*)"] == 500
    client.drop_collection(name)
    client.close()
