"""The ingest loop: per mapping, a Kafka consumer group member that polls, applies, commits.

One :class:`MappingRunner` thread per mapping. Its consumer joins the mapping's group, so
replicas of the ingest role split the topic's partitions and take over a dead replica's
partitions at the next rebalance. A partition resumes from the progress in the metastore
(see ``mapping.py``), which moves only after the proxy acknowledged the batch and the dead
letters reached the broker: a crash at any point re-applies at most one batch, and upserts
make that harmless. Offsets are also committed to the group, so Kafka tools see the lag.

While the proxy pushes back, the runner pauses its partitions and keeps polling (so the group
does not think it died) until the batch goes through.

:class:`IngestWorker` runs one runner per mapping in the metastore and follows changes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from vectide.services.common.msgstream.kafka import ensure_topics
from vectide.services.ingest import metrics
from vectide.services.ingest.batcher import (
    Backpressure,
    BatchApplier,
    BatchOutcome,
    KafkaRecord,
    Writer,
)
from vectide.services.ingest.dlq import DeadLetterError, DeadLetterProducer
from vectide.services.ingest.mapping import IngestMapping, MappingStore, Progress

log = logging.getLogger(__name__)

TP = tuple[str, int]


@dataclass
class RunnerConfig:
    batch_rows: int = 5000
    linger_ms: int = 50
    #: consumer settings passed to confluent-kafka (bootstrap, security, group timeouts)
    consumer: Mapping[str, Any] | None = None
    retry_backoff_max_s: float = 5.0
    lag_interval_s: float = 2.0


class MappingRunner:
    def __init__(
        self,
        mapping: IngestMapping,
        writer: Writer,
        store: MappingStore,
        dlq: DeadLetterProducer,
        config: RunnerConfig,
        registry: Callable[[int], Any] | None = None,
    ) -> None:
        self.mapping = mapping
        self._store = store
        self._dlq = dlq
        self._config = config
        self._applier = BatchApplier(
            writer, mapping.collection, mapping.partition, mapping.format, registry
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"ingest-{mapping.name}", daemon=True
        )
        #: owned partitions: the raw progress value last read or written, and its content
        self._progress: dict[TP, tuple[bytes | None, Progress]] = {}
        self._pending: list[KafkaRecord] = []
        self._revoked = False
        self._last_error = ("", 0.0)

    def start(self) -> MappingRunner:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    # -- the loop ----------------------------------------------------------------------------

    def _run(self) -> None:
        conf = {
            **(self._config.consumer or {}),
            "group.id": self.mapping.group_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
        }
        self._ensure_dlq(conf)
        consumer = Consumer(conf)
        consumer.subscribe(
            [self.mapping.topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_revoke,
        )
        log.info("ingest mapping running", extra={"mapping": self.mapping.name})
        first_at = 0.0
        next_lag = time.monotonic() + self._config.lag_interval_s
        try:
            while not self._stop.is_set():
                room = max(1, self._config.batch_rows - len(self._pending))
                timeout = self._config.linger_ms / 1000 if self._pending else 0.2
                self._take(consumer.consume(room, timeout))
                if self._pending and not first_at:
                    first_at = time.monotonic()
                full = len(self._pending) >= self._config.batch_rows
                lingered = first_at and time.monotonic() - first_at >= self._config.linger_ms / 1e3
                if self._pending and (full or lingered):
                    batch, self._pending, first_at = self._pending, [], 0.0
                    self._apply(consumer, batch)
                if time.monotonic() >= next_lag:
                    self._publish_lag(consumer)
                    next_lag = time.monotonic() + self._config.lag_interval_s
        except Exception:  # the worker starts the mapping again at its next refresh
            log.exception("ingest mapping failed", extra={"mapping": self.mapping.name})
        finally:
            consumer.close()  # leaves the group: the others take the partitions now

    def _ensure_dlq(self, conf: Mapping[str, Any]) -> None:
        """Create the dead-letter topic up front: brokers need not auto-create topics."""
        try:
            ensure_topics(conf["bootstrap.servers"], [self.mapping.dlq_topic])
        except Exception as exc:  # the producer reports it again if it really is missing
            log.warning(
                "cannot create the dead-letter topic",
                extra={"topic": self.mapping.dlq_topic, "error": str(exc)},
            )

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def _take(self, messages: list[Any]) -> None:
        for m in messages:
            err = m.error()
            if err is not None:
                self._consumer_error(err)
                continue
            tp = (m.topic(), m.partition())
            if tp not in self._progress:  # a late record of a partition revoked meanwhile
                continue
            self._pending.append(
                KafkaRecord(
                    m.topic(),
                    m.partition(),
                    m.offset(),
                    m.key(),
                    m.value(),
                    tuple(m.headers() or ()),
                )
            )

    def _consumer_error(self, err: KafkaError) -> None:
        """Log a consumer error (a missing topic, a broker away) once a minute, not per poll."""
        if err.code() == KafkaError._PARTITION_EOF:
            return
        now = time.monotonic()
        if str(err) != self._last_error[0] or now - self._last_error[1] > 60:
            self._last_error = (str(err), now)
            log.warning(
                "ingest consumer error", extra={"mapping": self.mapping.name, "error": str(err)}
            )

    def _apply(self, consumer: Consumer, batch: list[KafkaRecord]) -> None:
        started = time.monotonic()
        self._revoked = False
        backoff = 0.05
        paused: list[TopicPartition] = []
        try:
            while True:
                try:
                    outcome = self._applier.apply(batch)
                    self._dlq.send(self.mapping.dlq_topic, outcome.dead)
                    break
                except (Backpressure, DeadLetterError) as exc:
                    if not paused:
                        paused = consumer.assignment()
                        consumer.pause(paused)
                        log.warning(
                            "proxy pushes back; pausing the mapping",
                            extra={"mapping": self.mapping.name, "error": str(exc)},
                        )
                    deadline = time.monotonic() + backoff
                    while time.monotonic() < deadline and not self._stop.is_set():
                        self._take(consumer.consume(100, 0.05))  # keeps the group membership
                    backoff = min(backoff * 2, self._config.retry_backoff_max_s)
                    if self._stop.is_set() or self._revoked:
                        return  # not applied: the partitions' next owner starts over
        finally:
            if paused:
                consumer.resume([tp for tp in paused if (tp.topic, tp.partition) in self._progress])
        applied = time.monotonic()
        self._save(consumer, outcome)
        done = time.monotonic()
        metrics.BATCH_SECONDS.labels(self.mapping.name).observe(done - started)
        log.debug(
            "ingest batch",
            extra={
                "mapping": self.mapping.name,
                "records": len(batch),
                "dead": len(outcome.dead),
                "decode_ms": round(outcome.decode_s * 1000, 1),
                "write_ms": round(outcome.write_s * 1000, 1),
                "apply_ms": round((applied - started) * 1000, 1),
                "save_ms": round((done - applied) * 1000, 1),
            },
        )

    def _save(self, consumer: Consumer, outcome: BatchOutcome) -> None:
        updates: dict[TP, tuple[bytes | None, Progress]] = {}
        for tp, offset in outcome.next_offsets.items():
            if tp not in self._progress:
                continue
            raw, old = self._progress[tp]
            updates[tp] = (
                raw,
                Progress(
                    offset,
                    old.applied + outcome.applied.get(tp, 0),
                    old.failed + outcome.failed.get(tp, 0),
                    max(old.end, offset),
                ),
            )
        if not updates:
            return
        written = self._store.save_progress(self.mapping.name, updates)
        if written is None:
            if self._store.get(self.mapping.name) is None:  # `ingest remove`: not a conflict
                log.info("ingest mapping removed", extra={"mapping": self.mapping.name})
            else:
                log.warning(
                    "ingest progress fenced: another worker owns these partitions now",
                    extra={"mapping": self.mapping.name, "partitions": sorted(updates)},
                )
            for tp in updates:
                self._progress.pop(tp, None)
            return
        for tp, raw in written.items():
            self._progress[tp] = (raw, updates[tp][1])
        metrics.APPLIED.labels(self.mapping.name).inc(outcome.applied_total)
        metrics.FAILED.labels(self.mapping.name).inc(len(outcome.dead))
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in outcome.next_offsets.items()],
            asynchronous=True,
        )

    def _publish_lag(self, consumer: Consumer) -> None:
        """Record how far each owned partition extends, for `ingest list` and /metrics."""
        lag = 0
        for tp, (raw, progress) in list(self._progress.items()):
            end = max(progress.end, progress.offset, self._end_of(consumer, tp))
            lag += max(0, end - max(progress.offset, 0))
            if end != progress.end:
                update = replace(progress, end=end)
                written = self._store.save_progress(self.mapping.name, {tp: (raw, update)})
                if written is not None:
                    self._progress[tp] = (written[tp], update)
        metrics.LAG.labels(self.mapping.name).set(lag)

    @staticmethod
    def _end_of(consumer: Consumer, tp: TP) -> int:
        """The partition's end as this consumer knows it: the high watermark from the last
        fetch, or the fetch position where a broker's watermark lags behind it."""
        part = TopicPartition(*tp)
        try:
            _low, high = consumer.get_watermark_offsets(part, cached=True)
            position = consumer.position([part])[0].offset
        except Exception:
            return 0
        return max(high, position, 0)

    # -- rebalance ---------------------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for part in partitions:
            tp = (part.topic, part.partition)
            raw = self._store.progress_raw(self.mapping.name, *tp)
            progress = Progress.from_json(raw)
            self._progress[tp] = (raw, progress)
            part.offset = progress.offset if progress.offset >= 0 else OFFSET_BEGINNING
        consumer.assign(partitions)
        log.info(
            "ingest partitions assigned",
            extra={"mapping": self.mapping.name, "partitions": [p.partition for p in partitions]},
        )

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        gone = {(p.topic, p.partition) for p in partitions}
        for tp in gone:
            self._progress.pop(tp, None)
        # unapplied records of those partitions are read again by their next owner
        self._pending = [r for r in self._pending if (r.topic, r.partition) not in gone]
        self._revoked = True
        consumer.unassign()


