import threading

import numpy as np
import pytest

from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.hashing import murmur3_int64, shard_of
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.results import QueryRows, SearchHits, merge_hits, merge_rows
from vectide.services.common.rpc import codec
from vectide.services.common.rpc import types as _types  # noqa: F401  (registers the RPC types)
from vectide.services.common.schema import (
    CollectionInfo,
    CollectionSchema,
    ConsistencyLevel,
    FieldSchema,
)
from vectide.services.proxy.channels_time_ticker import AckedWriter, ChannelsTimeTicker
from vectide.services.proxy.shard_cache import Placement, ShardLeaderCache


def test_murmur3_matches_the_reference_implementation():
    # mmh3.hash(struct.pack("<q", k), 0, signed=False) for k = 0, 1, -1
    assert murmur3_int64(np.array([0, 1, -1])).tolist() == [1669671676, 1392991556, 1651860712]


def test_shards_are_stable_and_spread():
    keys = np.arange(10_000)
    shards = shard_of(keys, 4)
    assert np.array_equal(shards, shard_of(keys, 4))
    assert np.bincount(shards).min() > 2_000
    assert shard_of(["a", "b", "a"], 3)[0] == shard_of(["a"], 3)[0]


def test_ticker_reports_below_pending_and_fresh_when_idle():
    clock = iter(range(100, 10_000))
    ticker = ChannelsTimeTicker(["a", "b"], lambda: next(clock))
    ts = ticker.stamp(["a"])
    report = ticker.promise()[0]
    assert report["a"] == ts - 1
    assert report["b"] > ts
    ticker.done(["a"], ts)
    later = ticker.promise()[0]
    assert later["a"] == later["b"] > report["b"]


def test_ticker_stamps_concurrently_unique():
    clock = iter(range(1, 1_000_000))
    lock = threading.Lock()

    def alloc():
        with lock:
            return next(clock)

    ticker = ChannelsTimeTicker(["a"], alloc)
    stamps: list[int] = []
    #: reports that promised past a write still in flight (an assert in a thread cannot
    #: fail the test: collected here, asserted after the join)
    broken: list[tuple[int, int]] = []

    def writer():
        for _ in range(500):
            ts = ticker.stamp(["a"])
            stamps.append(ts)
            promised = ticker.promise()[0]["a"]
            if promised > ts - 1:  # this write is pending: the promise must stay below it
                broken.append((promised, ts))
            ticker.done(["a"], ts)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert broken == []
    assert len(set(stamps)) == 2000 and ticker.pending() == 0


def test_merge_hits_keeps_the_best_per_query():
    a = SearchHits(
        "L2",
        [2, 1],
        np.array([1, 2, 3]),
        np.array([0.1, 0.5, 0.2], np.float32),
        {"f": ["a1", "a2", "a3"]},
    )
    b = SearchHits(
        "L2",
        [1, 2],
        np.array([4, 5, 6]),
        np.array([0.3, 0.1, 0.9], np.float32),
        {"f": ["b4", "b5", "b6"]},
    )
    merged = merge_hits([a, b], 2)
    assert merged.counts == [2, 2]
    assert merged.pks.tolist() == [1, 4, 5, 3]
    assert merged.fields["f"] == ["a1", "b4", "b5", "a3"]
    ip = merge_hits(
        [
            SearchHits("IP", [1], np.array([1]), np.array([0.2], np.float32)),
            SearchHits("IP", [1], np.array([2]), np.array([0.9], np.float32)),
        ],
        1,
    )
    assert ip.pks.tolist() == [2]


def test_merge_rows_pages_in_pk_order():
    parts = [
        QueryRows(np.array([5, 1]), {"x": ["e", "a"]}),
        QueryRows(np.array([3, 2]), {"x": ["c", "b"]}),
    ]
    page = merge_rows(parts, offset=1, limit=2)
    assert page.pks.tolist() == [2, 3] and page.fields["x"] == ["b", "c"]
    assert merge_rows([QueryRows([], count=3), QueryRows([], count=4)]).count == 7


def test_rpc_codec_round_trips_registered_types():
    schema = CollectionSchema("c", [FieldSchema(100, "id", DataType.INT64, is_primary=True)])
    hits = SearchHits(
        "L2",
        [1],
        np.array([7]),
        np.array([0.5], np.float32),
        {"v": np.ones((1, 4), np.float32), "s": ["x"]},
    )
    back = codec.decode(codec.encode([schema, hits, (1, 2), {"k": None}]))
    assert back[0] == schema
    assert back[1].pks.tolist() == [7] and back[1].fields["v"].shape == (1, 4)
    assert back[2] == (1, 2) and back[3] == {"k": None}


