from __future__ import annotations

import uuid

import pytest

from services.common.config import Config
from services.common.kv.zookeeper import ZooKeeperKV, cluster_root, connect_zookeeper
from tests.infra import running_infra


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def infra() -> Config:
    with running_infra() as config:
        yield config


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