class IngestWorker:
    """Runs one :class:`MappingRunner` per mapping and follows the metastore's list."""

    def __init__(
        self,
        store: MappingStore,
        writer: Writer,
        dlq: DeadLetterProducer,
        config: RunnerConfig,
        registry_factory: Callable[[str], Callable[[int], Any]] | None = None,
        refresh_s: float = 2.0,
    ) -> None:
        self._store = store
        self._writer = writer
        self._dlq = dlq
        self._config = config
        self._registry_factory = registry_factory
        self._refresh_s = refresh_s
        self._runners: dict[str, MappingRunner] = {}
        self._stop = threading.Event()
        self._changed = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="ingest-mappings", daemon=True)

    def start(self) -> IngestWorker:
        self.sync()
        self._thread.start()
        return self

    def mappings(self) -> list[str]:
        return sorted(self._runners)

    def failed(self) -> list[str]:
        """Mappings whose runner stopped on an error (restarted at the next refresh)."""
        return sorted(n for n, r in list(self._runners.items()) if not r.is_alive())

    def sync(self) -> None:
        """Start runners of new mappings, stop those of removed or changed ones."""
        wanted = {m.name: m for m in self._store.list()}
        for name, runner in list(self._runners.items()):
            if not runner.is_alive():  # it failed (logged): start it again, from its progress
                del self._runners[name]
            elif wanted.get(name) != runner.mapping:
                runner.stop()
                del self._runners[name]
                log.info("ingest mapping stopped", extra={"mapping": name})
        for name, mapping in wanted.items():
            if name not in self._runners:
                registry = None
                if mapping.schema_registry and self._registry_factory is not None:
                    registry = self._registry_factory(mapping.schema_registry)
                self._runners[name] = MappingRunner(
                    mapping, self._writer, self._store, self._dlq, self._config, registry
                ).start()

    def wake(self) -> bool:
        """The mapping list changed (a metastore watch saw it): sync now, not at the next
        refresh. Thread-safe; the refresh still catches what a watch misses. False once the
        worker stopped (a kazoo watch function returning False ends the watch)."""
        self._changed.set()
        return not self._stop.is_set()

    def _follow(self) -> None:
        while True:
            self._changed.wait(self._refresh_s)
            self._changed.clear()
            if self._stop.is_set():
                return
            try:
                self.sync()
            except Exception:
                log.warning("cannot read ingest mappings; retrying", exc_info=True)

    def stop(self) -> None:
        self._stop.set()
        self._changed.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        for runner in self._runners.values():
            runner.stop()
        self._runners.clear()
        self._dlq.close()
