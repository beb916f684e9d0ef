"""A Spark streaming source over Vectide's channels (Kafka topics), in Python.

Spark's own Kafka source needs jars that cannot be fetched here, so this is a Python
``DataSource``. Offsets are ``{channel: next offset}``; Spark's checkpoint holds them, so a
restarted job resumes exactly where its last committed batch ended.

Two rules make it correct on any Kafka-protocol broker, Tansu included:

- ``latestOffset`` never trusts watermarks: it reads forward from the batch start for a short
  while and ends the batch right after the last TimeTick it saw on each channel, so every
  batch ends on a tick boundary (the data node's checkpoint);
- ``read`` re-reads exactly ``[start, end)`` with a fresh consumer and fails loudly if the
  broker does not deliver the range, rather than returning fewer rows.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

#: the Avro union branch of a TimeTick (zig-zag varint 2): a tick is known by its first byte
TICK_PREFIX = b"\x04"
SCHEMA = "channel string, offset long, value binary"


def _consumer(bootstrap: str, fetch_wait_ms: int, security: dict[str, str]) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            **security,  # kafka.security_protocol/sasl_*/ssl_* (executors get them in options)
            "bootstrap.servers": bootstrap,
            "group.id": f"vectide-datanode-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": fetch_wait_ms,
            # insert messages run to 4 MiB: fetch many per round trip, not one
            "max.partition.fetch.bytes": 64 * 1024 * 1024,
            "fetch.max.bytes": 128 * 1024 * 1024,
            "enable.partition.eof": False,
        }
    )


@dataclass
class ChannelRange(InputPartition):
    channel: str
    start: int
    end: int


class ChannelStreamReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.bootstrap = options["bootstrap"]
        # "secret" in the key: Spark redacts the value (SASL password) in plans and logs
        self.security = json.loads(options.get("kafka_secret_conf", "{}"))
        self.channels = [c for c in options["channels"].split(",") if c]
        self.scan_ms = int(options.get("scan_ms", "400"))
        self.max_records = int(options.get("max_records_per_channel", "2000"))
        self.read_timeout_s = float(options.get("read_timeout_s", "60"))
        self.fetch_wait_ms = int(options.get("fetch_wait_ms", "10"))
        self.idle_advance_s = float(options.get("idle_advance_s", "5"))
        self._last_advance = 0.0
        self._scanner: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_scanner"] = None  # consumers do not travel to executors
        return state

    def initialOffset(self) -> dict[str, int]:
        return dict.fromkeys(self.channels, 0)

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
        from confluent_kafka import TopicPartition

        if self._scanner is None:
            self._scanner = _consumer(self.bootstrap, self.fetch_wait_ms, self.security)
        start = {c: int(start.get(c, 0)) for c in self.channels}
        self._scanner.assign([TopicPartition(c, 0, start[c]) for c in self.channels])
        end = dict(start)
        seen = dict.fromkeys(self.channels, 0)
        data_seen = False
        deadline = time.monotonic() + self.scan_ms / 1000
        while time.monotonic() < deadline:
            batch = self._scanner.consume(500, 0.05)
            for record in batch:
                if record.error() is not None:
                    continue
                channel = record.topic()
                if seen[channel] >= self.max_records:
                    continue
                seen[channel] += 1
                if record.value()[:1] == TICK_PREFIX:
                    end[channel] = max(end[channel], record.offset() + 1)
                else:
                    data_seen = True
            if all(seen[c] >= self.max_records for c in self.channels):
                break
        # Only timeticks: moving the checkpoint is worth a Spark batch only now and then
        # (an idle data node would otherwise run a job every trigger).
        now = time.monotonic()
        if not data_seen and now - self._last_advance < self.idle_advance_s:
            return start
        if end != start:
            self._last_advance = now
        return end

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[ChannelRange]:
        return [
            ChannelRange(c, int(start.get(c, 0)), int(end[c]))
            for c in self.channels
            if int(end.get(c, 0)) > int(start.get(c, 0))
        ]

    def read(self, partition: ChannelRange) -> Iterator[tuple[str, int, bytes]]:
        from confluent_kafka import TopicPartition

        consumer = _consumer(self.bootstrap, self.fetch_wait_ms, self.security)
        try:
            consumer.assign([TopicPartition(partition.channel, 0, partition.start)])
            next_offset = partition.start
            deadline = time.monotonic() + self.read_timeout_s
            while next_offset < partition.end:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{partition.channel}: read stuck at offset {next_offset} of "
                        f"[{partition.start}, {partition.end})"
                    )
                first = consumer.poll(0.1)  # then drain what is buffered: no batch timeout
                for record in [first, *consumer.consume(499, 0)] if first else []:
                    if record.error() is not None or record.offset() < next_offset:
                        continue
                    if record.offset() >= partition.end:
                        break
                    next_offset = record.offset() + 1
                    yield (partition.channel, record.offset(), record.value())
        finally:
            consumer.close()

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: Spark's checkpoint is the source of truth for offsets."""

    def stop(self) -> None:
        if self._scanner is not None:
            self._scanner.close()
            self._scanner = None


class ChannelSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "vectide_channels"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> ChannelStreamReader:
        return ChannelStreamReader(dict(self.options))
