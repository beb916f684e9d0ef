"""The data node on a real Spark standalone cluster (master + worker from pyspark's jars, as
`vectide up --mode cluster` runs them): its tasks run on the worker's executors, persisted
rows show in the segment RPCs, and a data node killed mid-ingest resumes exactly once."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest
from pymilvus import MilvusClient

from tests.infra import TEST_PORTS
from tests.integration.conftest import free_block, free_port, isolated, query_segments_when
from tests.integration.test_persistence import (
    DataNode,
    Persistent,
    insert_range,
    make_collection,
    persisted_rows,
)
from vectide.services.common.kv.zookeeper import cluster_root
from vectide.services.common.session import SessionRegistry
from vectide.services.infra.manager import InfraManager
from vectide.services.infra.spark import master_state, master_url, spark_components


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=30) as reply:
        return json.loads(reply.read())


@pytest.fixture(scope="module")
def spark_cluster(infra):
    config = isolated(infra, "k")
    base = free_block(TEST_PORTS["kafka"] + 1300, 10)  # 20392..: clear of other tests
    config.infra.spark_master_port = base
    config.infra.spark_master_webui_port = base + 1
    config.infra.spark_worker_port = base + 2
    config.infra.spark_worker_webui_port = base + 4
    config.infra.spark_workers = 1
    config.infra.spark_worker_cores = 2
    config.infra.spark_worker_memory_mb = 1536
    config.data.spark_master = master_url(config)
    config.data.spark_ui_port = base + 8
    config.data.trigger_s = 1.0
    config.service.rootcoord_port = free_port()
    spark = InfraManager(config, lambda line: print(f"[spark] {line}"), spark_components(config))
    spark.down()
    spark.up()
    try:
        with Persistent(config).running() as holder:
            yield holder
    finally:
        spark.down()


def persisted_segment_rows(client: MilvusClient, name: str) -> int:
    segments = client.list_persistent_segments(name)
    return sum(s.num_rows for s in segments if s.state_name == "Flushed")


def query_segment_rows(port: int, name: str, timeout_s: float = 30) -> dict[int, int]:
    """GetQuerySegmentInfo once the query node serves the flushed segments (handoff)."""
    infos = query_segments_when(
        port, name, lambda infos: bool(infos) and all(i.state == 4 for i in infos), timeout_s
    )
    return {i.segmentID: i.num_rows for i in infos}


def test_cluster_data_node_writes_on_executors_of_the_standalone_master(spark_cluster, zk):
    client, config = spark_cluster.client, spark_cluster.config
    name = make_collection(client)
    insert_range(client, name, 0, 40_000)
    client.flush(name)
    collection_id = client.describe_collection(name)["collection_id"]
    rows, total = persisted_rows(config, collection_id)
    assert total == 40_000 and sorted(rows) == list(range(40_000))
    assert persisted_segment_rows(client, name) == 40_000
    served = query_segment_rows(spark_cluster.port, name)
    assert served == {s.segment_id: s.num_rows for s in client.list_persistent_segments(name)}
    # the master runs our application on its worker
    state = master_state(config)
    assert [w["state"] for w in state["workers"]] == ["ALIVE"]
    [app] = [a for a in state["activeapps"] if a["name"] == "vectide-datanode"]
    assert app["cores"] > 0
    # the driver's monitoring API: tasks ran on executors, not on the driver
    [session] = (
        SessionRegistry(zk, cluster_root(config.zookeeper, config.cluster.name))
        .members("datanode")
        .values()
    )
    ui = f"{session.extra['spark_ui']}/api/v1/applications"
    [application] = get_json(ui)
    executors = get_json(f"{ui}/{application['id']}/executors")
    worked = [e for e in executors if e["id"] != "driver" and e["totalTasks"] > 0]
    assert worked, executors
    assert sum(e["totalTasks"] for e in executors if e["id"] == "driver") == 0
    print(f"executor tasks: {[(e['id'], e['totalTasks']) for e in executors]}")


@pytest.mark.heavy
def test_a_data_node_killed_mid_ingest_persists_every_row_exactly_once(spark_cluster):
    client, config = spark_cluster.client, spark_cluster.config
    datanode: DataNode = spark_cluster.datanode
    name = make_collection(client)
    writer = threading.Thread(target=insert_range, args=(client, name, 0, 150_000, 5_000))
    writer.start()
    time.sleep(6)
    datanode.kill()  # driver, its JVM and in-flight batches; the executors die with the app
    writer.join()
    datanode.start()  # same Spark checkpoint: the unfinished batch is replayed
    client.flush(name)
    collection_id = client.describe_collection(name)["collection_id"]
    rows, total = persisted_rows(config, collection_id)
    assert total == 150_000, "a replayed batch left duplicates behind or lost rows"
    assert sorted(rows) == list(range(150_000))
    assert persisted_segment_rows(client, name) == 150_000
