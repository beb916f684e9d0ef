"""The broker's share of the Kafka ingest path, alone: what bounds issue 10's ratio on one box.

The ingest target compares producer-to-searchable throughput with the broker's raw produce
rate on the same machine. A record on the ingest path crosses the broker more than once:
produced to the user's topic, fetched by the ingest role, produced again (batched) to a
channel, fetched by the query node and by the data node. This module runs each crossing
alone against a fresh broker (the bench's, on its ports) and reads the broker's CPU per
record for each, and the client's own. When every core is busy, rates are bounded by CPU
per record, so with Vectide's own code costing nothing the ratio could reach at most

    (producer + broker for the produce) / (producer + broker + clients for every crossing)

``python -m benchmarks.broker_floor [--rows 200000]``; ``VECTIDE_BENCH_PORT_SHIFT`` moves it.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

import numpy as np
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.common import log, rounded, stop_on_sigterm
from benchmarks.idle import cpu_seconds
from benchmarks.kafka_ingest import PARTITIONS, _produce_all, json_records
from benchmarks.targets import vectide_target

#: rows per channel message: the ingest role's default batch (``ingest.batch_rows``)
BATCH_ROWS = 5000


def _consume_all(bootstrap: str, topic: str, partitions: int, count: int, conf: dict) -> None:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"floor-{time.time()}", **conf}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    while got < count:
        got += sum(1 for m in consumer.consume(BATCH_ROWS, 0.5) if m.error() is None)
    consumer.close()


def _produce_channel(bootstrap: str, topic: str, messages: list[bytes]) -> None:
    """One acknowledged write per batch, with the channel producer's settings."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 0,
            "message.max.bytes": 64 * 1024 * 1024,
        }
    )
    for message in messages:
        producer.produce(topic, value=message)
        producer.flush(30)


def crossings(bootstrap: str, broker_pid: int, rows: int) -> dict[str, dict[str, float]]:
    vectors = np.random.default_rng(7).random((rows, 128), dtype=np.float32)
    records = json_records(vectors)
    channel_messages = [  # ids, stamps and vectors of a batch, as a channel's insert carries
        np.arange(s, s + BATCH_ROWS, dtype=np.int64).tobytes() * 2
        + vectors[s : s + BATCH_ROWS].tobytes()
        for s in range(0, rows, BATCH_ROWS)
    ]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic, partitions in (("floor-user", PARTITIONS), ("floor-channel", 1)):
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    ingest_fetch = {"fetch.wait.max.ms": 25, "max.partition.fetch.bytes": 16 << 20}
    channel_fetch = {
        "fetch.wait.max.ms": 5,
        "max.partition.fetch.bytes": 64 << 20,
        "fetch.max.bytes": 64 << 20,
    }
    steps: list[tuple[str, Callable[[], object]]] = [
        ("produce to the user's topic", lambda: _produce_all(bootstrap, "floor-user", records)),
        (
            "fetch by the ingest role",
            lambda: _consume_all(bootstrap, "floor-user", PARTITIONS, rows, ingest_fetch),
        ),
        (
            "produce to a channel (batched)",
            lambda: _produce_channel(bootstrap, "floor-channel", channel_messages),
        ),
        (
            "fetch by the query node",
            lambda: _consume_all(
                bootstrap, "floor-channel", 1, len(channel_messages), channel_fetch
            ),
        ),
    ]
    out: dict[str, dict[str, float]] = {}
    for name, step in steps:
        broker0, own0, wall0 = cpu_seconds(broker_pid), cpu_seconds(os.getpid()), time.time()
        step()
        out[name] = {
            "broker_us": (cpu_seconds(broker_pid) - broker0) / rows * 1e6,
            "client_us": (cpu_seconds(os.getpid()) - own0) / rows * 1e6,
            "seconds": time.time() - wall0,
        }
        log(f"{name}: broker {out[name]['broker_us']:.2f} us a record")
    # the data node fetches the channel too, as the query node does
    out["fetch by the data node"] = dict(out["fetch by the query node"])
    return out


def bound(steps: dict[str, dict[str, float]]) -> dict[str, float]:
    """The highest ratios CPU allows: with only the producer and the broker costing anything,
    and with the Kafka clients of Vectide's processes (consumers and the channel producer:
    librdkafka and its Python binding) costing what they cost here too."""
    produce = steps["produce to the user's topic"]
    raw = produce["broker_us"] + produce["client_us"]
    broker_only = produce["client_us"] + sum(s["broker_us"] for s in steps.values())
    with_clients = sum(s["broker_us"] + s["client_us"] for s in steps.values())
    return {
        "raw_us": raw,
        "path_broker_us": broker_only,
        "path_broker_and_clients_us": with_clients,
        "ratio_at_most_broker_only": raw / broker_only,
        "ratio_at_most_with_clients": raw / with_clients,
    }


def main(argv: list[str] | None = None) -> None:
    stop_on_sigterm()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200_000)
    a = p.parse_args(argv)
    target = vectide_target(f"floor-{int(time.time())}")
    try:
        target.start_infra()
        pid = target.processes()["infra:kafka"]
        steps = crossings(target.config.kafka.bootstrap_servers, pid, a.rows)
    finally:
        target.stop()
    out = {"rows": a.rows, "crossings": steps, "bound": bound(steps)}
    b = out["bound"]
    log(
        f"broker floor: raw produce {b['raw_us']:.1f} us a record; the path's crossings "
        f"{b['path_broker_us']:.1f} (broker) / {b['path_broker_and_clients_us']:.1f} (broker "
        f"and Kafka clients): ratio at most {b['ratio_at_most_broker_only']:.0%} / "
        f"{b['ratio_at_most_with_clients']:.0%} with Vectide's own code free"
    )
    print(json.dumps(rounded(out), indent=1))


if __name__ == "__main__":
    main()
