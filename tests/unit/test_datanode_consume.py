"""Channel reads on librdkafka's in-process mock cluster: the executors' exact ranges, reuse of
one cached consumer across consecutive ranges (records fetched past a range's end are kept),
a seek when a range does not continue the last one (a replay), and both readers (executors'
and query nodes') reading again what a client skipped."""

import time
import uuid

import numpy as np
import pytest
from confluent_kafka import Consumer, Producer

from vectide.services.common.msgstream import codec, kafka
from vectide.services.common.msgstream.kafka import ChannelConsumer
from vectide.services.common.msgstream.message import DeleteMsg, Position, TimeTickMsg
from vectide.streaming import source
from vectide.streaming.source import CachedChannel, consume_range, consumer_conf


def mock_channel(records: int):
    """A producer on a fresh mock cluster, with ``records`` records on one topic."""
    producer = Producer({"test.mock.num.brokers": 1})
    bootstrap = producer.list_topics(timeout=5).orig_broker_name.split("/")[0]
    topic = f"ch-{uuid.uuid4().hex[:6]}"
    for i in range(records):
        producer.produce(topic, value=f"r{i}".encode(), partition=0)
    producer.flush(5)
    return producer, bootstrap, topic


def test_consecutive_ranges_replays_and_leftovers_are_exact():
    producer, bootstrap, topic = mock_channel(300)
    cached = CachedChannel(Consumer(consumer_conf(bootstrap, 10)))
    ranges = [(0, 10), (10, 150), (150, 151), (151, 300), (40, 60), (60, 61)]
    for start, end in ranges:
        got = consume_range(cached, topic, start, end, timeout_s=10)
        assert [o for o, _ in got] == list(range(start, end))
        assert [v for _, v in got] == [f"r{i}".encode() for i in range(start, end)]
    assert cached.consumer.assignment() == []  # idle between reads: nothing fetched
    cached.consumer.close()
    producer.flush(1)


class SkipsOnce:
    """A consumer that loses one record the first time it would deliver it, as librdkafka
    tailing Tansu was seen to do with multi-megabyte records."""

    def __init__(self, consumer: Consumer, offset: int) -> None:
        self._consumer = consumer
        self._offset = offset
        self.skipped = 0

    def _filter(self, records):
        out = []
        for r in records:
            if r is not None and r.offset() == self._offset and not self.skipped:
                self.skipped += 1
                continue
            out.append(r)
        return out

    def poll(self, timeout):
        got = self._filter([self._consumer.poll(timeout)])
        return got[0] if got else None

    def consume(self, n, timeout):
        return self._filter(self._consumer.consume(n, timeout))

    def __getattr__(self, name):
        return getattr(self._consumer, name)


def test_a_range_read_notices_a_skipped_record_and_reads_it_again():
    producer, bootstrap, topic = mock_channel(100)
    flaky = SkipsOnce(Consumer(consumer_conf(bootstrap, 10)), offset=42)
    got = consume_range(CachedChannel(flaky), topic, 0, 100, timeout_s=10)
    assert flaky.skipped == 1
    assert [o for o, _ in got] == list(range(100))
    flaky.close()
    producer.flush(1)


class NeedsPatience:
    """A consumer of a broker that answers nothing to fetches waiting less than
    ``needed_ms``, as Tansu does once finding an offset in a long log takes longer."""

    def __init__(self, consumer: Consumer, wait_ms: int, needed_ms: int) -> None:
        self._consumer, self._quiet = consumer, wait_ms < needed_ms

    def poll(self, timeout):
        if self._quiet:
            time.sleep(timeout)
            return None
        return self._consumer.poll(timeout)

    def consume(self, n, timeout):
        return [] if self._quiet else self._consumer.consume(n, timeout)

    def __getattr__(self, name):
        return getattr(self._consumer, name)


