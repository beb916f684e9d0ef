"""Rootcoord failover under load: the deployment's standby takes over when the active one is
killed, and the timestamps clients see keep strictly increasing."""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time

import grpc
import pytest
from pymilvus import MilvusClient, MilvusException
from pymilvus.grpc_gen import milvus_pb2, milvus_pb2_grpc

from vectide.services.common.errors import Code

#: minutes, real processes killed: `make test-heavy` runs these alone
pytestmark = pytest.mark.heavy


def test_standby_rootcoord_takes_over_and_timestamps_keep_increasing(cluster):
    assert len([r for r in cluster.manager.status() if r.role == "rootcoord"]) == 2
    client = MilvusClient(cluster.uris[0])
    channel = grpc.insecure_channel(cluster.uris[0].removeprefix("http://"))
    stub = milvus_pb2_grpc.MilvusServiceStub(channel)
    try:
        client.create_collection("failover", dimension=4, consistency_level="Strong")
        seen: list[int] = []  # every stamp a client got back, in the order it got them
        inserted: list[int] = []
        retried: list[str] = []  # retriable failures during the failover
        stop = threading.Event()

        failed: list[BaseException] = []  # an assert in the thread, reported by the test

        def load() -> None:
            try:
                run_load()
            except BaseException as exc:
                failed.append(exc)

        def run_load() -> None:
            """Stamps and inserts; while the standby takes over the proxy fails them fast
            with a retriable SERVICE_UNAVAILABLE (nothing written), and the loop retries."""
            i = 0
            while not stop.is_set():
                reply = stub.AllocTimestamp(milvus_pb2.AllocTimestampRequest(), timeout=60)
                if reply.status.code == Code.SERVICE_UNAVAILABLE:
                    retried.append(reply.status.reason)
                    continue
                assert reply.status.code == 0, reply.status
                seen.append(reply.timestamp)
                try:
                    client.insert("failover", [{"id": i, "vector": [float(i), 0.0, 0.0, 1.0]}])
                except MilvusException as exc:
                    assert exc.code == Code.SERVICE_UNAVAILABLE, exc
                    retried.append(exc.message)
                    continue
                inserted.append(i)
                i += 1

        worker = threading.Thread(target=load)
        worker.start()
        time.sleep(2)
        active = next(r for r in cluster.manager.status() if r.name == "rootcoord")
        before = len(seen)
        os.kill(active.pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while len(seen) < before + 20 and time.monotonic() < deadline and worker.is_alive():
            time.sleep(0.2)
        stop.set()
        worker.join(timeout=70)
        print(f"{len(retried)} retriable failures during the failover")
        assert failed == [], failed
        assert len(seen) >= before + 20, "the cluster did not recover from the failover"
        assert all(a < b for a, b in itertools.pairwise(seen))
        got = client.query("failover", filter="id >= 0", output_fields=["id"])
        assert sorted(r["id"] for r in got) == inserted
    finally:
        channel.close()
        client.close()
