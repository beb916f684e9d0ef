"""The mixed load the chaos suite keeps running while it kills roles: a writer upserting
batches of known primary keys through pymilvus, a reader searching and querying at
Eventually consistency, and a producer feeding a Kafka topic an ingest mapping applies.

Each records only what was acknowledged, so the end state can be checked exactly: the
writer retries a failed batch until it is acknowledged (as a client would; an upsert
repeated is harmless), the producer counts a record once the broker acknowledged it.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Producer
from pymilvus import MilvusClient

DIM = 4
BATCH = 100


def vector(pk: int) -> list[float]:
    return [float(pk % 997), float(pk % 13), 1.0, 0.5]


@dataclass
class Tally:
    """What one load thread saw: acknowledged keys, failures and their messages."""

    acked: set[int] = field(default_factory=set)
    failures: int = 0
    #: rows of attempts that failed: each may have reached the channels before failing
    resent_rows: int = 0
    errors: list[str] = field(default_factory=list)

    def fail(self, exc: Exception, rows: int = 0) -> None:
        self.failures += 1
        self.resent_rows += rows
        if len(self.errors) < 20:
            self.errors.append(str(exc)[:200])


class LoadThread(threading.Thread):
    """A daemon loop of ``step`` until ``stop``; ``pause`` holds it between steps."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.tally = Tally()
        self._halt = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        while not self._halt.is_set():
            self.step()

    def step(self) -> None:
        raise NotImplementedError

    def stop(self) -> Tally:
        self._halt.set()
        self.join(timeout=120)
        return self.tally

    def stopped(self) -> bool:
        return self._halt.is_set()


class Client:
    """A pymilvus client made again after a failure (its proxy may be a new process)."""

    def __init__(self, uri: str) -> None:
        self._uri = uri
        self._client: MilvusClient | None = None

    def get(self) -> MilvusClient:
        if self._client is None:
            self._client = MilvusClient(self._uri, timeout=5)
        return self._client

    def drop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class Writer(LoadThread):
    """Upserts batches of ``BATCH`` new keys, each retried until acknowledged."""

    def __init__(self, uri: str, collection: str, pause_s: float = 0.05) -> None:
        super().__init__("chaos-writer")
        self._client, self._collection, self._pause_s = Client(uri), collection, pause_s
        self._next = 0

    def step(self) -> None:
        pks = list(range(self._next, self._next + BATCH))
        rows = [{"id": pk, "vector": vector(pk)} for pk in pks]
        while not self.stopped():  # an unacknowledged batch is sent again, never skipped
            try:
                self._client.get().upsert(self._collection, rows, timeout=5)
                break
            except Exception as exc:  # every failure is retried and counted
                self.tally.fail(exc, len(rows))
                self._client.drop()
                time.sleep(0.2)
        else:
            return
        with self.lock:
            self.tally.acked.update(pks)
        self._next += BATCH
        time.sleep(self._pause_s)

    def stop(self) -> Tally:
        tally = super().stop()
        self._client.drop()
        return tally


class Reader(LoadThread):
    """Searches and counts at Eventually consistency; records how long each answer took."""

    def __init__(self, uri: str, collection: str) -> None:
        super().__init__("chaos-reader")
        self._client, self._collection = Client(uri), collection
        self.answered = 0
        self.slowest_s = 0.0

    def step(self) -> None:
        started = time.monotonic()
        eventually = {"consistency_level": "Eventually", "timeout": 3}
        try:
            client = self._client.get()
            client.search(self._collection, [vector(7)], limit=3, **eventually)
            client.query(self._collection, output_fields=["count(*)"], **eventually)
            with self.lock:
                self.answered += 1
                self.slowest_s = max(self.slowest_s, time.monotonic() - started)
        except Exception as exc:  # counted; the suite judges the counts
            self.tally.fail(exc)
            self._client.drop()
        time.sleep(0.2)

    def stop(self) -> Tally:
        tally = super().stop()
        self._client.drop()
        return tally


class Feeder(LoadThread):
    """Produces JSON records of new keys (from ``first``) to an ingest mapping's topic."""

    def __init__(self, bootstrap: str, topic: str, first: int = 1_000_000) -> None:
        super().__init__("chaos-feeder")
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self._topic = topic
        self._next = first

    def step(self) -> None:
        pks = list(range(self._next, self._next + BATCH // 2))
        for pk in pks:
            value = json.dumps({"id": pk, "vector": vector(pk)}).encode()
            self._producer.produce(self._topic, key=str(pk).encode(), value=value)
        if self._producer.flush(30) == 0:
            with self.lock:
                self.tally.acked.update(pks)
            self._next += len(pks)
        else:
            self.tally.fail(RuntimeError("records not acknowledged by the broker"))
        time.sleep(0.2)
