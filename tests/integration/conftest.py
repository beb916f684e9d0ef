from __future__ import annotations

import copy
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from pymilvus import MilvusClient
from pymilvus.client.connection_manager import ConnectionManager

from tests.infra import REPO, TEST_PORTS
from vectide.services.common.config import Config
from vectide.services.common.kv.zookeeper import ZooKeeperKV, cluster_root, connect_zookeeper
from vectide.services.infra.deployment import DeploymentManager
from vectide.services.launcher import start_standalone


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="module", autouse=True)
def _no_connection_outlives_its_module():
    """pymilvus shares one connection per address and token across the process and keeps it
    after its clients close. A later module whose deployment drew the same free port would
    reach it through the old connection, without the Connect handshake (a refused login then
    "succeeds"): drop them all once a module's deployments are gone."""
    yield
    ConnectionManager.get_instance().close_all()


@pytest.fixture
def zk(infra):
    client = connect_zookeeper(infra.zookeeper)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def zk_root(infra) -> str:
    """A fresh cluster root per test, so tests never see each other's znodes."""
    return cluster_root(infra.zookeeper, f"{infra.cluster.name}-{uuid.uuid4().hex[:6]}")


@pytest.fixture
def zk_kv(zk, zk_root) -> ZooKeeperKV:
    return ZooKeeperKV(zk, zk_root)


@pytest.fixture
def topic_prefix(infra) -> str:
    return f"{infra.cluster.name}-{uuid.uuid4().hex[:6]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_block(first: int, size: int, tries: int = 10) -> int:
    """The first of ``first``, ``first + 2000``, ... whose ``size`` ports are all free.

    Fixed ports keep a failing run readable, but on a machine whose ephemeral range or
    other services reach them, a role would die on a taken port: move the block instead
    (and say who held it)."""
    for base in range(first, first + 2000 * tries, 2000):
        busy = [p for p in range(base, base + size) if not _bindable(p)]
        if not busy:
            return base
        print(f"ports {base}..{base + size - 1}: {busy[:5]} taken; moving on")
        if shutil.which("ss"):
            subprocess.run(["ss", "-tanp", f"( sport = :{busy[0]} )"], check=False)
    raise RuntimeError(f"no free block of {size} ports from {first}")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def vectide_status(config: Config) -> dict:
    """`vectide status --json` of a deployment, run as a user runs it."""
    result = subprocess.run(
        [sys.executable, "-m", "vectide.services.cli", "status", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**os.environ, **config.to_env()},
    )
    return json.loads(result.stdout)


def isolated(config: Config, suffix: str) -> Config:
    """A copy of the session config with its own cluster: own topics, znodes, S3 root."""
    config = copy.deepcopy(config)
    config.cluster.name = f"{config.cluster.name}{suffix}{uuid.uuid4().hex[:4]}"
    config.cluster.dml_channels = 4
    config.s3.root_path = config.cluster.name
    config.service.metrics_port = free_port()
    config.service.http_port = free_port()
    return config


@pytest.fixture(scope="module")
def standalone(infra):
    """Every role in this process (cores wired in-process), on the real infrastructure."""
    config = isolated(infra, "s")
    port = free_port()
    deployment = start_standalone(config, querynodes=1, proxy_port=port)
    yield SimpleNamespace(uri=f"http://127.0.0.1:{port}", config=config)
    deployment.stop()


@pytest.fixture(scope="module")
def client(standalone):
    """A pymilvus MilvusClient of the module's standalone."""
    c = MilvusClient(standalone.uri)
    yield c
    c.close()


def exact_groups(rows, query, field, metric, limit, size, offset, keep) -> list[tuple]:
    """Milvus's grouping by the rows' ``by`` values over every row ``keep`` holds, exactly:
    groups ordered by their best hit, ``offset`` groups skipped, then ``limit`` groups of
    their ``size`` best hits, as (id, score) pairs."""
    kept = [r for r in rows if keep(r)]
    vectors = np.array([r[field] for r in kept])
    scores = ((vectors - query) ** 2).sum(axis=1) if metric == "L2" else vectors @ query
    groups: dict = {}
    for i in np.argsort(scores if metric == "L2" else -scores, kind="stable"):
        groups.setdefault(kept[i]["by"], []).append((kept[i]["id"], float(scores[i])))
    chosen = list(groups.values())[offset : offset + limit]
    return [hit for members in chosen for hit in members[:size]]


@pytest.fixture(scope="module")
def pair(standalone, tmp_path_factory):
    """(a client of the module's standalone, a milvus-lite client): the same calls to both,
    milvus-lite (a Milvus-API server) as the oracle."""
    lite = MilvusClient(str(tmp_path_factory.mktemp("lite") / "oracle.db"))
    ours = MilvusClient(standalone.uri)
    yield ours, lite
    ours.close()
    lite.close()


def cluster_ports(config: Config, base: int) -> None:
    """A local cluster's ports from ``base``: proxies +0.., their REST APIs +10.., the
    rootcoord +20, query nodes +30.., and each role's metrics port +100..170."""
    config.service.proxy_port = base
    config.service.http_port = base + 10
    config.service.rootcoord_port = base + 20
    config.service.querynode_port = base + 30
    config.service.metrics_port = base + 100


@pytest.fixture(scope="module")
def cluster(infra):
    """One process per role (rootcoord, 2 query nodes, 2 proxies), started by `vectide up`'s
    DeploymentManager; the session's infrastructure is left running at the end."""
    config = isolated(infra, "c")
    config.zookeeper.session_timeout_s = 10.0
    config.query.max_timestamp_lag_ms = 2000
    cluster_ports(config, free_block(TEST_PORTS["kafka"] + 600, 280))  # clear of other tests
    manager = DeploymentManager(config, progress=lambda line: print(f"[cluster] {line}"))
    try:
        manager.up("cluster", querynodes=2, proxies=2, datanode=False)
        proxies = [r for r in manager.status() if r.role == "proxy"]
        yield SimpleNamespace(
            config=config, manager=manager, uris=[f"http://{p.endpoint}" for p in proxies]
        )
    finally:
        manager.down(infra=False)


def query_segments_when(
    port: int, name: str, done: Callable[[list[Any]], bool], timeout_s: float = 30
) -> list[Any]:
    """GetQuerySegmentInfo of ``name`` once ``done(infos)`` holds (a handoff reached the
    query nodes), or as it is after ``timeout_s``."""
    from pymilvus import connections, utility

    alias = f"segments{port}"
    connections.connect(alias, uri=f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            infos = utility.get_query_segment_info(name, using=alias)
            if done(infos) or time.monotonic() > deadline:
                return infos
            time.sleep(0.5)
    finally:
        connections.disconnect(alias)
