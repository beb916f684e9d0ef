"""Faults on a whole cluster in one process (services/testing.py), each in milliseconds:
task ordering in the proxy, handoff, idle sealing, duplicated and reordered records, paused
ticks, lost sessions and crashed roles."""

from __future__ import annotations

import threading
import time
from typing import ClassVar

import pytest

from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.msgstream import codec
from vectide.services.common.msgstream.memory import is_data
from vectide.services.common.msgstream.message import CollectionDDLMsg, TimeTickMsg
from vectide.services.common.schema import ConsistencyLevel
from vectide.services.common.segment import SegmentState
from vectide.services.proxy.core import Proxy
from vectide.services.proxy.task_scheduler import Queue, Task
from vectide.services.querynode.segment import NEVER
from vectide.services.testing import Harness

EVENTUALLY = ConsistencyLevel.EVENTUALLY


@pytest.fixture
def harness() -> Harness:
    h = Harness()
    h.create_collection("c")
    return h


def channel(h: Harness, name: str = "c") -> str:
    return h.proxy.meta.get(name).pchannels[0]


def ticks_on(h: Harness, pchannel: str) -> list[int]:
    return [m.ts for m in messages(h, pchannel) if isinstance(m, TimeTickMsg)]


def messages(h: Harness, pchannel: str) -> list:
    return [codec.decode(raw) for raw in h.broker.records(pchannel)]


class HeldWrite(Task):
    """A DML task that stays in flight (stamped, not yet written) until released."""

    queue: ClassVar[Queue] = "dm"

    def __init__(self, pchannel: str) -> None:
        self._pchannel = pchannel
        self.stamped = threading.Event()
        self.release = threading.Event()

    def channels(self) -> list[str]:
        return [self._pchannel]

    def execute(self) -> None:
        self.stamped.set()
        assert self.release.wait(5)


def hold_write(proxy: Proxy, pchannel: str) -> tuple[HeldWrite, threading.Thread]:
    task = HeldWrite(pchannel)
    thread = threading.Thread(target=proxy.scheduler.run, args=(task,))
    thread.start()
    assert task.stamped.wait(5)
    return task, thread


# -- proxy task scheduling ---------------------------------------------------------------------


def test_a_write_in_flight_holds_its_channel_ticks_below_its_stamp(harness):
    h, ch = harness, channel(harness)
    task, thread = hold_write(h.proxy, ch)
    for _ in range(3):
        h.advance(50)
    assert ticks_on(h, ch)[-1] < task.ts  # the write may still land: no tick may pass it
    # a Strong read stamped after it waits for it, so it cannot answer meanwhile
    with pytest.raises(MilvusError) as waited:
        h.query_ids("c", deadline_s=0.1)
    assert waited.value.code == Code.TIMETICK_LAG
    task.release.set()
    thread.join(5)
    h.tick()
    assert ticks_on(h, ch)[-1] >= task.ts
    assert h.query_ids("c") == []


def test_ddl_stamped_before_a_newer_ddl_is_stamped_again_and_channels_see_ddl_in_order(harness):
    h = harness
    late = h.add_proxy()
    stale = h.rootcoord.alloc_timestamp()  # late's stamp, taken before the next DDL...
    h.proxy.create_partition("c", "p1")  # ...which another proxy runs first
    stamps = iter([stale])
    fresh = late.scheduler._alloc_ts
    late.scheduler._alloc_ts = lambda: next(stamps, None) or fresh()
    with pytest.raises(MilvusError) as refused:
        h.rootcoord.create_partition(stale, "c", "p2")
    assert refused.value.code == Code.DDL_OUT_OF_ORDER
    late.create_partition("c", "p2")  # refused once inside, stamped again, done
    assert next(stamps, None) is None  # the stale stamp was used, and refused
    names = [p.name for p in h.rootcoord.describe_collection("c").partitions]
    assert {"p1", "p2"} <= set(names)
    ddl = [m.ts for m in messages(h, channel(h)) if isinstance(m, CollectionDDLMsg)]
    assert len(ddl) >= 3 and ddl == sorted(ddl)


