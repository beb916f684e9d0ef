"""The real infrastructure the integration tests run against.

By default the project's own ``InfraManager`` starts ZooKeeper, Tansu and SeaweedFS on test
ports (so a developer's ``make run`` deployment is left alone) under ``.vectide/test``, and
stops them at the end of the session. With ``VECTIDE_TESTCONTAINERS=1`` and a reachable Docker
engine, the same fixture starts containers instead; with ``VECTIDE_TEST_EXTERNAL=1`` it uses the
endpoints from the usual ``VECTIDE_*`` configuration and starts nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from vectide.services.common.config import Config, load_config
from vectide.services.infra.components import ZooKeeper
from vectide.services.infra.manager import InfraManager

REPO = Path(__file__).resolve().parents[1]

#: ``VECTIDE_TEST_PORT_OFFSET`` shifts every port, so two checkouts can test side by side.
_OFFSET = int(os.environ.get("VECTIDE_TEST_PORT_OFFSET", "0"))
TEST_PORTS = {
    "zookeeper": 12181,
    # a second ZooKeeper that requires SASL (tests/integration/test_zookeeper_sasl.py)
    "zookeeper_sasl": 12182,
    "kafka": 19092,
    # SeaweedFS also listens on each port + 10000 (gRPC): keep clear of the defaults' ones.
    "s3": 28333,
    "seaweed_master": 29333,
    "seaweed_volume": 28380,
    "seaweed_filer": 28888,
}
TEST_PORTS = {name: port + _OFFSET for name, port in TEST_PORTS.items()}


def local_test_config() -> Config:
    config = Config()
    config.infra.run_dir = str(REPO / ".vectide" / f"test{_OFFSET or ''}")
    config.zookeeper.hosts = f"127.0.0.1:{TEST_PORTS['zookeeper']}"
    config.zookeeper.session_timeout_s = 4.0
    # a throwaway ZooKeeper: while one fsync of its log stalls (2.15 s was seen in CI), every
    # request waits behind it, and a 4 s session whose pings go unanswered is dropped
    config.infra.zookeeper_fsync = False
    config.kafka.bootstrap_servers = f"127.0.0.1:{TEST_PORTS['kafka']}"
    config.s3.endpoint = f"http://127.0.0.1:{TEST_PORTS['s3']}"
    config.infra.seaweed_master_port = TEST_PORTS["seaweed_master"]
    config.infra.seaweed_volume_port = TEST_PORTS["seaweed_volume"]
    config.infra.seaweed_filer_port = TEST_PORTS["seaweed_filer"]
    return config


@contextlib.contextmanager
def running_infra() -> Iterator[Config]:
    if os.environ.get("VECTIDE_TEST_EXTERNAL") == "1":
        config = load_config()
        InfraManager(config).up()  # starts nothing unmanaged; waits for health
        yield _unique_cluster(config)
    elif os.environ.get("VECTIDE_TESTCONTAINERS") == "1" and shutil.which("docker"):
        with _containers() as config:
            yield _unique_cluster(config)
    else:
        config = local_test_config()
        manager = InfraManager(config, progress=lambda line: print(f"[infra] {line}"))
        manager.down()  # a previous run killed mid-way leaves processes behind
        try:
            manager.up()
            yield _unique_cluster(config)
        finally:
            manager.down()


class SaslZooKeeper(ZooKeeper):
    """The managed ZooKeeper requiring SASL, knowing Vectide's user and ``others`` too (an
    authenticated client that is not Vectide's, to prove the ACL keeps it out)."""

    def __init__(self, config: Config, others: dict[str, str]) -> None:
        super().__init__(config)
        self.others = others

    def sasl_users(self) -> dict[str, str]:
        return {**super().sasl_users(), **self.others}


@contextlib.contextmanager
def sasl_zookeeper(user: str, password: str, others: dict[str, str]) -> Iterator[Config]:
    """A ZooKeeper of its own (port ``zookeeper_sasl``, run dir ``...-sasl``) that requires a
    SASL DIGEST-MD5 login; yields a config logging in as ``user``, stopped at the end."""
    config = local_test_config()
    config.infra.run_dir += "-sasl"
    config.zookeeper.hosts = f"127.0.0.1:{TEST_PORTS['zookeeper_sasl']}"
    config.zookeeper.sasl_username, config.zookeeper.sasl_password = user, password
    server = SaslZooKeeper(config, others)
    manager = InfraManager(config, lambda line: print(f"[sasl-zk] {line}"), managed=[server])
    manager.down()
    shutil.rmtree(server.data_dir, ignore_errors=True)  # a fresh ensemble every session
    try:
        manager.up()
        yield config
    finally:
        manager.down()


def _unique_cluster(config: Config) -> Config:
    """Each test session gets its own cluster name: its own topics, znodes and S3 root."""
    config.cluster.name = f"t{uuid.uuid4().hex[:8]}"
    config.s3.root_path = config.cluster.name
    return config


@contextlib.contextmanager
def _containers() -> Iterator[Config]:  # pragma: no cover - needs a Docker engine
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs
    from testcontainers.kafka import KafkaContainer
    from testcontainers.minio import MinioContainer

    with (
        KafkaContainer("confluentinc/cp-kafka:7.6.1") as kafka,
        DockerContainer("zookeeper:3.8").with_exposed_ports(2181) as zk,
        MinioContainer() as minio,
    ):
        wait_for_logs(zk, "binding to port")
        config = Config()
        config.kafka.managed = config.zookeeper.managed = config.s3.managed = False
        config.kafka.bootstrap_servers = kafka.get_bootstrap_server()
        config.zookeeper.hosts = f"{zk.get_container_host_ip()}:{zk.get_exposed_port(2181)}"
        minio_conf = minio.get_config()
        config.s3.endpoint = f"http://{minio_conf['endpoint']}"
        config.s3.access_key = minio_conf["access_key"]
        config.s3.secret_key = minio_conf["secret_key"]
        yield config
