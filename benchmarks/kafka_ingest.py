"""Kafka producer ingestion: producer-to-searchable throughput against the broker's raw produce
rate for the same records, and how soon a produced record is visible (Eventually).

The records are the synthetic dataset as JSON objects (``{"id": i, "vector": [...]}``),
serialized before any clock starts, so both rates pay the same producer cost and the ratio is
what Vectide's ingest path (consume, decode, upsert through the proxy, apply in the query
node) costs on top of the log itself. The mapping carries one record before the clock starts,
so its one-off start (the worker's refresh, the consumer group join) is not counted as rate.

``python -m benchmarks.kafka_ingest [--rows N]`` runs this phase alone on the bench's own
infrastructure and Vectide; ``make bench`` runs it inside the Vectide phase.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import orjson
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pymilvus import MilvusClient

from benchmarks.common import apply_set, latency_summary, log, stop_on_sigterm
from benchmarks.idle import cpu_seconds, distinct
from benchmarks.milvus_ops import connect, create_collection
from vectide.services.cli import main as vectide

PARTITIONS = 4


def json_records(vectors: np.ndarray, first_id: int = 0) -> list[bytes]:
    return [
        orjson.dumps({"id": first_id + i, "vector": v}, option=orjson.OPT_SERIALIZE_NUMPY)
        for i, v in enumerate(vectors)
    ]


def _topic(bootstrap: str, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    return name


def _produce_all(bootstrap: str, topic: str, records: list[bytes]) -> float:
    """Seconds to produce and acknowledge every record (keyed, as a keyed producer does)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    started = time.perf_counter()
    for i, value in enumerate(records):
        while True:
            try:
                producer.produce(topic, key=str(i).encode(), value=value)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(120)
    return time.perf_counter() - started


def _count(client: MilvusClient, name: str) -> int:
    rows = client.query(name, output_fields=["count(*)"], consistency_level="Eventually")
    return int(rows[0]["count(*)"])


class CpuMeter:
    """CPU seconds each process spends over a window (children included, as the idle
    measurement counts them), this one (the producer) among them. Why the ratio is what it
    is: the sum per record bounds the rate any number of cores of this kind could reach."""

    def __init__(self, pids: Mapping[str, int]) -> None:
        self._pids = {**distinct(pids), "bench producer": os.getpid()}
        listed = frozenset(self._pids.values())
        self._read: Callable[[int], float] = lambda pid: cpu_seconds(pid, listed)
        self._start: dict[str, float] = {}

    def __enter__(self) -> CpuMeter:
        self._start = {name: self._read(pid) for name, pid in self._pids.items()}
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = {
            name: self._read(pid) - self._start[name] for name, pid in self._pids.items()
        }

    def per_record_us(self, records: int) -> dict[str, float]:
        """Microseconds of CPU per record, per process and in total."""
        out = {name: round(s / records * 1e6, 2) for name, s in self.seconds.items() if s > 0}
        out["total"] = round(sum(self.seconds.values()) / records * 1e6, 2)
        return out


def ingest_phase(
    uri: str,
    config_file: str,
    bootstrap: str,
    vectors: np.ndarray,
    pids: Mapping[str, int] | None = None,
) -> dict:
    """Raw produce rate, then producer-to-searchable rate and freshness through a mapping;
    with ``pids`` (the deployment's processes) the CPU each spent per record in both."""
    rows = len(vectors)
    records = json_records(vectors)
    run = uuid.uuid4().hex[:6]
    with CpuMeter(pids or {}) as raw_cpu:
        raw_s = _produce_all(bootstrap, _topic(bootstrap, f"bench-raw-{run}"), records)
    log(f"kafka ingest: raw produce {rows / raw_s:,.0f} records/s")

    client = connect(uri)
    name = f"kafka_ingest_{run}"
    create_collection(client, name, vectors.shape[1], "L2", "FLAT")
    topic = _topic(bootstrap, f"bench-ingest-{run}")
    assert vectide(["--config", config_file, "ingest", "add", name, "--topic", topic,
                    "--collection", name]) == 0  # fmt: skip
    _warm_up(client, name, bootstrap, topic, vectors[0])
    started = time.perf_counter()
    with CpuMeter(pids or {}) as ingest_cpu:
        _produce_all(bootstrap, topic, records)
        seen = 0
        while seen < rows:
            if time.perf_counter() - started > 600:
                raise TimeoutError(f"only {seen} of {rows} rows searchable after 600 s")
            time.sleep(0.1)
            seen = _count(client, name)
    searchable_s = time.perf_counter() - started
    log(f"kafka ingest: producer-to-searchable {rows / searchable_s:,.0f} records/s")
    out: dict[str, Any] = {
        "rows": rows,
        "raw_produce_records_per_s": rows / raw_s,
        "searchable_records_per_s": rows / searchable_s,
        "ratio": raw_s / searchable_s,
        "cpu_us_per_record": {
            "raw_produce": raw_cpu.per_record_us(rows),
            "producer_to_searchable": ingest_cpu.per_record_us(rows),
        },
        "freshness": _freshness(client, name, bootstrap, topic, vectors),
    }
    vectide(["--config", config_file, "ingest", "remove", name])
    client.drop_collection(name)
    return out