def test_a_lost_session_no_longer_holds_the_ticks_back(harness):
    h, ch = harness, channel(harness)
    zombie = h.add_proxy()
    task, thread = hold_write(zombie, ch)
    h.advance(50)
    assert ticks_on(h, ch)[-1] < task.ts
    h.drop_session(zombie)  # ZooKeeper expired it: its promises no longer count
    h.insert("c", [1])
    h.advance(50)
    assert ticks_on(h, ch)[-1] > task.ts
    assert h.query_ids("c") == [1]
    task.release.set()
    thread.join(5)


# -- handoff and sealing -----------------------------------------------------------------------


def test_growing_rows_are_handed_off_to_the_sealed_copy_without_gap_or_duplicate(harness):
    h = harness
    h.insert("c", range(100))
    [segment], _ = h.proxy.flush(["c"])["c"]
    node = h.nodes.node(h.nodes.live_nodes()[0])
    [vchannel] = node.watched()
    reads: list[list[int]] = []
    handed = 0
    for _ in range(5):  # every loop round, a read: none may miss or repeat a row
        handed += h.step()
        reads.append(h.query_ids("c"))
    assert handed == 1 and node.sealed_segments(vchannel) == [segment]
    assert all(read == list(range(100)) for read in reads)
    assert state_of(h, segment) == SegmentState.FLUSHED
    shard = node._shards[vchannel]
    assert shard.sealed[segment].num_rows == 100  # the sealed copy serves them...
    growing = shard.store
    assert (growing._insert_ts.view()[growing.segment_rows(segment)] == NEVER).all()  # ...only
    # after the handoff deletes reach the sealed rows and new rows grow beside them
    h.delete("c", [0, 1])
    h.insert("c", [100])
    assert h.query_ids("c") == list(range(2, 101))
    assert sorted(h.search_ids("c", 50, 3)) == [49, 50, 51]


def test_an_idle_segment_seals_after_the_idle_time_and_is_handed_off(harness):
    h = harness
    idle_s = h.config.data.segment_idle_seal_s
    h.insert("c", range(10))
    collection_id = h.proxy.meta.get("c").collection_id
    [(segment, *_)] = h.coordinators.datacoord.segment_rows(collection_id)
    assert state_of(h, segment) == SegmentState.GROWING
    assert h.step(int(idle_s * 1000) - 5000) == 0  # not idle long enough
    assert state_of(h, segment) == SegmentState.GROWING
    assert h.step(10_000) == 1  # idle past the limit: sealed, persisted, flushed, handed off
    assert state_of(h, segment) == SegmentState.FLUSHED
    assert h.query_ids("c") == list(range(10))


def state_of(h: Harness, segment_id: int) -> str:
    info = h.coordinators.datacoord.segment(segment_id)
    assert info is not None
    return info.state


# -- duplicated and reordered records ----------------------------------------------------------


def test_a_duplicated_insert_record_is_applied_and_persisted_once(harness):
    h, ch = harness, channel(harness)
    h.broker.duplicate(ch, 1, match=is_data)
    h.insert("c", range(10))
    assert h.broker.faults(ch).duplicated == 1  # the log holds it twice
    assert h.query_ids("c") == list(range(10))
    h.proxy.flush(["c"])
    assert h.step() == 1  # the sealed copy, written from both records, replaces it
    assert h.query_ids("c") == list(range(10))


def test_reordered_records_of_two_writes_leave_the_shard_complete(harness):
    h, ch = harness, channel(harness)
    h.broker.reorder(ch, 2, match=is_data)
    first = h.insert("c", [1, 2])
    second = h.insert("c", [3])
    stored = [m.ts for m in messages(h, ch) if not isinstance(m, (TimeTickMsg, CollectionDDLMsg))]
    assert stored[-2:] == [second, first]  # the log holds them out of stamp order
    assert h.query_ids("c") == [1, 2, 3]
    h.delete("c", [2])
    assert h.query_ids("c") == [1, 3]


# -- paused ticks ------------------------------------------------------------------------------


