"""The metastore, sessions and leader election against a real ZooKeeper."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.contract.kv_contract import KVContract
from vectide.services.common.election import LeaderElection
from vectide.services.common.kv.zookeeper import connect_zookeeper
from vectide.services.common.session import SessionRegistry


class TestZooKeeperKV(KVContract):
    @pytest.fixture
    def kv(self, zk_kv):
        return zk_kv

    def test_concurrent_compare_and_set_has_one_winner(self, kv):
        wins = []

        def contend(i: int) -> None:
            if kv.compare_and_set("race", None, str(i).encode()):
                wins.append(i)

        threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(wins) == 1
        assert kv.get("race") == str(wins[0]).encode()


SESSION_CHILD = """
import sys, time
from vectide.services.common.config import load_config
from vectide.services.common.kv.zookeeper import connect_zookeeper
from vectide.services.common.session import SessionRegistry
cfg = load_config()
registry = SessionRegistry(connect_zookeeper(cfg.zookeeper), sys.argv[1])
info = registry.register("querynode", "127.0.0.1:21123")
print(info.id, flush=True)
time.sleep(120)
"""


def test_session_vanishes_when_its_process_is_killed(infra, zk, zk_root):
    registry = SessionRegistry(zk, zk_root)
    seen: list[set[int]] = []
    changed = threading.Condition()

    def on_members(members) -> None:
        with changed:
            seen.append(set(members))
            changed.notify_all()

    registry.watch("querynode", on_members)
    child = subprocess.Popen(
        [sys.executable, "-c", SESSION_CHILD, zk_root],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **infra.to_env()},
    )
    try:
        child_id = int(child.stdout.readline())
        members = registry.wait_for("querynode", lambda m: child_id in m, timeout_s=10)
        assert members[child_id].address == "127.0.0.1:21123"
        assert members[child_id].pid == child.pid
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        killed_at = time.monotonic()
        registry.wait_for("querynode", lambda m: child_id not in m, timeout_s=20)
        # gone within the session timeout (4 s in tests) plus ZooKeeper's expiry tick
        assert time.monotonic() - killed_at < infra.zookeeper.session_timeout_s + 6
        # the long-lived watcher saw the member come and go
        with changed:
            assert changed.wait_for(lambda: seen and child_id not in seen[-1], timeout=5)
            assert any(child_id in s for s in seen)
    finally:
        child.kill()
        child.wait()


def test_register_and_unregister_in_process(zk, zk_root):
    registry = SessionRegistry(zk, zk_root)
    a = registry.register("proxy", "127.0.0.1:19530")
    b = registry.register("proxy", "127.0.0.1:19531")
    assert a.id != b.id
    assert {m.address for m in registry.members("proxy").values()} == {
        "127.0.0.1:19530",
        "127.0.0.1:19531",
    }
    registry.unregister(a)
    assert set(registry.members("proxy")) == {b.id}
    assert registry.members("nobody") == {}


def test_standby_takes_over_when_leader_session_ends(infra, zk_root):
    first_client = connect_zookeeper(infra.zookeeper)
    second_client = connect_zookeeper(infra.zookeeper)
    lost = threading.Event()
    try:
        first = LeaderElection(first_client, zk_root, "rootcoord", "a", on_lost=lost.set)
        second = LeaderElection(second_client, zk_root, "rootcoord", "b")
        assert first.campaign(timeout_s=5)
        assert not second.campaign(timeout_s=0.5)
        assert second.contenders()[0] == "a"
        result: list[bool] = []
        waiter = threading.Thread(target=lambda: result.append(second.campaign(timeout_s=20)))
        waiter.start()
        first_client.stop()  # the leader's session ends
        assert lost.wait(5) and not first.is_leader
        waiter.join()
        assert result == [True] and second.is_leader
    finally:
        for client in (first_client, second_client):
            client.stop()
            client.close()
