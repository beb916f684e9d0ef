"""``python -m benchmarks.broker_tail``: a consumer at the tail of a long log, by fetch wait.

Tansu keeps one object per produced batch and lists every object of a partition to answer
a fetch that has records to return, and it answers a waiting fetch only when the wait
expires. This module measures what that means for a channel's reader: a fresh broker (the
bench's, on its ports), per log length N a topic of N one-batch records, then for each
``--waits`` value a consumer assigned at the tail while a writer adds ``--rate`` timestamped
records a second for ``--seconds``. It prints the delivery latency (p50, max) and the
broker's CPU in % of a core. Where listing the log takes about as long as the wait, the
broker runs away: a full core, deliveries in seconds. ``kafka.fetch_wait_max_ms`` is chosen
from these figures (docs/architecture.md, "Tansu's in-memory log").

``python -m benchmarks.broker_tail [--lengths 100,10000] [--waits 5,20] [--value-bytes 37]``;
``VECTIDE_BENCH_PORT_SHIFT`` moves it.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.common import log, stop_on_sigterm
from benchmarks.idle import cpu_seconds
from benchmarks.targets import vectide_target

STAMP = b"t="


def fill(bootstrap: str, topic: str, length: int, value: bytes) -> Producer:
    """A one-partition topic of ``length`` records, each flushed alone: one batch (one
    object in Tansu's store) per record, as a channel gets them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for _ in range(length):
        producer.produce(topic, value)
        producer.flush()
    return producer


def tail(
    bootstrap: str, broker_pid: int, topic: str, start: int, wait_ms: int, opts: argparse.Namespace
) -> dict[str, float]:
    """One tail consumer's delivery latency and the broker's CPU while records arrive."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"tail-{topic}-{wait_ms}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": wait_ms,
        }
    )
    consumer.assign([TopicPartition(topic, 0, start)])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    latencies: list[float] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            msg = consumer.poll(0.05)
            if msg is not None and msg.error() is None and msg.value().startswith(STAMP):
                latencies.append(time.time() - float(msg.value()[len(STAMP) :]))

    reader = threading.Thread(target=read, name="tail-reader")
    reader.start()
    time.sleep(2.0)  # the consumer at the tail, its first fetches done
    cpu_before, started = cpu_seconds(broker_pid), time.monotonic()
    while time.monotonic() - started < opts.seconds:
        producer.produce(topic, STAMP + b"%f" % time.time())
        producer.flush()
        time.sleep(1.0 / opts.rate)
    elapsed = time.monotonic() - started
    cpu = cpu_seconds(broker_pid) - cpu_before
    time.sleep(1.0)  # the last record's delivery
    stop.set()
    reader.join()
    consumer.close()
    return {
        "p50_ms": 1000 * statistics.median(latencies) if latencies else float("nan"),
        "max_ms": 1000 * max(latencies, default=float("nan")),
        "delivered": len(latencies),
        "broker_percent": 100 * cpu / elapsed,
    }


def main(argv: list[str] | None = None) -> None:
    stop_on_sigterm()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", default="100,10000", help="log lengths N, comma-separated")
    p.add_argument("--waits", default="5,20", help="fetch waits in ms, comma-separated")
    p.add_argument("--value-bytes", type=int, default=37, help="size of the N records")
    p.add_argument("--rate", type=float, default=3.0, help="records a second at the tail")
    p.add_argument("--seconds", type=float, default=20.0, help="per length and wait")
    opts = p.parse_args(argv)
    target = vectide_target(f"tail-{int(time.time())}")
    try:
        target.start_infra()
        bootstrap = target.config.kafka.bootstrap_servers
        pid = target.processes()["infra:kafka"]
        for length in (int(n) for n in opts.lengths.split(",")):
            for wait in (int(w) for w in opts.waits.split(",")):
                topic = f"tail-{length}-{wait}"  # a log of its own: the writes add to it
                fill(bootstrap, topic, length, b"x" * opts.value_bytes)
                got = tail(bootstrap, pid, topic, length, wait, opts)
                log(
                    f"N={length:,} wait={wait} ms: delivery p50 {got['p50_ms']:.0f} ms, "
                    f"max {got['max_ms']:.0f} ms ({got['delivered']} records), "
                    f"broker {got['broker_percent']:.1f} % of a core"
                )
    finally:
        target.stop()


if __name__ == "__main__":
    main()