def test_paused_ticks_leave_eventually_reads_at_the_last_tick_and_strong_reads_fenced(harness):
    h = harness
    h.insert("c", [1, 2])
    h.tick()
    h.pause_ticks()
    h.insert("c", [3])  # acknowledged, not yet covered by a tick
    started = time.monotonic()
    assert h.query_ids("c", EVENTUALLY) == [1, 2]  # at once, at the last tick
    assert time.monotonic() - started < 0.5
    # Strong needs no tick: every writer promised past its stamp, the fence covers row 3
    assert h.query_ids("c", deadline_s=5) == [1, 2, 3]
    assert time.monotonic() - started < 0.5


def test_a_strong_read_behind_a_write_in_flight_waits_for_a_tick_past_it(harness):
    h = harness
    h.insert("c", [1, 2])
    h.tick()
    h.pause_ticks()
    pchannels = h.proxy.meta.get("c").pchannels
    stamp = h.proxy.ticker.stamp(pchannels)  # a write stamped, not yet acknowledged
    result: list[list[int]] = []
    reader = threading.Thread(target=lambda: result.append(h.query_ids("c", deadline_s=5)))
    reader.start()
    reader.join(0.2)
    assert reader.is_alive() and result == []  # no fence: its stamp is above the promise
    h.proxy.ticker.done(pchannels, stamp)
    h.resume_ticks()
    h.tick()
    reader.join(5)
    assert result == [[1, 2]]


def test_a_write_ticks_only_its_channel_while_the_cluster_is_active(harness):
    h = harness
    written = channel(h)
    [other] = [ch for ch in h.coordinators.rootcoord.pchannels if ch != written]
    h.insert("c", [1])
    h.tick()
    before = len(ticks_on(h, written)), len(ticks_on(h, other))
    h.insert("c", [2])
    h.tick()
    assert (len(ticks_on(h, written)), len(ticks_on(h, other))) == (before[0] + 1, before[1])
    assert h.query_ids("c", EVENTUALLY) == [1, 2]  # the tick made it visible


def test_a_session_read_is_fenced_where_its_write_went_and_where_it_did_not():
    h = Harness()
    h.create_collection("s", shards=2)
    h.insert("s", [1])
    h.tick()
    h.pause_ticks()
    stamp = h.insert("s", [2])  # one row: one of the two channels
    started = time.monotonic()
    assert h.query_ids("s", ConsistencyLevel.SESSION, 5, guarantee_ts=stamp) == [1, 2]
    assert time.monotonic() - started < 0.5  # no tick needed on either channel


def test_a_flush_ticks_every_channel_of_the_collection_past_its_stamp():
    h = Harness()
    h.create_collection("s", shards=2)
    h.insert("s", [1])  # one of the two channels only: the other holds no segment
    h.tick()
    info = h.proxy.meta.get("s")
    segments, flush_ts = h.proxy.flush(["s"])["s"]
    h.step(0)
    assert h.proxy.flushed(segments, "s", flush_ts)  # both checkpoints passed the stamp
    assert all(max(ticks_on(h, ch)) >= flush_ts for ch in info.pchannels)


# -- crashes -----------------------------------------------------------------------------------


def test_a_crashed_query_node_is_replaced_from_the_persisted_segments_and_the_channel(harness):
    h = harness
    h.insert("c", range(5))
    h.proxy.flush(["c"])
    h.step()
    h.insert("c", range(5, 8))  # growing only
    h.delete("c", [0])
    [old] = h.nodes.live_nodes()
    new = h.crash_querynode(old)
    assert h.nodes.live_nodes() == [new.node_id] and new.node_id != old
    assert h.query_ids("c") == list(range(1, 8))


def test_a_crashed_coordinator_hands_out_later_stamps_and_keeps_the_catalog(harness):
    h = harness
    h.insert("c", [1])
    before = h.rootcoord.alloc_timestamp()
    h.crash_coordinators()
    assert h.rootcoord.alloc_timestamp() > before
    assert h.rootcoord.describe_collection("c").name == "c"
    h.insert("c", [2])
    assert h.query_ids("c") == [1, 2]


def test_a_crashed_proxy_loses_no_acknowledged_row(harness):
    h = harness
    h.insert("c", [1, 2])
    h.crash_proxy(h.proxy)
    h.insert("c", [3])
    assert h.query_ids("c") == [1, 2, 3]
