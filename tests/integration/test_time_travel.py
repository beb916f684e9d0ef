"""Time travel within the retention window through unmodified pymilvus, on the real parts: a
standalone deployment in this process and the Spark data node as its own process.

A user notes a stamp (an ORM insert's ``timestamp``, or ``utility.mkts_from_unixtime``),
deletes and upserts, flushes and compacts; reads with ``consistency_level="Customized"`` and
``guarantee_timestamp`` at the stamp see the rows as they were, also after the merge and
after the collection is loaded again from S3, while ordinary reads see the present.
"""

from __future__ import annotations

import time
import uuid

import numpy as np
import pytest
from pymilvus import Collection, MilvusClient, connections, utility
from pymilvus.grpc_gen import milvus_pb2

from tests.integration.conftest import free_port, isolated
from tests.integration.test_compaction import (
    QUERIES,
    create,
    expected_hits,
    segment_pks,
    vectors_of,
    wait_for,
)
from tests.integration.test_persistence import Persistent
from vectide.services.common.objectstore import ObjectStore

pytestmark = pytest.mark.timeout(600)

RETENTION_S = 600
ROWS = 300
DELETED = set(range(0, 50))
UPSERTED = set(range(50, 100))


@pytest.fixture(scope="module")
def deployment(infra):
    config = isolated(infra, "tt")
    config.data.trigger_s = 1.0
    config.data.compaction_enabled = False  # the test compacts by hand
    config.data.retention_s = RETENTION_S
    config.service.rootcoord_port = free_port()
    with Persistent(config).running() as holder:
        yield holder


def as_of(stamp: int) -> dict:
    """What pymilvus 2.6 sends for a read at ``stamp``."""
    return {"consistency_level": "Customized", "guarantee_timestamp": stamp}


def ids_at(client: MilvusClient, name: str, **read) -> set[int]:
    rows = client.query(name, filter="id >= 0", output_fields=["id"], limit=16_000, **read)
    return {r["id"] for r in rows}


def hits_at(client: MilvusClient, name: str, **read) -> list[list[int]]:
    hits = client.search(name, QUERIES.tolist(), limit=10, output_fields=["id"], **read)
    return [[h["id"] for h in per_query] for per_query in hits]


def raw_count(client: MilvusClient, name: str, travel_ts: int) -> tuple[int, str, int]:
    """A Strong ``count(*)`` with the request's ``travel_timestamp`` set, as raw gRPC or
    pymilvus 2.2 sent it: (status code, reason, count)."""
    request = milvus_pb2.QueryRequest(
        collection_name=name,
        expr="id >= 0",
        output_fields=["count(*)"],
        travel_timestamp=travel_ts,
        use_default_consistency=False,
    )
    reply = client._get_connection()._stub.Query(request)
    if reply.status.code:
        return reply.status.code, reply.status.reason, -1
    return 0, "", reply.fields_data[0].scalars.long_data.data[0]


def test_reads_travel_to_a_noted_stamp_through_deletes_upserts_compaction_and_reload(
    deployment,
):
    client, config = deployment.client, deployment.config
    name = f"tt_{uuid.uuid4().hex[:6]}"
    create(client, name)
    alias = f"tt_{uuid.uuid4().hex[:6]}"
    connections.connect(alias, uri=f"http://127.0.0.1:{deployment.port}")
    try:
        ids = np.arange(ROWS)
        rows = [{"id": int(i), "vec": v} for i, v in zip(ids, vectors_of(ids), strict=True)]
        noted = Collection(name, using=alias).insert(rows).timestamp  # as Milvus returns it
    finally:
        connections.disconnect(alias)
    assert noted > 0
    client.flush(name)
    client.delete(name, ids=sorted(DELETED))
    moved = np.array(sorted(UPSERTED))
    client.upsert(
        name,
        [{"id": int(i), "vec": v} for i, v in zip(moved, vectors_of(moved + 10_000), strict=True)],
    )
    client.flush(name)
    everything, present = set(range(ROWS)), set(range(ROWS)) - DELETED
    old_hits = expected_hits(everything)

    def check_travel(when: str) -> None:
        assert ids_at(client, name, **as_of(noted)) == everything, when
        assert hits_at(client, name, **as_of(noted)) == old_hits, when
        got = client.get(name, ids=[0, 1, 60], output_fields=["vec"], **as_of(noted))
        assert sorted(r["id"] for r in got) == [0, 1, 60], when
        old_60 = next(r["vec"] for r in got if r["id"] == 60)
        assert np.allclose(old_60, vectors_of(np.array([60]))[0]), when  # before its upsert
        assert ids_at(client, name) == present, when
        assert client.get(name, ids=[0, 1]) == [], when

    check_travel("before compaction")
    before = client.list_persistent_segments(name)
    assert len(before) >= 2

    job_id = client.compact(name)
    wait_for(lambda: client.get_compaction_state(job_id) == "Completed", 120, "compaction")
    wait_for(lambda: len(client.list_persistent_segments(name)) == 1, 30, "one segment")
    [after] = client.list_persistent_segments(name)
    served = lambda: [s.segment_id for s in client.list_loaded_segments(name)]  # noqa: E731
    wait_for(lambda: served() == [after.segment_id], 30, "query node swap")
    # the merge kept the rows deleted and upserted away within the window, stamps and all
    collection_id = client.describe_collection(name)["collection_id"]
    kept = segment_pks(ObjectStore(config.s3), collection_id, after.segment_id)
    assert sorted(set(kept)) == sorted(everything) and len(kept) == ROWS + len(UPSERTED)
    check_travel("after compaction")

    client.release_collection(name)
    client.load_collection(name)  # binlogs' insert stamps, deltalogs' delete stamps
    check_travel("after loading again")
    assert raw_count(client, name, noted) == (0, "", ROWS)

    # a stamp in the future waits like a guarantee; one older than the window is refused
    soon = utility.mkts_from_unixtime(time.time() + 1.0)
    assert ids_at(client, name, **as_of(soon)) == present
    too_old = utility.mkts_from_unixtime(time.time() - RETENTION_S - 60)
    with pytest.raises(Exception, match=r"older than the retention window: data.retention_s = 600"):
        client.query(name, filter="id >= 0", limit=10, **as_of(too_old))
    with pytest.raises(Exception, match=r"retention window"):
        client.search(name, QUERIES.tolist(), limit=10, **as_of(too_old))
    code, reason, _ = raw_count(client, name, too_old)
    assert code == 1100 and "older than the retention window" in reason
