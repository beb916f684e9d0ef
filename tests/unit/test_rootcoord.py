"""Rootcoord and querycoord cores on a memory metastore and a recording channel writer."""

import time

import pytest

from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.kv import MemoryKV
from vectide.services.common.load_state import LOAD_STATE_LOADED, LOAD_STATE_NOT_LOAD
from vectide.services.common.msgstream.message import (
    CollectionDDLMsg,
    DataType,
    DDLOp,
    Position,
    TimeTickMsg,
)
from vectide.services.common.pacer import Pacer
from vectide.services.common.schema import (
    CollectionSchema,
    ConsistencyLevel,
    FieldSchema,
    IndexInfo,
)
from vectide.services.querycoord.core import QueryCoord
from vectide.services.rootcoord.core import RootCoord
from vectide.services.rootcoord.timetick_sync import TimeTickSync


class Recorder:
    def __init__(self):
        self.written = []

    def write(self, messages):
        start = len(self.written)
        self.written += messages
        return list(range(start, start + len(messages)))


def schema(name="c"):
    return CollectionSchema(
        name,
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "v", DataType.FLOAT_VECTOR, dim=4),
        ],
    )


@pytest.fixture
def root():
    rc = RootCoord(MemoryKV(), Recorder(), "t", 3)
    rc.start()
    return rc


def test_create_collection_broadcasts_ddl_and_records_start_offsets(root):
    info = root.create_collection(root.alloc_timestamp(), schema(), 2, ConsistencyLevel.STRONG)
    assert info.vchannels == [f"t-dml_0_{info.collection_id}v0", f"t-dml_1_{info.collection_id}v1"]
    ddl = [(ch, m) for ch, m in root._writer.written if isinstance(m, CollectionDDLMsg)]
    assert [ch for ch, _ in ddl] == ["t-dml_0", "t-dml_1"]
    assert ddl[0][1].op == DDLOp.CREATE_COLLECTION and ddl[0][1].ts == info.create_ts
    assert info.start_offsets == {"t-dml_0": 0, "t-dml_1": 1}
    assert root.describe_collection("c").partitions[0].name == "_default"


def test_ddl_older_than_the_newest_executed_is_rejected(root):
    early, late = root.alloc_timestamp(), root.alloc_timestamp()
    root.create_collection(late, schema("a"), 1, ConsistencyLevel.BOUNDED)
    with pytest.raises(MilvusError) as race:
        root.create_collection(early, schema("b"), 1, ConsistencyLevel.BOUNDED)
    assert race.value.code == Code.DDL_OUT_OF_ORDER


def test_catalog_survives_a_new_coordinator_and_stamps_stay_ahead():
    kv = MemoryKV()
    first = RootCoord(kv, Recorder(), "t", 2)
    first.start()
    info = first.create_collection(first.alloc_timestamp(), schema(), 1, ConsistencyLevel.STRONG)
    first.create_partition(first.alloc_timestamp(), "c", "p")
    second = RootCoord(kv, Recorder(), "t", 2)
    second.start()
    assert second.describe_collection("c").collection_id == info.collection_id
    assert [p.name for p in second.describe_collection("c").partitions] == ["_default", "p"]
    assert second.alloc_timestamp() > info.create_ts


def test_missing_things_are_milvus_errors(root):
    with pytest.raises(MilvusError) as missing:
        root.describe_collection("nope")
    assert missing.value.code == Code.COLLECTION_NOT_FOUND
    root.create_collection(root.alloc_timestamp(), schema(), 1, ConsistencyLevel.STRONG)
    with pytest.raises(MilvusError, match="already exists"):
        root.create_collection(root.alloc_timestamp(), schema(), 1, ConsistencyLevel.STRONG)
    with pytest.raises(MilvusError, match="default partition"):
        root.drop_partition(root.alloc_timestamp(), "c", "_default")


def test_ticks_wait_for_every_live_proxy_and_cover_idle_channels(root):
    root.set_live_proxies([7])
    assert root.broadcast_ticks() == {}  # proxy 7 has not promised anything yet
    root.report_timetick(7, {"t-dml_0": 100, "t-dml_1": 10**18, "t-dml_2": 10**18})
    ticks = root.broadcast_ticks()
    assert ticks["t-dml_0"] == 100 and ticks["t-dml_1"] > 100
    written = [(ch, m.ts) for ch, m in root._writer.written if isinstance(m, TimeTickMsg)]
    assert sorted(ch for ch, _ in written) == ["t-dml_0", "t-dml_1", "t-dml_2"]
    assert root.broadcast_ticks().get("t-dml_0") is None  # no progress, no new tick
    root.set_live_proxies([])
    assert root.broadcast_ticks()["t-dml_0"] > 100