def _warm_up(
    client: MilvusClient, name: str, bootstrap: str, topic: str, vector: np.ndarray
) -> None:
    """One record through the mapping before the clock starts: a worker takes a new mapping
    up within ``ingest.refresh_s`` and then joins its consumer group, a start-up cost paid
    once per mapping, not a rate. The record is deleted again (a tombstone) so the count
    starts at 0."""
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, key=b"-1", value=orjson.dumps({"id": -1, "vector": vector.tolist()}))
    producer.flush(10)
    started = time.perf_counter()
    while _count(client, name) < 1:
        if time.perf_counter() - started > 60:
            raise TimeoutError("the mapping applied nothing within 60 s")
        time.sleep(0.05)
    log(f"kafka ingest: first record searchable after {time.perf_counter() - started:.1f} s")
    producer.produce(topic, key=b"-1", value=None)
    producer.flush(10)
    while _count(client, name) > 0:
        time.sleep(0.05)


def _freshness(
    client: MilvusClient,
    name: str,
    bootstrap: str,
    topic: str,
    vectors: np.ndarray,
    trials: int = 30,
    background_per_s: float = 1000.0,
) -> dict[str, float]:
    """Produce one marked record at a time while a steady stream of others flows; each is
    timed from its acknowledgement to its first appearance in an Eventually query."""
    stop = threading.Event()
    base = 10_000_000

    def stream() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        i = 0
        while not stop.wait(1 / background_per_s):
            vec = vectors[i % len(vectors)]
            producer.produce(topic, value=orjson.dumps({"id": base + i, "vector": vec.tolist()}))
            producer.poll(0)
            i += 1
        producer.flush(30)

    background = threading.Thread(target=stream, daemon=True)
    background.start()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    samples = []
    try:
        time.sleep(2.0)  # steady state
        for t in range(trials):
            pk = 2 * base + t
            producer.produce(topic, value=json.dumps({"id": pk, "vector": vectors[t].tolist()}))
            producer.flush(10)
            acked = time.perf_counter()
            while not client.query(
                name, filter=f"id == {pk}", output_fields=["id"], consistency_level="Eventually"
            ):
                if time.perf_counter() - acked > 30:
                    raise TimeoutError(f"record {pk} not visible after 30 s")
                time.sleep(0.005)
            samples.append(time.perf_counter() - acked)
    finally:
        stop.set()
        background.join()
    summary = latency_summary(samples)
    log(f"kafka ingest: produced -> visible p50 {summary['p50_ms']:.0f} ms")
    return summary


def main(argv: list[str] | None = None) -> None:
    stop_on_sigterm()
    import tempfile

    import yaml

    from benchmarks.datasets import synthetic
    from benchmarks.targets import vectide_target

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--set", action="append", default=[], help="section.key=value (repeatable)")
    args = p.parse_args(argv)
    target = vectide_target(f"bench-ingest-{int(time.time())}")
    apply_set(target.config, args.set)
    data = synthetic(args.rows, 128, 10, 10)
    try:
        target.start()
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as config_file:
            config_file.write(yaml.safe_dump(target.config.to_dict()))
            config_file.flush()
            result = ingest_phase(
                target.uri,
                config_file.name,
                target.config.kafka.bootstrap_servers,
                data.vectors,
                target.processes(),
            )
        print(json.dumps(result, indent=1))
    finally:
        target.stop()


if __name__ == "__main__":
    main()
