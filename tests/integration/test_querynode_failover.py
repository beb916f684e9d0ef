"""A query node dies under a running search loop: its shards move to the live node and
searches recover with complete results."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest
from pymilvus import MilvusClient

#: minutes, real processes killed: `make test-heavy` runs these alone
pytestmark = pytest.mark.heavy


def test_killed_query_node_shards_move_and_searches_recover(cluster):
    client = MilvusClient(cluster.uris[0])
    name = "qn_failover"
    client.create_collection(name, dimension=8, num_shards=2, consistency_level="Strong")
    rng = np.random.default_rng(1)
    client.insert(name, [{"id": i, "vector": rng.random(8).tolist()} for i in range(5_000)])
    outcomes: list[tuple[float, bool]] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                count = client.query(name, filter="", output_fields=["count(*)"])[0]["count(*)"]
                hits = client.search(name, [rng.random(8).tolist()], limit=20)[0]
                ok = count == 5_000 and len({h["id"] for h in hits}) == 20
            except Exception:
                ok = False
            outcomes.append((time.monotonic(), ok))
            time.sleep(0.05)

    reader = threading.Thread(target=loop)
    reader.start()
    try:
        time.sleep(1)
        victim = next(r for r in cluster.manager.status() if r.name == "querynode-0")
        killed_at = time.monotonic()
        os.kill(victim.pid, signal.SIGKILL)
        deadline = killed_at + 60
        while time.monotonic() < deadline:
            recent = [ok for t, ok in outcomes if t > killed_at][-10:]
            if len(recent) == 10 and all(recent):
                break
            time.sleep(0.5)
    finally:
        stop.set()
        reader.join()
        client.close()
    before = [ok for t, ok in outcomes if t < killed_at]
    after = [(t, ok) for t, ok in outcomes if t > killed_at]
    assert before and all(before)
    assert after[-10:] and all(ok for _, ok in after[-10:]), "searches did not recover"
    recovered = next(t for t, ok in after if ok and all(o for _, o in after if _ > t))
    print(f"recovered {recovered - killed_at:.1f}s after the kill")
