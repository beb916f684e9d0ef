"""AlterCollection's properties and the one Vectide acts on, ``collection.ttl.seconds``: a
whole cluster in one process (services/testing.py) on a clock the test moves."""

from __future__ import annotations

import numpy as np
import pytest

from vectide.services.common import collection_properties, timestamp
from vectide.services.common.collection_properties import TTL_KEY
from vectide.services.common.errors import MilvusError
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.schema import CollectionSchema, ConsistencyLevel, FieldSchema
from vectide.services.querynode.segment import _live
from vectide.services.testing import Harness


@pytest.fixture
def h(monkeypatch: pytest.MonkeyPatch) -> Harness:
    """A harness whose proxy reads the same clock as its TSO (expiry is counted on it)."""
    harness = Harness()
    monkeypatch.setattr(timestamp, "now_ms", harness.clock.now_ms)
    harness.create_collection("c")
    return harness


def sealed_rows(h: Harness) -> int:
    [node] = [h.nodes.node(n) for n in h.nodes.live_nodes()]
    return sum(s.num_rows for shard in node._shards.values() for s in shard.sealed.values())


def test_rows_older_than_the_ttl_are_no_longer_read_newer_ones_are(h):
    h.proxy.alter_collection("c", {TTL_KEY: "10"}, [])
    h.insert("c", [1, 2, 3])
    h.advance(6_000)
    h.insert("c", [4])
    assert h.query_ids("c") == [1, 2, 3, 4]
    h.advance(5_000)  # 11 s after the first rows, 5 s after the last
    assert h.query_ids("c") == [4]
    assert h.search_ids("c", 1) == [4]
    assert h.query_ids("c", ConsistencyLevel.BOUNDED) == [4]


def test_the_ttl_bounds_sealed_segments_too_and_an_upsert_starts_a_row_again(h):
    h.proxy.alter_collection("c", {TTL_KEY: "10"}, [])
    h.insert("c", [1, 2, 3])
    h.proxy.flush(["c"])
    h.step()
    h.step()
    assert sealed_rows(h) == 3
    assert h.search_ids("c", 1) == [1, 2, 3]  # an unfiltered read of the sealed rows: kept
    h.advance(8_000)
    h.insert("c", [2])  # the key written again: a new row, a new stamp
    h.advance(3_000)
    assert h.query_ids("c") == [2]
    assert h.search_ids("c", 1) == [2]


def test_dropping_the_ttl_reads_every_row_again(h):
    """Nothing is purged yet (compaction keeps expired rows), as in Milvus before it compacts."""
    h.proxy.alter_collection("c", {TTL_KEY: "5"}, [])
    h.insert("c", [1, 2])
    h.advance(6_000)
    assert h.query_ids("c") == []
    h.proxy.alter_collection("c", {}, [TTL_KEY])
    assert TTL_KEY not in h.proxy.describe_collection("c").properties
    assert h.query_ids("c") == [1, 2]


def test_properties_are_stored_described_and_altered_through_an_alias(h):
    h.proxy.create_alias("c", "a")
    h.proxy.alter_collection("a", {"mmap.enabled": "true", TTL_KEY: "60"}, [])
    h.proxy.alter_collection("c", {TTL_KEY: "0"}, [])
    assert h.proxy.describe_collection("c").properties == {"mmap.enabled": "true", TTL_KEY: "0"}
    h.insert("c", [7])
    h.advance(120_000)
    assert h.query_ids("c") == [7]  # 0: no expiry


@pytest.mark.parametrize(
    ("properties", "delete_keys", "message"),
    [
        ({TTL_KEY: "ten"}, [], "collection TTL is not a valid positive integer"),
        ({TTL_KEY: "1.5"}, [], "collection TTL is not a valid positive integer"),
        ({"a": "1"}, ["b"], "cannot modify properties and delete keys at the same time"),
        ({}, [], "empty properties and delete keys"),
    ],
)
def test_bad_alterations_are_refused_and_change_nothing(h, properties, delete_keys, message):
    h.proxy.alter_collection("c", {TTL_KEY: "30"}, [])
    with pytest.raises(MilvusError, match=message):
        h.proxy.alter_collection("c", properties, delete_keys)
    assert h.proxy.describe_collection("c").properties == {TTL_KEY: "30"}


def test_an_unknown_collection_is_named(h):
    with pytest.raises(MilvusError, match="can't find collection"):
        h.proxy.alter_collection("nope", {TTL_KEY: "1"}, [])


def test_a_bad_ttl_is_refused_at_create(h):
    schema = CollectionSchema(
        "d",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "vec", DataType.FLOAT_VECTOR, dim=4),
        ],
    )
    with pytest.raises(MilvusError, match="not a valid positive integer"):
        h.proxy.create_collection(schema, 1, ConsistencyLevel.STRONG, {TTL_KEY: "x"}, b"")
    assert not h.proxy.has_collection("d")


def test_expire_ts_counts_back_from_the_read_and_ignores_no_or_negative_ttls():
    read_ms = 1_700_000_000_000
    assert collection_properties.expire_ts({}, read_ms) == 0
    assert collection_properties.expire_ts({TTL_KEY: "-1"}, read_ms) == 0
    assert collection_properties.expire_ts({TTL_KEY: "2"}, read_ms) == timestamp.compose(
        read_ms - 2_000
    )


def test_a_row_is_live_from_the_expiry_bound_on():
    inserted = np.array([10, 20, 30])
    never = np.full(3, 1 << 62)
    assert _live(inserted, never, 25).tolist() == [True, True, False]
    assert _live(inserted, never, 35, expire_ts=20).tolist() == [False, True, True]
