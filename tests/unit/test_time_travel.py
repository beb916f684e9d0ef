"""Time travel within the retention window: which reads travel, the window's checks, the
query node's snapshot choice, and compaction keeping what the window needs."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fakes import DictStore
from tests.unit.test_compaction import delete_batch, flush_segment, persisted_pks, segment
from tests.unit.test_datanode_batch import counter
from tests.unit.test_querynode import DIM, VCH, collection, delete, insert, pack, query
from vectide.services.common import timestamp
from vectide.services.common.errors import MilvusError
from vectide.services.common.kv import MemoryKV
from vectide.services.common.requests import ShardQueryRequest, ShardSearchRequest
from vectide.services.common.schema import ConsistencyLevel
from vectide.services.common.segment import Deltalog, SegmentState
from vectide.services.common.time_travel import PURGE_SLACK_MS, Retention
from vectide.services.datacoord.compaction import CompactionPolicy, delete_estimate, plan_groups
from vectide.services.datacoord.core import DataCoord, DataCoordConfig
from vectide.services.querynode.core import QueryNode
from vectide.streaming.compaction import CompactionWorker, in_process

NOW_MS = 1_800_000_000_000
HOUR = Retention(3600)
CUSTOMIZED, SESSION = ConsistencyLevel.CUSTOMIZED, ConsistencyLevel.SESSION


def at(seconds_ago: float, logical: int = 0) -> int:
    """The stamp ``seconds_ago`` before NOW_MS."""
    return timestamp.compose(NOW_MS - int(seconds_ago * 1000), logical)


# -- which reads travel ----------------------------------------------------------------------


def test_customized_with_a_stamp_travels_only_while_retention_is_on():
    stamp = at(60)
    assert HOUR.requested(CUSTOMIZED, False, stamp) == stamp
    # retention off: Customized keeps its meaning of a guarantee (read at least ``stamp``)
    assert Retention(0).requested(CUSTOMIZED, False, stamp) == 0
    # no stamp (pymilvus sends 1), another level, or the collection's default level: no travel
    assert HOUR.requested(CUSTOMIZED, False, 1) == 0
    assert HOUR.requested(CUSTOMIZED, False, 0) == 0
    assert HOUR.requested(SESSION, False, stamp) == 0
    assert HOUR.requested(CUSTOMIZED, True, stamp) == 0
    # the request's travel_timestamp travels at any level, retention on or off (then refused)
    assert HOUR.requested(SESSION, True, 1, travel_ts=stamp) == stamp
    assert Retention(0).requested(ConsistencyLevel.STRONG, False, 0, travel_ts=stamp) == stamp


def test_the_window_refuses_older_stamps_naming_it_and_lets_the_future_wait():
    HOUR.check(at(3599), NOW_MS)
    HOUR.check(at(-30), NOW_MS)  # in the future: the query nodes wait for it
    with pytest.raises(
        MilvusError, match=r"older than the retention window: data.retention_s = 3600"
    ):
        HOUR.check(at(3601), NOW_MS)
    with pytest.raises(MilvusError, match=r"time travel .* is off: data.retention_s is 0"):
        Retention(0).check(at(1), NOW_MS)
    assert HOUR.window_start(NOW_MS) == at(3600)


def test_compaction_may_purge_only_deletes_older_than_the_window_and_its_slack():
    assert Retention(0).purge_ts(at(0)) is None
    assert HOUR.purge_ts(at(0, logical=5)) == at(3600 + PURGE_SLACK_MS / 1000, logical=5)


# -- the query node reads at the travel stamp ------------------------------------------------


def travel_query(node: QueryNode, travel_ts: int, wait: float = 0.2) -> list[int]:
    req = ShardQueryRequest(7, [VCH], travel_ts, wait, travel_ts=travel_ts, expr="id >= 0")
    return node.query(req).pks.tolist()


def test_a_travelling_read_sees_the_rows_as_of_its_stamp_not_the_tsafe():
    node = QueryNode(1, chunk_rows=256)
    node.watch(collection(), VCH)
    vec = np.eye(DIM, dtype=np.float32)
    node.apply(VCH, pack(0, 10, insert([1, 2, 3], 5, vec[:3])))
    node.apply(VCH, pack(10, 20, delete([2, 3], 15), insert([3], 15, vec[3:4])))  # 3 upserted
    node.apply(VCH, pack(20, 30, insert([4], 25, vec[4:5])))
    assert query(node, 30) == [1, 3, 4]
    assert travel_query(node, 10) == [1, 2, 3]
    assert travel_query(node, 4) == []
    assert travel_query(node, 15) == [1, 3]  # the upsert's delete and insert at one stamp
    search = ShardSearchRequest(7, [VCH], "vec", vec[1:2], "L2", 1, 12, 0.2, travel_ts=12)
    assert node.search(search).pks.tolist() == [2]
    # a stamp the shard has not reached waits like a guarantee
    with pytest.raises(MilvusError, match="serviceable up to 30"):
        travel_query(node, 40, wait=0.05)


def test_a_node_refuses_to_travel_before_the_deletes_a_compacted_segment_purged():
    store = DictStore()
    datacoord = DataCoord(MemoryKV(), counter(10_000), counter(), DataCoordConfig(1000))
    first = flush_segment(datacoord, store, 1, [1, 2], 10, 0)
    delete_batch(datacoord, store, [1], 30, 2)
    datacoord.compact(7)  # retention off: the delete at 30 is purged
    CompactionWorker(datacoord, in_process(store)).run_once()
    [merged] = datacoord.segments(7, (SegmentState.FLUSHED,))
    assert merged.deletes_applied_ts == 31  # the checkpoint: the batch's closing tick
    node = QueryNode(1, binlogs=store)
    node.watch(collection(), VCH)
    node.apply(VCH, pack(0, 35, first, delete([1], 30)))
    assert travel_query(node, 20) == [1, 2]  # still held: row 1 lived at 20
    assert node.load_segment(VCH, merged)
    with pytest.raises(MilvusError, match="compacted with the deletes up to 31"):
        travel_query(node, 20)
    assert travel_query(node, 33) == [2]
    assert query(node, 35) == [2]


# -- compaction keeps what the window needs --------------------------------------------------


def test_deletes_inside_the_window_neither_trigger_nor_count_for_a_rewrite():
    policy = CompactionPolicy(max_rows=100, delete_ratio=0.2)
    seg = segment(1, 90, min_ts=at(7200))
    recent = Deltalog(VCH, "d1", "p1", 50, max_ts=at(60))
    old = Deltalog(VCH, "d0", "p0", 5, max_ts=at(5000))
    purge = HOUR.purge_ts(at(0))
    assert delete_estimate(seg, [recent, old]) == 55
    assert delete_estimate(seg, [recent, old], purge) == 5
    assert plan_groups([seg], [recent, old], policy) != []
    assert plan_groups([seg], [recent, old], policy, purge_ts=purge) == []
    assert plan_groups([seg], [recent, old], policy, manual=True, purge_ts=purge) != []


def test_a_merge_keeps_rows_deleted_within_the_window_and_their_deltalogs():
    store = DictStore()
    policy = CompactionPolicy(max_rows=1000, retention=HOUR)
    datacoord = DataCoord(
        MemoryKV(), lambda: at(0), counter(), DataCoordConfig(1000, compaction=policy)
    )
    first = flush_segment(datacoord, store, 1, [1, 2, 3], at(7200), 0)
    second = flush_segment(datacoord, store, 2, [4, 5], at(7100), 2)
    delete_batch(datacoord, store, [1], at(6000), 4)  # left the window: purged
    delete_batch(datacoord, store, [4], at(60), 6)  # inside it: kept, with its stamp
    datacoord.compact(7)
    CompactionWorker(datacoord, in_process(store)).run_once()
    [merged] = datacoord.segments(7, (SegmentState.FLUSHED,))
    assert merged.deletes_applied_ts == HOUR.purge_ts(at(0))
    assert persisted_pks(store, merged) == [2, 3, 4, 5]
    recent = [d for d in datacoord.deltalogs(7, VCH) if d.max_ts > merged.deletes_applied_ts]
    assert len(recent) == 1  # the deltalog of the kept delete still loads with the segment
    node = QueryNode(1, binlogs=store)
    node.watch(collection(), VCH)
    node.apply(VCH, pack(0, at(59), first, second, delete([1], at(6000)), delete([4], at(60))))
    assert node.load_segment(VCH, merged)
    assert travel_query(node, at(120)) == [2, 3, 4, 5]  # row 4 as it was, from the merge
    assert travel_query(node, at(60)) == [2, 3, 5]
    assert query(node, at(59)) == [2, 3, 5]


def test_an_ordinary_read_overtaken_by_a_compaction_swap_reads_at_the_new_tsafe():
    node = QueryNode(1)
    node.watch(collection(), VCH)
    node.apply(VCH, pack(0, 60))
    shard = node._shard(VCH)
    shard.purged_ts = 50  # a swap installed while the read waited, its snapshot 40 found before
    ordinary = ShardQueryRequest(7, [VCH], 40, 0.2)
    assert node._kept(shard, ordinary, 40) == 60
    assert node._kept(shard, ordinary, 55) == 55
    with pytest.raises(MilvusError, match="cannot be read as of 40"):
        node._kept(shard, ShardQueryRequest(7, [VCH], 40, 0.2, travel_ts=40), 40)
    # an iterator's page: its snapshot is best effort, the page is read at the tsafe
    page = ShardQueryRequest(7, [VCH], 40, 0.2, travel_ts=40, strict_travel=False)
    assert node._kept(shard, page, 40) == 60
