"""A churn run with automatic compaction and garbage collection: insert, delete, upsert and
flush round after round, milvus-lite applying the same operations as the oracle. Results
must match at every step; at the end the segments merge to one and S3 holds only the live
segment's files. Minutes of real processes: `make test-heavy` runs it."""

from __future__ import annotations

import itertools
import uuid

import numpy as np
import pytest
from pymilvus import MilvusClient

from tests.integration.conftest import free_port, isolated
from tests.integration.test_compaction import DIM, QUERIES, create, wait_for
from tests.integration.test_persistence import Persistent
from vectide.services.common.objectstore import ObjectStore

pytestmark = [pytest.mark.heavy, pytest.mark.timeout(900)]

ROUNDS = 12


@pytest.fixture(scope="module")
def churn(infra, tmp_path_factory):
    config = isolated(infra, "u")
    config.data.trigger_s = 1.0
    config.data.compaction_interval_s = 2.0
    config.data.gc_interval_s = 1.0
    config.data.gc_delay_s = 3.0
    config.service.rootcoord_port = free_port()
    lite = MilvusClient(str(tmp_path_factory.mktemp("lite") / "churn.db"))
    with Persistent(config).running() as holder:
        yield holder, lite
    lite.close()


def results(client: MilvusClient, name: str) -> tuple[list[int], list[list[int]]]:
    rows = client.query(name, filter="id >= 0", output_fields=["id"], limit=16_000)
    hits = client.search(name, QUERIES.tolist(), limit=10, output_fields=["id"])
    return sorted(r["id"] for r in rows), [[h["id"] for h in q] for q in hits]


def live_files(store: ObjectStore, collection_id: int) -> dict[str, set[int]]:
    """Segment ids found under each data prefix of the collection."""
    return {
        prefix: {int(k.split("/")[3]) for k in store.list(f"{prefix}/{collection_id}/")}
        for prefix in ("insert_log", "stats_log")
    }


def test_churn_matches_milvus_lite_and_compaction_returns_to_one_segment(churn):
    holder, lite = churn
    ours, store = holder.client, ObjectStore(holder.config.s3)
    name = f"churn_{uuid.uuid4().hex[:6]}"
    pair = (ours, lite)
    for client in pair:
        create(client, name)
    rng = np.random.default_rng(7)
    live: set[int] = set()
    next_id = 0
    segments_seen = []
    for step in range(ROUNDS):
        new = list(range(next_id, next_id + 100))
        next_id += 100
        existing = sorted(live)
        gone = [int(i) for i in rng.choice(existing, min(15, len(existing)), replace=False)]
        kept = sorted(set(existing) - set(gone))
        changed = [int(i) for i in rng.choice(kept, min(15, len(kept)), replace=False)]
        rows = [{"id": i, "vec": rng.standard_normal(DIM).tolist()} for i in new + changed]
        for client in pair:
            client.insert(name, rows[: len(new)])
            if gone:
                client.delete(name, ids=gone)
            if changed:
                client.upsert(name, rows[len(new) :])
        ours.flush(name)
        live = (live | set(new)) - set(gone)
        assert results(ours, name) == results(lite, name), f"round {step}"
        segments_seen.append(len(ours.list_persistent_segments(name)))
    print(f"segments after each round: {segments_seen}")
    merged = any(b < a for a, b in itertools.pairwise(segments_seen))
    assert merged, "automatic compaction never merged anything during the churn"
    wait_for(lambda: len(ours.list_persistent_segments(name)) == 1, 120, "one segment")
    assert results(ours, name) == results(lite, name)
    [segment] = ours.list_persistent_segments(name)
    collection_id = ours.describe_collection(name)["collection_id"]
    only_live = lambda: all(  # noqa: E731
        ids == {segment.segment_id} for ids in live_files(store, collection_id).values()
    )
    wait_for(only_live, 60, "garbage collection of the merged-away segments")
    assert results(ours, name) == results(lite, name)
