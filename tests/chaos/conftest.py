"""The chaos suite's deployment: a supervised `vectide up --mode cluster` (two rootcoords,
a query node, a proxy, the Spark data node on a Spark standalone master and worker, an
ingest worker with a mapping) on the session's infrastructure, and the load it runs."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from pymilvus import MilvusClient

from tests.chaos.load import DIM, Feeder, Reader, Writer
from tests.infra import REPO, TEST_PORTS
from tests.integration.conftest import free_block, isolated, zk  # noqa: F401
from tests.integration.test_supervision import own_run_dir
from vectide.services.common.kv.zookeeper import ZooKeeperKV, cluster_root, connect_zookeeper
from vectide.services.infra.deployment import DeploymentManager
from vectide.services.infra.spark import master_url
from vectide.services.ingest.mapping import IngestMapping, MappingStore

COLLECTION = "chaos"
INGESTED = "chaos_ingest"


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/chaos" in str(item.fspath):
            item.add_marker(pytest.mark.chaos)


@pytest.fixture(scope="module")
def chaos(infra):
    """The running cluster, its two collections, and the load threads (started). Its run
    dir (logs, supervisor record) is kept under ``.vectide/chaos/`` for a post-mortem:
    pytest's temporary directories are pruned by any other pytest run of the same user."""
    config = isolated(infra, "x")
    config = own_run_dir(config, REPO / ".vectide" / "chaos" / config.cluster.name)
    # a busy shared box stalls processes for seconds: 4 s sessions expired under load
    config.zookeeper.session_timeout_s = 10.0
    config.infra.startup_timeout_s = 300.0  # Spark's first start took over a minute here
    base = free_block(TEST_PORTS["kafka"] + 1700, 240)  # clear of the integration tests
    config.service.proxy_port = base
    config.service.http_port = base + 10
    config.service.rootcoord_port = base + 20
    config.service.querynode_port = base + 30
    config.service.metrics_port = base + 40  # roles + 100..160: base + 140..200
    config.infra.spark_master_port = base + 210
    config.infra.spark_master_webui_port = base + 211
    config.infra.spark_worker_port = base + 212
    config.infra.spark_worker_webui_port = base + 214
    config.infra.spark_workers = 1
    config.infra.spark_worker_cores = 2
    config.infra.spark_worker_memory_mb = 1536
    config.data.spark_ui_port = base + 220
    config.data.spark_master = master_url(config)
    config.data.trigger_s = 1.0
    manager = DeploymentManager(config, progress=lambda line: print(f"[chaos] {line}"))
    uri = f"http://{config.service.host}:{config.service.proxy_port}"
    load: list = []
    try:
        manager.up("cluster", querynodes=1, proxies=1, datanode=True, ingest=1, rootcoords=2)
        topic = prepare(config, uri)
        writer, reader = Writer(uri, COLLECTION), Reader(uri, COLLECTION)
        feeder = Feeder(config.kafka.bootstrap_servers, topic)
        load = [writer, reader, feeder]
        for thread in load:
            thread.start()
        yield SimpleNamespace(
            config=config,
            manager=manager,
            uri=uri,
            writer=writer,
            reader=reader,
            feeder=feeder,
            recovery={},
        )
    finally:
        try:
            for thread in load:
                thread.stop()
        finally:  # a load thread that fails to stop must not leave the cluster running
            manager.down(infra=False)


def prepare(config, uri: str) -> str:
    """Both collections (Strong by default), and the ingest mapping of a new topic."""
    client = MilvusClient(uri)
    for name in (COLLECTION, INGESTED):
        client.create_collection(name, dimension=DIM, consistency_level="Strong")
    client.close()
    topic = f"chaos-events-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": config.kafka.bootstrap_servers})
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(timeout=30)
    client = connect_zookeeper(config.zookeeper)
    try:
        kv = ZooKeeperKV(client, cluster_root(config.zookeeper, config.cluster.name))
        MappingStore(kv).add(IngestMapping("chaos", topic, INGESTED))
    finally:
        client.stop()
        client.close()
    return topic
