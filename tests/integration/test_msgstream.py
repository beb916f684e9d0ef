"""Channels on the real broker: tick-aligned packs from out-of-order writers, and resume."""

from __future__ import annotations

import itertools
import random
import threading
import time

import numpy as np
import pytest

from vectide.services.common.kv import MemoryKV
from vectide.services.common.msgstream.kafka import ChannelConsumer, ChannelProducer, ensure_topics
from vectide.services.common.msgstream.message import DeleteMsg, MsgPack, TimeTickMsg
from vectide.services.common.tso import TSOAllocator


class Writers:
    """Two producers stamping from one TSO and a ticker, following the timetick protocol:
    a stamp stays pending until the broker acknowledged its message, and a tick is
    ``min(pending) - 1`` (or a fresh stamp when idle)."""

    def __init__(self, bootstrap: str, channels: list[str]) -> None:
        self.channels = channels
        self.tso = TSOAllocator(MemoryKV())
        self.tso.initialize()
        self.lock = threading.Lock()
        self.pending: set[int] = set()
        self.written: dict[int, int] = {}  # msg_id -> ts
        self.next_id = 0
        self.producers = [ChannelProducer(bootstrap) for _ in range(3)]
        self.stop = threading.Event()

    def write_loop(self, producer: ChannelProducer, seed: int, count: int) -> None:
        rng = random.Random(seed)
        for _ in range(count):
            with self.lock:
                ts = self.tso.alloc()
                msg_id = self.next_id
                self.next_id += 1
                self.pending.add(ts)
            time.sleep(rng.random() * 0.004)  # let the other writer overtake: log order != ts order
            channel = rng.choice(self.channels)
            msg = DeleteMsg(msg_id, ts, seed, 1, -1, channel, np.array([msg_id]), np.array([ts]))
            producer.send([(channel, msg)])
            with self.lock:
                self.pending.discard(ts)
                self.written[msg_id] = ts

    def tick_loop(self) -> None:
        while not self.stop.is_set():
            self.tick()
            time.sleep(0.02)

    def tick(self) -> int:
        with self.lock:
            ts = min(self.pending) - 1 if self.pending else self.tso.alloc()
        self.producers[2].send([(ch, TimeTickMsg(0, ts, 0)) for ch in self.channels])
        return ts

    def close(self) -> None:
        for p in self.producers:
            p.close()


def collect(consumer: ChannelConsumer, until_ts: int, timeout_s: float = 30) -> list[MsgPack]:
    packs: list[MsgPack] = []
    deadline = time.monotonic() + timeout_s
    while not packs or packs[-1].end_ts < until_ts:
        assert time.monotonic() < deadline, "packs stopped coming"
        packs += consumer.poll(0.05)
    return packs


@pytest.fixture
def channels(infra, topic_prefix) -> list[str]:
    names = [f"{topic_prefix}-dml_{i}" for i in range(3)]
    ensure_topics(infra.kafka.bootstrap_servers, names)
    return names