def test_a_stalled_range_read_fetches_with_longer_waits_until_it_reads(monkeypatch):
    monkeypatch.setattr(source, "STALL_S", 0.2)
    producer, bootstrap, topic = mock_channel(100)
    opened = []

    def reopen(wait_ms):
        opened.append(wait_ms)
        return NeedsPatience(Consumer(consumer_conf(bootstrap, wait_ms)), wait_ms, needed_ms=40)

    cached = CachedChannel(reopen(10), fetch_wait_ms=10, reopen=reopen)
    got = consume_range(cached, topic, 20, 60, timeout_s=10)
    assert [o for o, _ in got] == list(range(20, 60))
    assert opened == [10, 20, 40] and cached.fetch_wait_ms == 40
    got = consume_range(cached, topic, 5, 10, timeout_s=10)  # patient from now on
    assert [o for o, _ in got] == list(range(5, 10)) and opened == [10, 20, 40]
    cached.consumer.close()
    # without a way to reopen, the read still fails loudly
    stuck = CachedChannel(NeedsPatience(Consumer(consumer_conf(bootstrap, 10)), 10, 40))
    with pytest.raises(TimeoutError, match="read stuck at offset 0 of"):
        consume_range(stuck, topic, 0, 10, timeout_s=1)
    stuck.consumer.close()
    producer.flush(1)


def test_a_channel_reader_notices_a_skipped_record_and_reads_it_again():
    producer = Producer({"test.mock.num.brokers": 1})
    bootstrap = producer.list_topics(timeout=5).orig_broker_name.split("/")[0]
    topic = f"ch-{uuid.uuid4().hex[:6]}"
    for i in range(30):
        pks, stamp = np.array([i], dtype=np.int64), 10 * i + 5
        delete = DeleteMsg(i, stamp, 1, 1, -1, "v", pks, np.array([stamp], dtype=np.int64))
        producer.produce(topic, value=codec.encode(delete), partition=0)
        producer.produce(topic, value=codec.encode(TimeTickMsg(i, 10 * i + 9, 0)), partition=0)
    producer.flush(5)
    reader = ChannelConsumer(bootstrap, [topic], {topic: Position(topic, 0, 0)})
    flaky = SkipsOnce(reader._consumer, offset=20)  # the delete of key 10
    reader._consumer = reader._fast = flaky
    deleted = []
    deadline = time.monotonic() + 20
    while len(deleted) < 30 and time.monotonic() < deadline:
        for pack in reader.poll(0.2):
            deleted += [int(m.pks[0]) for m in pack.msgs]
    reader.close()
    assert flaky.skipped == 1
    assert deleted == list(range(30))


def test_a_channel_reader_whose_short_fetches_go_unanswered_reads_with_the_idle_wait(
    monkeypatch,
):
    monkeypatch.setattr(kafka, "FAST_STALL_S", 0.3)
    producer, bootstrap, topic = mock_channel(0)
    for i in range(20):
        producer.produce(topic, value=codec.encode(TimeTickMsg(i, 10 * i + 9, 0)), partition=0)
    producer.flush(5)
    reader = ChannelConsumer(
        bootstrap, [topic], {topic: Position(topic, 0, 0)}, fetch_wait_idle_ms=50
    )
    reader._consumer.unassign()
    quiet = NeedsPatience(reader._fast, 5, needed_ms=40)
    reader._consumer = reader._fast = quiet
    reader._consumer.assign(reader._assignment())
    ticks = 0
    deadline = time.monotonic() + 10
    while ticks < 20 and time.monotonic() < deadline:
        reader.hurry()  # a Strong read waits: without the fallback it stays fast forever
        ticks += len(reader.poll(0.1))
    assert ticks == 20 and not reader.fast
    reader.close()
    producer.flush(1)


