"""Self-healing across real processes: `vectide up`'s supervisor restarts killed roles, the
standby rootcoord replaces a stalled one, and `vectide down` leaves nothing behind."""

from __future__ import annotations

import copy
import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from pymilvus import MilvusClient, MilvusException

from tests.infra import TEST_PORTS
from tests.integration.conftest import free_block, free_port, isolated, vectide_status
from vectide.services.common.config import Config
from vectide.services.common.errors import Code
from vectide.services.common.kv.zookeeper import cluster_root
from vectide.services.common.session import SessionRegistry
from vectide.services.infra.deployment import DeploymentManager
from vectide.services.infra.process import alive
from vectide.services.infra.supervisor import read_state

#: a cluster of its own, roles killed and stalled: `make test-heavy` runs these alone
pytestmark = pytest.mark.heavy

COLLECTION = "healing"
ROWS = 300
RECOVERY_S = 10.0


@pytest.fixture(scope="module")
def supervised(infra, tmp_path_factory):
    """A supervised cluster (two rootcoords, one query node, one proxy) in a run dir of its
    own, on the session's infrastructure (used as external: its processes are not ours)."""
    config = own_run_dir(isolated(infra, "h"), tmp_path_factory.mktemp("supervised"))
    base = free_block(TEST_PORTS["kafka"] + 1000, 200)
    config.service.proxy_port = base
    config.service.rootcoord_port = base + 20
    config.service.querynode_port = base + 30
    config.service.metrics_port = base + 60
    # The stalled rootcoord's session expires 4 s after its last heartbeat, which kazoo
    # sends every third of that: as early as ~2.6 s after a SIGSTOP. A read that fails fast
    # within 3 s (the default) could then meet the standby already leading and succeed;
    # 1.5 s fails it before any failover can have happened.
    config.service.coordinator_fail_fast_s = 1.5
    manager = DeploymentManager(config, progress=lambda line: print(f"[supervised] {line}"))
    try:
        manager.up("cluster", querynodes=1, proxies=1, datanode=False, ingest=0, rootcoords=2)
        uri = f"http://{config.service.host}:{config.service.proxy_port}"
        client = MilvusClient(uri)
        client.create_collection(COLLECTION, dimension=4, consistency_level="Strong")
        client.insert(COLLECTION, [{"id": i, "vector": [float(i), 0, 0, 1]} for i in range(ROWS)])
        client.close()
        yield SimpleNamespace(config=config, manager=manager, uri=uri, pids=set())
    finally:
        manager.down(infra=False)


def own_run_dir(config: Config, run_dir: Path) -> Config:
    """``config`` with its own run dir, the session's infrastructure used as external."""
    config = copy.deepcopy(config)
    config.infra.run_dir = str(run_dir)
    for section in (config.zookeeper, config.kafka, config.s3):
        section.managed = False
    config.zookeeper.session_timeout_s = 4.0
    return config


def strong_count(uri: str, collection: str = COLLECTION) -> int | None:
    """count(*) at a Strong read through a fresh client, or None while it fails."""
    try:
        client = MilvusClient(uri, timeout=3)
    except Exception:
        return None
    try:
        rows = client.query(collection, output_fields=["count(*)"], consistency_level="Strong")
        return rows[0]["count(*)"]
    except Exception:
        return None
    finally:
        client.close()


def roles(config) -> dict[str, dict]:
    return {r["name"]: r for r in vectide_status(config)["roles"]}


def active_rootcoord_pid(config, zk) -> int:
    registry = SessionRegistry(zk, cluster_root(config.zookeeper, config.cluster.name))
    members = registry.members("rootcoord")
    assert len(members) == 1, members
    return next(iter(members.values())).pid


def wait_recovered(supervised, name: str, restarts_before: int, expected: int) -> str:
    """When ``name`` showed one more restart and a Strong read saw ``expected`` rows."""
    started = time.monotonic()
    deadline = started + RECOVERY_S
    restarted = counted = 0.0
    while time.monotonic() < deadline and not (restarted and counted):
        if not restarted:  # what `vectide status` reads, without a process per poll
            record = read_state(supervised.config.run_dir).get(name, {})
            if record.get("restarts", 0) > restarts_before and record.get("pid"):
                restarted = time.monotonic() - started
                supervised.pids.add(record["pid"])
        if not counted and strong_count(supervised.uri) == expected:
            counted = time.monotonic() - started
        time.sleep(0.1)
    assert restarted, f"{name} was not restarted: {roles(supervised.config)[name]}"
    assert counted, f"no Strong read of {expected} rows within {RECOVERY_S}s after {name} died"
    return f"restarted after {restarted:.1f}s, a Strong read answered after {counted:.1f}s"


@pytest.mark.parametrize("victim", ["querynode-0", "proxy-0", "active rootcoord"])
def test_a_killed_role_is_restarted_and_strong_reads_recover(supervised, zk, victim):
    config = supervised.config
    status = roles(config)
    supervised.pids.update(r["pid"] for r in status.values())
    if victim == "active rootcoord":
        pid = active_rootcoord_pid(config, zk)
        victim = next(name for name, r in status.items() if r["pid"] == pid)
    before = status[victim]["restarts"]
    os.kill(status[victim]["pid"], signal.SIGKILL)
    print(f"SIGKILL {victim}: {wait_recovered(supervised, victim, before, ROWS)}")
    now = roles(config)
    assert now[victim]["last_exit"] == "signal SIGKILL"
    assert now[victim]["pid"] != status[victim]["pid"]
    coordinators = {r["name"]: r["state"] for r in now.values() if r["role"] == "rootcoord"}
    assert sorted(coordinators.values()) == ["active", "standby"], coordinators
    if now[victim]["role"] == "rootcoord":  # the old leader came back as the standby
        assert coordinators[victim] == "standby"


