"""AlterCollection's properties and the one Vectide acts on, ``collection.ttl.seconds`` (a
whole cluster in one process, services/testing.py, on a clock the test moves: reads, garbage
collection, compaction); AlterCollectionField's field params."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.fakes import DictStore
from tests.unit.test_compaction import flush_segment, persisted_pks
from tests.unit.test_datanode_batch import counter
from vectide.services.common import collection_properties, timestamp
from vectide.services.common.collection_properties import MMAP_KEY, TTL_KEY, altered_field
from vectide.services.common.errors import MilvusError
from vectide.services.common.kv import MemoryKV
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.schema import CollectionSchema, ConsistencyLevel, FieldSchema
from vectide.services.common.segment import PERSISTED, Binlog, SegmentInfo, SegmentState
from vectide.services.common.time_travel import PURGE_SLACK_MS
from vectide.services.datacoord.compaction import CompactionPolicy, expired_estimate
from vectide.services.datacoord.core import DataCoord, DataCoordConfig
from vectide.services.datacoord.garbage import expired
from vectide.services.querynode.segment import _live
from vectide.services.testing import Harness
from vectide.streaming.compaction import CompactionWorker, in_process


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


def flushed(h: Harness, keys: list[int]) -> int:
    """Insert ``keys``, flush them into a sealed segment the query node serves; the stamp."""
    ts = h.insert("c", keys)
    h.proxy.flush(["c"])
    h.step()
    h.step()
    return timestamp.physical_ms(ts)


def test_garbage_collection_drops_a_segment_once_all_its_rows_expired(h):
    """A segment goes once its newest row is older than the TTL plus the slack a proxy's
    clock may lag by (PURGE_SLACK_MS), from the segment records and from the query node."""
    h.proxy.alter_collection("c", {TTL_KEY: "10"}, [])
    first_ms = flushed(h, [1, 2])
    h.advance(5_000)
    second_ms = flushed(h, [3])
    datacoord = h.coordinators.datacoord
    collection_id = h.proxy.meta.get("c").collection_id
    first, second = sorted(s.segment_id for s in datacoord.segments(collection_id))

    def gc_at(bound_ms: int) -> dict[int, SegmentState]:
        h.advance(bound_ms + PURGE_SLACK_MS + 10_000 - h.clock.now_ms())
        h.coordinators.gc.run_once()
        return {s.segment_id: s.state for s in datacoord.gc_snapshot()[0]}

    states = gc_at(first_ms)  # every row of both is still readable at the bound
    assert states[first] in PERSISTED and states[second] in PERSISTED
    assert sealed_rows(h) == 3
    states = gc_at((first_ms + second_ms) // 2)
    assert states[first] == SegmentState.DROPPED
    assert states[second] in PERSISTED
    assert sealed_rows(h) == 1


def test_expired_takes_persisted_segments_whose_newest_row_is_older_than_the_bound():
    def segment(segment_id: int, state: SegmentState, *max_ts: int) -> SegmentInfo:
        parts = {f"p{i}": Binlog(f"p{i}", 1, {}, "", ts - 1, ts) for i, ts in enumerate(max_ts)}
        return SegmentInfo(segment_id, 7, 1, "v", state, binlogs=parts)

    segments = [
        segment(1, SegmentState.FLUSHED, 10, 20),
        segment(2, SegmentState.INDEXED, 10, 40),
        segment(3, SegmentState.GROWING, 10),
        segment(4, SegmentState.FLUSHED),
    ]
    assert [s.segment_id for s in expired(segments, {7: 30})] == [1]
    assert expired(segments, {8: 30}) == []


def test_compaction_drops_rows_past_the_ttl_and_rewrites_a_mostly_expired_segment():
    store = DictStore()
    policy = CompactionPolicy(max_rows=1000, delete_ratio=0.2)
    datacoord = DataCoord(
        MemoryKV(), counter(10_000), counter(), DataCoordConfig(1000, compaction=policy)
    )
    flush_segment(datacoord, store, 1, [1, 2, 3], 10, 0)
    flush_segment(datacoord, store, 1, [4], 50, 2)  # a later part of the same segment
    assert datacoord.auto_compact() == 0  # no TTL: nothing to do
    datacoord.expiries = lambda: {7: 30}  # rows inserted before stamp 30 have expired
    assert datacoord.auto_compact() == 1  # 3 of its 4 rows: past delete_ratio
    CompactionWorker(datacoord, in_process(store)).run_once()
    [rewritten] = datacoord.segments(7, (SegmentState.FLUSHED,))
    assert persisted_pks(store, rewritten) == [4]
    assert expired_estimate(rewritten, 30) == 0


# -- AlterCollectionField ----------------------------------------------------------------------


def text_field(**kwargs) -> FieldSchema:
    return FieldSchema(102, "title", DataType.VARCHAR, max_length=16, **kwargs)


def test_a_field_takes_a_new_max_length_capacity_and_mmap_flag():
    title = altered_field(text_field(), {"max_length": "512", MMAP_KEY: "True"})
    assert (title.max_length, title.properties) == (512, {MMAP_KEY: "true"})
    assert altered_field(title, {}, [MMAP_KEY]).properties == {}
    tags = FieldSchema(103, "tags", DataType.ARRAY, element_type=int(DataType.VARCHAR))
    tags = altered_field(replace(tags, max_length=8, max_capacity=4), {"max_capacity": "64"})
    assert (tags.max_capacity, tags.max_length) == (64, 8)
    assert altered_field(tags, {"max_length": "32"}).max_length == 32


@pytest.mark.parametrize(
    ("field", "properties", "delete_keys", "message"),
    [
        (text_field(), {"max_capacity": "4"}, [], "applies to Array fields only"),
        (text_field(), {"max_length": "0"}, [], r"must be an integer in \[1, 65535\]"),
        (text_field(), {"max_length": "big"}, [], "must be an integer"),
        (text_field(), {"dim": "8"}, [], "dim of field title cannot be altered"),
        (text_field(), {}, ["max_length"], "only mmap.enabled can be deleted"),
        (text_field(), {MMAP_KEY: "yes"}, [], "must be true or false"),
        (text_field(), {}, [], "empty properties and delete keys"),
        (text_field(is_primary=True), {"max_length": "64"}, [], "primary key field title"),
        (
            FieldSchema(104, "n", DataType.INT64),
            {"max_length": "64"},
            [],
            "applies to VarChar fields and Arrays of VarChar only",
        ),
    ],
)
def test_field_alterations_milvus_refuses_are_refused(field, properties, delete_keys, message):
    with pytest.raises(MilvusError, match=message):
        altered_field(field, properties, delete_keys)


def test_a_longer_max_length_takes_longer_values_and_is_described(h):
    schema = CollectionSchema(
        "t",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "vec", DataType.FLOAT_VECTOR, dim=4),
            text_field(),
        ],
    )
    h.proxy.create_collection(schema, 1, ConsistencyLevel.STRONG, {}, b"")
    h.proxy.alter_collection_field("t", "title", {"max_length": "64", MMAP_KEY: "true"}, [])
    title = h.proxy.meta.get("t").schema.field("title")
    assert (title.max_length, title.properties) == (64, {MMAP_KEY: "true"})
    with pytest.raises(MilvusError, match="does not exist in collection t"):
        h.proxy.alter_collection_field("t", "nope", {"max_length": "64"}, [])