def test_an_idle_batch_is_one_task_that_reads_nothing():
    """Tick-only ranges the driver read become one checkpoint task; ranges with data, or
    ranges the driver did not read (a replay after a restart), stay a read per channel."""
    from vectide.streaming.flush import merge_rows
    from vectide.streaming.planning import OffsetPlanner, Seen
    from vectide.streaming.source import ChannelRange, ChannelStreamReader, Checkpoints

    reader = ChannelStreamReader({"bootstrap": "unused:1", "channels": "a,b,c,d"})
    assert reader.partitions({"a": 0}, {"a": 2}) == [ChannelRange("a", 0, 2)]  # no planner
    reader._planner = OffsetPlanner(reader.channels)
    reader._planner.rebase(dict.fromkeys(reader.channels, 0))
    for channel, kinds in {"a": "tt", "b": "dt", "c": "t"}.items():
        for offset, kind in enumerate(kinds):
            reader._planner.observe(channel, Seen(offset, 9, 100 + offset if kind == "t" else None))
    parts = reader.partitions(dict.fromkeys(reader.channels, 0), {"a": 2, "b": 2, "c": 1, "d": 0})
    assert parts == [ChannelRange("b", 0, 2), Checkpoints([("a", 2, 101), ("c", 1, 100)])]
    report, stats, executors = merge_rows(reader.read(parts[1]))  # no broker is reachable
    assert report.checkpoints == {
        "a": Position("a", 2, 101),
        "c": Position("c", 1, 100),
    }
    assert (report.binlogs, stats.records, len(executors)) == ([], 0, 1)


def test_a_byte_budget_returns_a_range_in_pieces_that_do_not_depend_on_the_cache():
    producer, bootstrap, topic = mock_channel(300)  # values of 2-4 bytes
    cached = CachedChannel(Consumer(consumer_conf(bootstrap, 10)))

    def pieces(start, end):
        out, position = [], start
        while position < end:
            got = consume_range(cached, topic, position, end, timeout_s=10, max_bytes=100)
            out.append([o for o, _ in got])
            position = got[-1][0] + 1
        return out

    first = pieces(0, 200)
    assert [o for piece in first for o in piece] == list(range(200))
    assert all(sum(len(f"r{o}") for o in piece) < 100 + 4 for piece in first)
    assert len(first) > 3
    consume_range(cached, topic, 200, 250, timeout_s=10)  # the cache moves on
    assert pieces(0, 200) == first  # a replay cuts the same pieces
    cached.consumer.close()
    producer.flush(1)


def test_the_tick_index_tail_feeds_the_planner_and_says_when_it_is_stale():
    from vectide.services.common.msgstream.tick_index import encode_entry
    from vectide.streaming.planning import OffsetPlanner
    from vectide.streaming.source import TickIndexTail

    producer, bootstrap, topic = mock_channel(0)
    producer.produce(topic, value=encode_entry({"a": (4, 40), "b": (0, 41)}), partition=0)
    producer.produce(topic, value=b"not an entry", partition=0)
    producer.produce(topic, value=encode_entry({"a": (9, 42)}), partition=0)
    producer.flush(5)
    planner = OffsetPlanner(["a", "b"])
    planner.rebase({"a": 0, "b": 0})
    tail = TickIndexTail(consumer_conf(bootstrap, 10), topic, stale_s=0.5)
    deadline = time.monotonic() + 10
    while planner.scans["a"].scanned_to < 10 and time.monotonic() < deadline:
        assert tail.follow(planner, 0.2)
        time.sleep(0.05)
    assert [(s.offset, s.tick_ts) for s in planner.scans["a"].seen] == [(4, 40), (9, 42)]
    assert planner.plan() == {"a": 10, "b": 1}
    time.sleep(0.6)
    assert not tail.follow(planner, 0.1)  # no entry for longer than stale_s: scan instead
    tail.close()
    missing = TickIndexTail(consumer_conf(bootstrap, 10), f"{topic}-none", stale_s=0.5)
    assert not missing.follow(planner, 0.1)  # no such topic
    producer.flush(1)