def test_a_stalled_rootcoord_is_replaced_by_the_standby(supervised, zk):
    config = supervised.config
    stalled = active_rootcoord_pid(config, zk)
    name = next(n for n, r in roles(config).items() if r["pid"] == stalled)
    before = roles(config)[name]["restarts"]
    client = MilvusClient(supervised.uri)
    # a read first: the proxy then holds the collection's meta, so the read below needs only
    # the stamp and the fence (the calls that fail fast); with a cold cache its describe
    # waits for the standby instead, and the read succeeds after the failover
    assert strong_count(supervised.uri) == ROWS
    os.kill(stalled, signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        # before the standby leads, a Strong read fails fast with a clear, retriable error
        with pytest.raises(MilvusException) as raised:
            client.query(COLLECTION, output_fields=["count(*)"], consistency_level="Strong")
        failed_after = time.monotonic() - stopped_at
        assert failed_after < config.service.coordinator_fail_fast_s + 2.0
        assert "rootcoord did not answer" in raised.value.message, raised.value
        retries = 0
        while True:  # a writer retries its retriable errors until the standby leads
            try:
                client.insert(COLLECTION, [{"id": ROWS, "vector": [1.0, 2.0, 3.0, 4.0]}])
                break
            except MilvusException as exc:
                assert exc.code == Code.SERVICE_UNAVAILABLE, exc
                retries += 1
        took = time.monotonic() - stopped_at
        print(
            f"stalled rootcoord: a Strong read failed after {failed_after:.1f}s; an insert "
            f"succeeded {took:.1f}s after the stop ({retries} retriable failures before)"
        )
        limit = config.zookeeper.session_timeout_s + RECOVERY_S
        assert took < limit, f"the standby took {took:.1f}s to take over"
        assert active_rootcoord_pid(config, zk) != stalled
        assert strong_count(supervised.uri) == ROWS + 1
    finally:
        os.kill(stalled, signal.SIGCONT)
        client.close()
    # resumed, it finds its session expired and exits; the supervisor starts it again
    deadline = time.monotonic() + 2 * RECOVERY_S
    while time.monotonic() < deadline and roles(config)[name]["restarts"] == before:
        time.sleep(0.2)
    role = roles(config)[name]
    supervised.pids.add(role["pid"])
    assert role["restarts"] == before + 1 and role["last_exit"] == "exit code 3", role


def test_a_standalone_that_lost_its_session_exits_and_is_restarted(infra, tmp_path):
    """No zombie: a standalone process stalled past its ZooKeeper session (its coordinator's
    leadership gone) exits instead of serving on, and the supervisor starts it again."""
    config = own_run_dir(isolated(infra, "z"), tmp_path)
    config.service.proxy_port, config.service.rootcoord_port = free_port(), free_port()
    manager = DeploymentManager(config)
    uri = f"http://{config.service.host}:{config.service.proxy_port}"
    try:
        manager.up("standalone", datanode=False)
        client = MilvusClient(uri)
        client.create_collection("zombie", dimension=4, consistency_level="Strong")
        client.insert("zombie", [{"id": i, "vector": [float(i), 0, 0, 1]} for i in range(10)])
        client.close()
        pid = roles(config)["standalone"]["pid"]
        os.kill(pid, signal.SIGSTOP)
        time.sleep(config.zookeeper.session_timeout_s + 3)  # ZooKeeper expires the session
        os.kill(pid, signal.SIGCONT)
        deadline = time.monotonic() + 3 * RECOVERY_S
        # resumed, the old process may answer a read in the moment before it sees its
        # session gone: wait for the restart first, then for the new process to serve
        while time.monotonic() < deadline and roles(config)["standalone"]["restarts"] == 0:
            time.sleep(0.2)
        while time.monotonic() < deadline and strong_count(uri, "zombie") != 10:
            time.sleep(0.2)
        role = roles(config)["standalone"]
        assert (role["restarts"], role["last_exit"]) == (1, "exit code 3"), role
        assert role["pid"] != pid and not alive(pid)
        assert strong_count(uri, "zombie") == 10
    finally:
        manager.down(infra=False)


def test_down_leaves_no_process_behind(supervised):
    config = supervised.config
    status = vectide_status(config)
    assert status["supervisor"]["pid"]
    supervised.pids.update(r["pid"] for r in status["roles"])
    supervised.pids.add(status["supervisor"]["pid"])
    supervised.manager.down(infra=False)
    time.sleep(1.0)  # a supervisor that survived would have restarted something by now
    leftovers = [pid for pid in supervised.pids if pid and alive(pid)]
    assert leftovers == [], f"still running: {leftovers}"
    assert processes_of_cluster(config.cluster.name) == []


def processes_of_cluster(name: str) -> list[int]:
    """Every live process whose environment names this cluster (roles, the supervisor); a
    zombie waiting for init to reap it is no longer running."""
    marker = f"VECTIDE_CLUSTER_NAME={name}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not alive(int(entry.name)):
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found