def test_own_pending_ddl_holds_its_channel_back():
    sync = TimeTickSync(["a", "b"])
    sync.begin_own("a", 50)
    assert sync.next_ticks(100) == {"a": 49, "b": 100}
    sync.end_own("a", 50)
    assert sync.next_ticks(101) == {"a": 101, "b": 101}


def test_while_active_only_channels_that_need_a_tick_get_one():
    sync = TimeTickSync(["a", "b", "c", "d"], max_quiet_s=3600)
    sync.set_live([1])
    sync.report(1, {ch: 100 for ch in "abcd"}, dict.fromkeys("abcd", 0), {})
    assert sync.next_ticks(100, everywhere=False) == dict.fromkeys("abcd", 100)  # no floor yet
    sync.written(dict.fromkeys("abcd", 1))
    sync.report(1, {ch: 200 for ch in "abcd"}, dict.fromkeys("abcd", 0), {})
    assert sync.next_ticks(200, everywhere=False) == {}  # nothing written, nobody waits
    sync.report(1, {ch: 300 for ch in "abcd"}, {"a": 5, "b": 0, "c": 0, "d": 0}, {"a": 250})
    sync.begin_own("b", 260)
    sync.end_own("b", 260, 3)  # the coordinator's own DDL on "b"
    sync.want({"c": 400})  # a flush waits on "c" up to 400
    assert sync.next_ticks(300, everywhere=False) == {"a": 300, "b": 300, "c": 300}
    sync.report(1, {ch: 500 for ch in "abcd"}, {"a": 5, "b": 0, "c": 0, "d": 0}, {"a": 250})
    assert sync.next_ticks(500, everywhere=False) == {"c": 500}  # until a tick reaches 400
    assert sync.next_ticks(600, everywhere=False) == {}
    assert sync.next_ticks(700) == {"a": 500, "b": 500, "d": 500}  # idle: the broadcast ticks all
    sync.report(1, {ch: 800 for ch in "abcd"})  # a writer that does not say what it wrote
    assert sync.next_ticks(800, everywhere=False) == dict.fromkeys("abcd", 800)


def test_a_held_back_tick_does_not_count_as_covering_the_write():
    sync = TimeTickSync(["a"], max_quiet_s=3600)
    sync.set_live([1, 2])
    sync.written({"a": 1})
    sync.report(1, {"a": 90}, {"a": 0}, {})  # proxy 1's write at 91 is in flight
    sync.report(2, {"a": 200}, {"a": 7}, {"a": 150})  # proxy 2 wrote at 150
    assert sync.next_ticks(200, everywhere=False) == {"a": 90}
    sync.report(1, {"a": 300}, {"a": 9}, {"a": 91})
    assert sync.next_ticks(300, everywhere=False) == {"a": 200}  # 150 still above the last
    assert sync.next_ticks(400, everywhere=False) == {}


def test_a_quiet_channel_still_ticks_every_max_quiet_s():
    sync = TimeTickSync(["a", "b"], max_quiet_s=0.05)
    sync.set_live([1])
    sync.written({"a": 1, "b": 1})
    sync.report(1, {"a": 100, "b": 100}, {"a": 0, "b": 0}, {})
    assert sync.next_ticks(100, everywhere=False) == {"a": 100, "b": 100}  # never ticked
    sync.report(1, {"a": 200, "b": 200}, {"a": 0, "b": 0}, {"a": 150})
    assert sync.next_ticks(200, everywhere=False) == {"a": 200}
    time.sleep(0.06)
    sync.report(1, {"a": 300, "b": 300}, {"a": 0, "b": 0}, {"a": 150})
    assert sync.next_ticks(300, everywhere=False) == {"a": 300, "b": 300}


def test_an_active_rootcoord_ticks_written_channels_an_idle_one_all():
    root = RootCoord(MemoryKV(), Recorder(), "t", 3, tick_pacer=Pacer(0.05, 3600, hold_s=3600))
    root.start()
    root.set_live_proxies([7])
    channels = ["t-dml_0", "t-dml_1", "t-dml_2"]
    root.report_timetick(7, dict.fromkeys(channels, 100), ends=dict.fromkeys(channels, 0))
    assert sorted(root.broadcast_ticks()) == channels  # idle (no activity yet): every channel
    ts = root.alloc_timestamp()
    root.report_timetick(
        7, dict.fromkeys(channels, ts + 1), True, dict.fromkeys(channels, 0), {"t-dml_1": ts}
    )
    assert sorted(root.broadcast_ticks()) == ["t-dml_1"]  # active: where the write went
    root.report_timetick(
        7,
        dict.fromkeys(channels, ts + 2),
        True,
        dict.fromkeys(channels, 0),
        {"t-dml_1": ts},
        wanted={"t-dml_2": ts + 2},  # a reader without a fence there
    )
    assert sorted(root.broadcast_ticks()) == ["t-dml_2"]
    root.want_ticks({"t-dml_0": ts + 2})  # a sealed segment's flush
    assert sorted(root.broadcast_ticks()) == ["t-dml_0"]


