"""Compaction and garbage collection on the real parts: a standalone deployment in this
process (coordinators served over RPC) and the Spark data node as its own process, with
ZooKeeper, the broker and S3 from the session's infrastructure.

Reads are checked against the expected live rows (exact FLAT search, so top-k is
deterministic) before, during and after compaction; milvus-lite replays the same
operations in the churn scenario.
"""

from __future__ import annotations

import threading
import time
import uuid

import numpy as np
import pytest
from pymilvus import DataType, MilvusClient

from tests.integration.conftest import free_port, isolated
from tests.integration.test_persistence import Persistent
from vectide.services.common import binlog
from vectide.services.common.objectstore import ObjectStore

#: the module's fixture starts a Spark data node: minutes on a loaded 2-core box
pytestmark = pytest.mark.timeout(600)

DIM = 8
ROWS_PER_FLUSH = 150
FLUSHES = 5


@pytest.fixture(scope="module")
def deployment(infra):
    config = isolated(infra, "k")
    config.data.trigger_s = 1.0
    config.data.compaction_enabled = False  # this module triggers it; the churn test enables it
    config.data.gc_interval_s = 1.0
    config.data.gc_delay_s = 15.0
    config.service.rootcoord_port = free_port()
    with Persistent(config).running() as holder:
        yield holder


def vectors_of(ids: np.ndarray) -> np.ndarray:
    """Each id's vector, the same in every run and every client."""
    return np.stack([np.random.default_rng(int(i)).standard_normal(DIM) for i in ids]).astype(
        np.float32
    )


def make_collection(client: MilvusClient) -> str:
    name = f"k_{uuid.uuid4().hex[:6]}"
    create(client, name)
    return name


def create(client: MilvusClient, name: str) -> None:
    """One shard, exact (FLAT) search, Strong reads: results are deterministic."""
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    index = client.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    client.create_collection(
        name, schema=schema, index_params=index, consistency_level="Strong", num_shards=1
    )


def insert_ids(client: MilvusClient, name: str, ids: np.ndarray) -> None:
    vectors = vectors_of(ids)
    client.insert(name, [{"id": int(i), "vec": v} for i, v in zip(ids, vectors, strict=True)])


QUERIES = np.random.default_rng(99).standard_normal((3, DIM)).astype(np.float32)


def expected_hits(live: set[int], k: int = 10) -> list[list[int]]:
    ids = np.array(sorted(live))
    vectors = vectors_of(ids)
    distances = ((QUERIES[:, None, :] - vectors[None, :, :]) ** 2).sum(axis=2)
    return [ids[np.argsort(row, kind="stable")[:k]].tolist() for row in distances]


def observed(client: MilvusClient, name: str) -> tuple[set[int], list[list[int]]]:
    rows = client.query(name, filter="id >= 0", output_fields=["id"], limit=16_000)
    hits = client.search(name, QUERIES.tolist(), limit=10, output_fields=["id"])
    return {r["id"] for r in rows}, [[h["id"] for h in hits_of] for hits_of in hits]


def segment_pks(store: ObjectStore, collection_id: int, segment_id: int) -> list[int]:
    keys = [k for k in store.list(f"insert_log/{collection_id}/") if f"/{segment_id}/0/" in k]
    pks = [binlog.decode_column(store.get(k), DataType.INT64).tolist() for k in keys]
    return sorted(pk for part in pks for pk in part)


def deleted_pks(store: ObjectStore, collection_id: int) -> set[int]:
    keys = store.list(f"delta_log/{collection_id}/")
    return {pk for k in keys for pk in binlog.decode_deltas(store.get(k))[0].tolist()}


def wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def test_compaction_merges_purges_deletes_and_gc_frees_the_old_files(deployment):
    client, config = deployment.client, deployment.config
    name = make_collection(client)
    for f in range(FLUSHES):
        insert_ids(client, name, np.arange(f * ROWS_PER_FLUSH, (f + 1) * ROWS_PER_FLUSH))
        client.flush(name)
    deleted = set(range(0, FLUSHES * ROWS_PER_FLUSH, 7))
    client.delete(name, ids=sorted(deleted))
    # flush returns once every channel is persisted up to its stamp: the deletes' deltalog is
    # written and recorded, so the merge sees it
    client.flush(name)
    collection_id = client.describe_collection(name)["collection_id"]
    store = ObjectStore(config.s3)
    assert deleted_pks(store, collection_id) == deleted
    live = set(range(FLUSHES * ROWS_PER_FLUSH)) - deleted
    want = (live, expected_hits(live))
    before = client.list_persistent_segments(name)
    assert len(before) >= FLUSHES
    assert observed(client, name) == want

    problems: list[object] = []
    rounds = [0]
    stop = threading.Event()

    def old_files() -> list[str]:
        old = {s.segment_id for s in before}
        prefixes = ("insert_log", "stats_log")
        return [
            k
            for p in prefixes
            for k in store.list(f"{p}/{collection_id}/")
            if int(k.split("/")[3]) in old
        ]

    def reader() -> None:
        while not stop.is_set():
            try:
                got = observed(client, name)
            except Exception as exc:  # a failed read is a gap too
                problems.append(exc)
                continue
            if got != want:
                problems.append((len(got[0]), sorted(want[0] ^ got[0])[:10]))
            rounds[0] += 1

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        job_id = client.compact(name)
        wait_for(
            lambda: client.get_compaction_state(job_id) == "Completed", 120, "compaction state"
        )
        assert old_files(), "removed before the delay (15 s after the swap)"
        wait_for(lambda: len(client.list_persistent_segments(name)) == 1, 30, "one segment")
        # the query node swaps through the handoff loop: reads go on meanwhile
        served = lambda: [s.segment_id for s in client.list_loaded_segments(name)]  # noqa: E731
        [after] = client.list_persistent_segments(name)
        wait_for(lambda: served() == [after.segment_id], 30, "query node swap")
        time.sleep(1.0)
    finally:
        stop.set()
        thread.join()
    assert not problems, problems[:5]
    assert rounds[0] >= 3, "the reader barely ran"
    assert observed(client, name) == want

    plans = client.get_compaction_plans(job_id)
    assert [p.target for p in plans.plans] == [after.segment_id]
    assert sorted(s for p in plans.plans for s in p.sources) == sorted(s.segment_id for s in before)
    assert after.num_rows == len(live)
    assert segment_pks(store, collection_id, after.segment_id) == sorted(live)

    # after the GC delay, nothing of the old segments is left on S3; the new one stays
    wait_for(lambda: not old_files(), 60, "garbage collection of the old segments")
    assert segment_pks(store, collection_id, after.segment_id) == sorted(live)
    assert observed(client, name) == want


def test_manual_compaction_of_a_collection_with_nothing_to_do_completes_at_once(deployment):
    client = deployment.client
    name = make_collection(client)
    job_id = client.compact(name)
    assert client.get_compaction_state(job_id) == "Completed"
    assert client.get_compaction_plans(job_id).plans == []
    with pytest.raises(Exception, match=r"collection not found|can.t find collection"):
        client.compact("no_such_collection")


def test_a_compaction_job_survives_a_coordinator_restart(deployment):
    """The job's record outlives the coordinator: planned, then the standalone process (and
    its coordinator) restarts at once. Whether the data node had taken the plan or not, the
    job completes after the restart, its segments merged, and answers again after another."""
    name = make_collection(deployment.client)
    for f in range(2):
        insert_ids(deployment.client, name, np.arange(f * 50, (f + 1) * 50))
        deployment.client.flush(name)
    before = sorted(s.segment_id for s in deployment.client.list_persistent_segments(name))
    assert len(before) == 2
    job_id = deployment.client.compact(name)
    deployment.stop()
    deployment.start()
    client = deployment.client
    wait_for(lambda: client.get_compaction_state(job_id) == "Completed", 120, "job completed")
    wait_for(lambda: len(client.list_persistent_segments(name)) == 1, 30, "one segment")
    [after] = client.list_persistent_segments(name)
    deployment.stop()
    deployment.start()
    client = deployment.client
    assert client.get_compaction_state(job_id) == "Completed"
    [plan] = client.get_compaction_plans(job_id).plans
    assert (sorted(plan.sources), plan.target) == (before, after.segment_id)
    client.load_collection(name)
    live = set(range(100))
    assert observed(client, name) == (live, expected_hits(live))
