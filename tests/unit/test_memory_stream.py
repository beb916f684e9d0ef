"""The in-process channel layer: offsets, positions, tick-aligned packs, poison and faults."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from vectide.services.common.msgstream.memory import (
    MemoryBroker,
    MemoryConsumer,
    MemoryProducer,
    is_data,
    is_tick,
)
from vectide.services.common.msgstream.message import DeleteMsg, Position, TimeTickMsg


def dm(ts: int) -> DeleteMsg:
    return DeleteMsg(ts, ts, 0, 1, -1, "s", np.array([ts]), np.array([ts]))


def tick(ts: int) -> TimeTickMsg:
    return TimeTickMsg(0, ts, 0)


def stamps(packs) -> list[list[int]]:
    return [[m.ts for m in p.msgs] for p in packs]


@pytest.fixture
def stream():
    broker = MemoryBroker()
    broker.ensure_topics(["a", "b"])
    return broker, MemoryProducer(broker)


def test_offsets_packs_and_resume_positions(stream):
    broker, producer = stream
    assert broker.ensure_topics(["a", "c"]) == ["c"]
    assert producer.write([("a", dm(5)), ("a", dm(7)), ("a", tick(8))]) == [0, 1, 2]
    consumer = MemoryConsumer(broker, ["a"])
    [pack] = consumer.poll()
    assert (pack.begin_ts, pack.end_ts, stamps([pack])) == (0, 8, [[5, 7]])
    assert consumer.positions == {"a": Position("a", 3, 8)}
    producer.write([("a", dm(9)), ("a", tick(10))])
    # a consumer started at the saved position sees only what came after
    again = MemoryConsumer(broker, ["a"], start=consumer.positions)
    assert stamps(again.poll()) == [[9]]
    assert consumer.poll(max_records=1) == []  # one record: the pack is not closed yet
    assert stamps(consumer.poll()) == [[9]]


def test_packs_close_only_when_every_channel_ticked(stream):
    broker, producer = stream
    consumer = MemoryConsumer(broker, ["a", "b"])
    producer.write([("a", dm(3)), ("a", tick(5)), ("b", dm(4))])
    assert consumer.poll() == []
    producer.write([("b", tick(6))])
    assert stamps(consumer.poll()) == [[3, 4]]


def test_poison_is_counted_skipped_and_located(stream):
    broker, producer = stream
    producer.write([("a", dm(1))])
    producer.send_raw("a", b"\x00garbage")
    producer.write([("a", dm(2)), ("a", tick(3))])
    consumer = MemoryConsumer(broker, ["a"])
    assert stamps(consumer.poll()) == [[1, 2]]
    assert (consumer.poison_count, consumer.poisoned) == (1, [("a", 1)])


def test_pause_holds_delivery_and_resume_releases_it_in_order(stream):
    broker, producer = stream
    consumer = MemoryConsumer(broker, ["a"])
    producer.write([("a", dm(1)), ("a", tick(2))])
    broker.pause("a")
    assert producer.write([("a", dm(3)), ("a", tick(4))]) == [2, 3]  # writes still succeed
    assert stamps(consumer.poll()) == [[1]]
    assert consumer.poll() == []
    broker.resume("a")
    assert stamps(consumer.poll()) == [[3]]


def test_drop_loses_matching_writes_only(stream):
    broker, producer = stream
    broker.drop("a", count=1, match=is_tick)
    assert producer.write([("a", dm(1)), ("a", tick(2)), ("a", tick(3))]) == [0, -1, 1]
    assert broker.faults("a").dropped == 1
    assert stamps(MemoryConsumer(broker, ["a"]).poll()) == [[1]]  # closed by the tick at 3


def test_duplicate_stores_twice_and_reorder_reverses(stream):
    broker, producer = stream
    broker.duplicate("a", count=1, match=is_data)
    producer.write([("a", tick(0)), ("a", dm(1))])
    assert len(broker.records("a")) == 3
    broker.reorder("b", count=2)
    assert producer.write([("b", dm(4))]) == [-1]  # held back
    assert producer.write([("b", dm(5))]) == [0]
    assert [m.ts for m in _decoded(broker, "b")] == [5, 4]
    assert broker.faults("b").reordered == 2
    with pytest.raises(ValueError):
        broker.reorder("b", count=1)


def test_a_waiting_poll_wakes_on_a_write(stream):
    broker, producer = stream
    consumer = MemoryConsumer(broker, ["a"])
    producer.write([("a", dm(1))])
    timer = threading.Timer(0.05, lambda: producer.write([("a", tick(2))]))
    timer.start()
    started = time.monotonic()
    consumer.poll()  # takes dm(1) at once, no pack yet
    packs = consumer.poll(timeout_s=5)
    assert stamps(packs) == [[1]] and time.monotonic() - started < 2
    timer.join()
    assert consumer.poll(timeout_s=0.01) == []  # nothing more: waits its timeout, no more


def test_drain_takes_everything_available(stream):
    broker, producer = stream
    producer.write([("a", dm(i)) for i in range(1, 30)] + [("a", tick(30))])
    consumer = MemoryConsumer(broker, ["a"])
    [pack] = [*consumer.poll(max_records=10), *consumer.drain()]
    assert len(pack.msgs) == 29


def _decoded(broker: MemoryBroker, channel: str):
    from vectide.services.common.msgstream import codec

    return [codec.decode(raw) for raw in broker.records(channel)]