def test_fences_only_where_every_writer_promised_past_the_read_and_said_where_it_ends():
    sync = TimeTickSync(["a", "b", "c"])
    sync.set_live([1, 2])
    sync.written({"a": 5, "b": 5})  # the coordinator's own ticks; none on "c" yet
    sync.report(1, {"a": 100, "b": 100, "c": 100}, {"a": 20, "b": 0, "c": 0})
    assert sync.fences(90, ["a", "b", "c"]) == []  # proxy 2 has promised nothing
    sync.report(2, {"a": 100, "b": 80, "c": 100}, {"a": 30, "b": 12, "c": 0})
    # "b": proxy 2 may still write below 90 there; "c": where a predecessor wrote is unknown
    assert sync.fences(90, ["a", "b", "c"]) == [Position("a", 30, 90)]
    assert sync.fences(80, ["b"]) == [Position("b", 12, 80)]
    sync.begin_own("a", 95)  # a DDL in flight on "a"
    assert sync.fences(90, ["a"]) == []
    sync.end_own("a", 95, 41)
    assert sync.fences(90, ["a"]) == [Position("a", 41, 90)]
    sync.begin_own("a", 96)
    sync.end_own("a", 96, None)  # failed: part of it may be on "a", where is unknown
    assert sync.fences(90, ["a"]) == []
    sync.report(2, {"a": 100, "b": 100, "c": 100}, {"b": 12, "c": 0})  # its write to "a" failed
    sync.written({"a": 50})
    assert sync.fences(90, ["a", "b"]) == [Position("b", 12, 90)]
    sync.report(1, {"a": 100, "b": 100, "c": 100})  # a proxy that does not tell ends
    assert sync.fences(90, ["a", "b"]) == []
    sync.set_live([2])  # proxy 1 left: its last writes may not have been reported
    assert sync.fences(90, ["a", "b"]) == []
    sync.written({"a": 60, "b": 60})  # the next ticks lie after all of them
    assert sync.fences(90, ["a", "b"]) == [Position("b", 60, 90)]  # proxy 2 cannot say for "a"
    sync.written({"b": 70})  # later ticks need not be read before a fence applies
    assert sync.fences(90, ["b"]) == [Position("b", 60, 90)]


def test_reports_are_answered_with_the_fences_their_promises_allow():
    root = RootCoord(MemoryKV(), Recorder(), "t", 2)
    root.start()
    root.set_live_proxies([7, 8])
    root.report_timetick(7, {"t-dml_0": 100, "t-dml_1": 100}, ends={"t-dml_0": 0, "t-dml_1": 0})
    assert root.report_timetick(8, {"t-dml_0": 120, "t-dml_1": 90}, ends={"t-dml_0": 4})[1] == []
    root.broadcast_ticks()  # the coordinator's first ticks: where unreported writes end
    _, fences = root.report_timetick(
        8, {"t-dml_0": 120, "t-dml_1": 90}, ends={"t-dml_0": 4, "t-dml_1": 0}
    )
    # at the smallest promise per channel: what a TimeTick written now would carry
    assert [(f.channel, f.ts) for f in fences] == [("t-dml_0", 100), ("t-dml_1", 90)]
    assert fences[0].offset == 4  # proxy 8's write to t-dml_0 ends there, past the tick


class Nodes:
    def __init__(self, ids):
        self.ids = list(ids)
        self.watched = {i: set() for i in self.ids}

    def live_nodes(self):
        return list(self.ids)

    def labels(self, node_id):
        return {}

    def node(self, node_id):
        nodes = self

        class Port:
            def watch(self, collection, vchannel, plan=None):
                nodes.watched[node_id].add(vchannel)

            def unwatch(self, vchannel):
                nodes.watched[node_id].discard(vchannel)

            def release(self, collection_id):
                nodes.watched[node_id].clear()

        return Port()