def test_packs_hold_exactly_the_messages_between_ticks_and_resume_is_exact(infra, channels):
    bootstrap = infra.kafka.bootstrap_servers
    writers = Writers(bootstrap, channels)
    threads = [
        threading.Thread(target=writers.write_loop, args=(writers.producers[i], i, 300))
        for i in range(2)
    ]
    ticker = threading.Thread(target=writers.tick_loop)
    ticker.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writers.stop.set()
    ticker.join()
    final_tick = writers.tick()
    writers.close()

    consumer = ChannelConsumer(bootstrap, channels)
    packs = collect(consumer, final_tick)
    consumer.close()

    delivered: list[int] = []
    out_of_order = 0
    for prev, pack in zip([None, *packs], packs, strict=False):
        if prev is not None:
            assert pack.begin_ts == prev.end_ts
        assert all(pack.begin_ts < m.ts <= pack.end_ts for m in pack.msgs)
        delivered += [m.msg_id for m in pack.msgs]
    # exactly the messages written: none lost, none repeated
    assert sorted(delivered) == sorted(writers.written) and len(delivered) == 600
    # every message whose ts falls in a pack's range is in that pack
    for pack in packs:
        expected = {i for i, ts in writers.written.items() if pack.begin_ts < ts <= pack.end_ts}
        assert {m.msg_id for m in pack.msgs} == expected
        ts_in_log = [m.ts for m in pack.msgs]
        out_of_order += sum(a > b for a, b in itertools.pairwise(ts_in_log))
    assert out_of_order > 0, "the writers never interleaved: the test proved nothing"

    # resume from the positions after a pack in the middle: nothing before it comes again
    middle = packs[len(packs) // 2]
    resumed = ChannelConsumer(bootstrap, channels, start=middle.end_positions)
    again = collect(resumed, final_tick)
    resumed.close()
    redelivered = [m.msg_id for p in again for m in p.msgs]
    assert again[0].begin_ts == middle.end_ts
    assert sorted(redelivered) == sorted(
        i for i, ts in writers.written.items() if ts > middle.end_ts
    )


def test_a_poison_record_is_skipped_and_the_channel_goes_on(infra, channels):
    bootstrap = infra.kafka.bootstrap_servers
    producer = ChannelProducer(bootstrap)
    ch = channels[0]
    producer.send([(ch, DeleteMsg(1, 10, 0, 1, -1, ch, ["a"], np.array([10])))])
    producer.send_raw(ch, b"\x00\xffnot avro at all")
    producer.send([(ch, DeleteMsg(2, 11, 0, 1, -1, ch, ["b"], np.array([11])))])
    producer.send([(c, TimeTickMsg(0, 20, 0)) for c in channels])
    producer.close()
    consumer = ChannelConsumer(bootstrap, channels)
    packs = collect(consumer, 20)
    consumer.close()
    assert [m.msg_id for p in packs for m in p.msgs] == [1, 2]
    assert consumer.poison_count == 1


def test_an_adaptive_consumer_switches_fetch_waits_without_losing_or_repeating(infra, channels):
    """Idle, the consumer falls back to its slow fetch wait; data or a waiting reader brings
    the fast one back. Every switch re-assigns at the next offsets: exactly once, in order."""
    bootstrap = infra.kafka.bootstrap_servers
    producer = ChannelProducer(bootstrap)
    ch = channels[0]
    consumer = ChannelConsumer(bootstrap, channels, fetch_wait_idle_ms=300, active_hold_s=0.2)
    ids = itertools.count(1)
    ts = itertools.count(10)

    def write_batch(n: int) -> int:
        for _ in range(n):
            t = next(ts)
            producer.send([(ch, DeleteMsg(next(ids), t, 0, 1, -1, ch, ["k"], np.array([t])))])
        tick = next(ts)
        producer.send([(c, TimeTickMsg(0, tick, 0)) for c in channels])
        return tick

    packs: list[MsgPack] = []

    def poll_until(condition, what: str) -> None:
        deadline = time.monotonic() + 20
        while not condition():
            assert time.monotonic() < deadline, what
            packs.extend(consumer.poll(0.05))

    def delivered_until(ts: int) -> bool:
        return bool(packs) and packs[-1].end_ts >= ts

    assert consumer.fast  # a new reader catches up fast
    first = write_batch(20)
    poll_until(lambda: delivered_until(first), "batch 1 lost")
    poll_until(lambda: not consumer.fast, "never went slow while idle")
    second = write_batch(20)  # data while slow: delivered, and the consumer speeds up
    poll_until(lambda: delivered_until(second), "batch 2 lost")
    assert consumer.fast
    poll_until(lambda: not consumer.fast, "never went slow again")
    consumer.hurry()  # a read waits
    packs.extend(consumer.poll(0.05))
    assert consumer.fast
    third = write_batch(5)
    poll_until(lambda: delivered_until(third), "batch 3 lost")
    consumer.close()
    producer.close()
    delivered = [m.msg_id for p in packs for m in p.msgs]
    assert delivered == list(range(1, 46))


def test_data_of_other_shards_does_not_wake_a_slow_consumer(infra, channels):
    bootstrap = infra.kafka.bootstrap_servers
    producer = ChannelProducer(bootstrap)
    ch = channels[0]
    consumer = ChannelConsumer(
        bootstrap,
        [ch],
        fetch_wait_idle_ms=300,
        active_hold_s=0.2,
        wakes_on=lambda msg: msg.shard == "mine",
    )
    packs: list[MsgPack] = []
    deadline = time.monotonic() + 20
    while consumer.fast:
        assert time.monotonic() < deadline, "never went slow while idle"
        packs += consumer.poll(0.05)
    producer.send([(ch, DeleteMsg(1, 10, 0, 1, -1, "theirs", ["k"], np.array([10])))])
    producer.send([(ch, TimeTickMsg(0, 11, 0))])
    packs += collect(consumer, 11)
    assert not consumer.fast  # delivered, but another shard's write keeps it idle
    producer.send([(ch, DeleteMsg(2, 12, 0, 1, -1, "mine", ["k"], np.array([12])))])
    producer.send([(ch, TimeTickMsg(0, 13, 0))])
    packs += collect(consumer, 13)
    assert consumer.fast
    consumer.close()
    producer.close()
    assert [m.msg_id for p in packs for m in p.msgs] == [1, 2]
