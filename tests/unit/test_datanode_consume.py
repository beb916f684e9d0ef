"""The executors' channel reads on librdkafka's in-process mock cluster: exact ranges, reuse of
one cached consumer across consecutive ranges (records fetched past a range's end are kept),
and a seek when a range does not continue the last one (a replay)."""

import uuid

from confluent_kafka import Consumer, Producer

from streaming.source import CachedChannel, consume_range, consumer_conf


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