def test_querycoord_loads_balances_and_reassigns_lost_shards(root):
    info = root.create_collection(root.alloc_timestamp(), schema(), 2, ConsistencyLevel.STRONG)
    nodes = Nodes([1, 2])
    qc = QueryCoord(MemoryKV(), root, nodes)
    with pytest.raises(MilvusError, match="no vector index"):
        qc.load_collection(info.collection_id)
    root.create_index(root.alloc_timestamp(), "c", IndexInfo(0, "", "v", "FLAT", "L2"))
    qc.load_collection(info.collection_id)
    [leaders] = qc.replicas(info.collection_id)
    assert sorted(leaders.values()) == [1, 2]
    assert qc.load_state(info.collection_id)[0] == LOAD_STATE_LOADED
    nodes.ids = [2]
    qc.rebalance()
    assert set(qc.replicas(info.collection_id)[0].values()) == {2}
    assert nodes.watched[2] == set(info.vchannels)
    qc.release_collection(info.collection_id)
    assert qc.load_state(info.collection_id)[0] == LOAD_STATE_NOT_LOAD
    assert nodes.watched[2] == set()


def test_only_urgent_reports_and_own_ddl_wake_the_ticks_and_make_them_fast():
    root = RootCoord(MemoryKV(), Recorder(), "t", 2, tick_pacer=Pacer(0.05, 1.0, hold_s=3600))
    root.start()
    woken: list[bool] = []
    root.on_report = lambda: woken.append(True)
    root.set_live_proxies([7])
    channels = {"t-dml_0": 100, "t-dml_1": 100}
    assert root.report_timetick(7, channels)[0] is False  # periodic, idle: wait for the pace
    assert woken == [] and root.tick_pacer.interval(time.monotonic()) == 1.0
    assert root.report_timetick(7, channels, urgent=True)[0] is True
    assert woken == [True] and root.tick_pacer.interval(time.monotonic()) == 0.05
    assert root.report_timetick(7, channels)[0] is True  # other proxies learn it is busy
    assert woken == [True]


def test_own_ddl_wakes_the_ticks():
    root = RootCoord(MemoryKV(), Recorder(), "t", 2, tick_pacer=Pacer(0.05, 1.0, hold_s=3600))
    root.start()
    woken: list[bool] = []
    root.on_report = lambda: woken.append(True)
    root.create_collection(root.alloc_timestamp(), schema(), 1, ConsistencyLevel.STRONG)
    assert woken and root.tick_pacer.active(time.monotonic())


class Waker:
    def __init__(self) -> None:
        self.woken: list[list[int]] = []

    def invalidate(self, collection_name: str) -> None:
        pass

    def wake_timeticks(self, proxy_ids: list[int]) -> None:
        self.woken.append(proxy_ids)


def test_an_urgent_report_wakes_the_proxies_whose_promises_are_old():
    sync = TimeTickSync(["a"])
    sync.set_live([1, 2, 3])
    sync.report(1, {"a": 10})
    sync.report(2, {"a": 10})
    now = time.monotonic()
    assert sync.stale(1, now + 5, 1.0) == [2]  # 3 never reported: it blocks, nothing to wake
    assert sync.stale(1, now, 1.0) == []

    waker = Waker()
    root = RootCoord(MemoryKV(), Recorder(), "t", 1, invalidator=waker)
    root.start()
    root.set_live_proxies([1, 2])
    root.report_timetick(2, {"t-dml_0": 10})
    root.ticks._reports[2].received_at -= 10  # proxy 2 promised long ago (idle pace)
    root.report_timetick(1, {"t-dml_0": 20})
    assert waker.woken == []  # a periodic report asks nobody
    root.report_timetick(1, {"t-dml_0": 20}, urgent=True)
    assert waker.woken == [[2]]


class IndexRecorder:
    def __init__(self):
        self.entries = []

    def publish(self, ticks):
        self.entries.append(dict(ticks))


def test_each_tick_round_publishes_where_its_ticks_landed():
    from vectide.services.common.msgstream.tick_index import decode_entry, encode_entry

    index = IndexRecorder()
    rc = RootCoord(MemoryKV(), Recorder(), "t", 2, tick_index=index)
    rc.start()
    rc.create_collection(rc.alloc_timestamp(), schema(), 2, ConsistencyLevel.STRONG)  # 2 DDL
    ticks = rc.broadcast_ticks()
    assert index.entries == [{"t-dml_0": (2, ticks["t-dml_0"]), "t-dml_1": (3, ticks["t-dml_1"])}]
    written = rc._writer.written
    for channel, (offset, ts) in index.entries[0].items():
        assert written[offset] == (channel, TimeTickMsg(written[offset][1].msg_id, ts, 0))
    assert decode_entry(encode_entry(index.entries[0])) == index.entries[0]
    assert decode_entry(b"{not json") == {} and decode_entry(None) == {}