def test_ticker_reports_are_urgent_after_a_write_or_a_wake_only():
    clock = iter(range(100, 10_000))
    ticker = ChannelsTimeTicker(["a", "b"], lambda: next(clock))
    woken: list[bool] = []
    ticker.on_done = lambda: woken.append(True)
    assert ticker.take_urgent() == (True, {})  # the first report: the rootcoord waits for it
    assert ticker.take_urgent() == (False, {})
    ts = ticker.stamp(["a"])
    assert ticker.take_urgent() == (False, {})  # a write in flight: nothing to cover yet
    assert ticker.written() == {}
    ticker.done(["a"], ts)
    assert woken == [True] and ticker.take_urgent() == (True, {})
    assert ticker.written() == {"a": ts}  # "a" needs a tick past ts, "b" none
    ticker.wake({"b": 7})  # a Strong read found no fence on "b"
    ticker.wake({"b": 5})
    assert woken == [True, True, True] and ticker.take_urgent() == (True, {"b": 7})
    assert ticker.take_urgent() == (False, {})


class Coordinator:
    """A query coordinator's answers, counted."""

    def __init__(self, leaders: dict[str, int], loaded: bool = True) -> None:
        self.leaders, self.loaded, self.calls = leaders, loaded, 0
        self.partitions: list[int] | None = None

    def loaded_partitions(self, collection_id: int) -> list[int] | None:
        if not self.loaded:
            raise MilvusError(Code.COLLECTION_NOT_LOADED, "collection not loaded")
        return self.partitions

    def replicas(self, collection_id: int) -> list[dict[str, int]]:
        self.calls += 1
        return [dict(self.leaders)]


def collection_info() -> CollectionInfo:
    schema = CollectionSchema("c", [FieldSchema(100, "id", DataType.INT64, is_primary=True)])
    return CollectionInfo(
        7, "c", schema, 2, ["v0", "v1"], ["p0", "p1"], ConsistencyLevel.BOUNDED, 0
    )


def test_shard_leaders_are_asked_once_until_a_read_through_them_fails():
    source = Coordinator({"v0": 1, "v1": 2})
    source.partitions = [11]
    cache = ShardLeaderCache(source)
    info = collection_info()
    assert cache.get(info) == cache.get(info) == Placement([{"v0": 1, "v1": 2}], [11])
    assert source.calls == 1
    source.leaders = {"v0": 3, "v1": 2}  # node 1 died; its shard moved
    assert cache.refresh(info).replicas == [{"v0": 3, "v1": 2}]
    assert cache.get(info).replicas[0]["v0"] == 3 and source.calls == 2


def test_an_unloaded_or_half_placed_collection_is_not_cached():
    info = collection_info()
    with pytest.raises(MilvusError) as not_loaded:
        ShardLeaderCache(Coordinator({}, loaded=False)).get(info)
    assert not_loaded.value.code == Code.COLLECTION_NOT_LOADED
    half = Coordinator({"v0": 1})
    cache = ShardLeaderCache(half)
    cache.get(info)
    cache.get(info)
    assert half.calls == 2  # asked again until every shard has a node


def test_ticker_says_where_acknowledged_writes_end_and_not_after_a_failed_one():
    clock = iter(range(100, 10_000))
    ticker = ChannelsTimeTicker(["a", "b"], lambda: next(clock))
    assert ticker.promise(at_ts=50) == ({"a": 50, "b": 50}, {"a": 0, "b": 0})
    offsets = iter([7, 3])
    writer = AckedWriter(lambda messages: [next(offsets) for _ in messages], ticker)
    ts = ticker.stamp(["a", "b"])
    assert writer.write([("a", None), ("b", None)]) == [7, 3]
    promises, ends = ticker.promise(at_ts=ts + 1)
    assert promises == {"a": ts - 1, "b": ts - 1}  # still in flight until done
    assert ends == {"a": 8, "b": 4}
    ticker.done(["a", "b"], ts)

    def broken(messages):
        raise RuntimeError("broker gone")

    with pytest.raises(RuntimeError):
        AckedWriter(broken, ticker).write([("a", None)])
    assert ticker.promise(at_ts=ts + 2)[1] == {"b": 4}  # part of it may be on "a": unknown
    AckedWriter(lambda messages: [9], ticker).write([("a", None)])
    assert ticker.promise(at_ts=ts + 3)[1] == {"a": 10, "b": 4}
