"""The ingest role as a service: its session, its mappings, its consumers and dead letters.

In standalone mode it writes through the proxy core of the same process; as a cluster role
(`vectide run ingest`) through any live proxy over RPC. Its ZooKeeper session (role
``ingest``) is what `vectide status` and the health checks look at.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any

import fastavro
from kazoo.client import KazooClient

from vectide.services.common.config import Config
from vectide.services.common.kv.zookeeper import ZooKeeperKV, cluster_root
from vectide.services.common.msgstream.kafka import security_settings
from vectide.services.common.observability import Health
from vectide.services.common.session import SessionRegistry
from vectide.services.ingest.batcher import Writer
from vectide.services.ingest.dlq import DeadLetterProducer
from vectide.services.ingest.mapping import MAPPINGS, MappingStore
from vectide.services.ingest.worker import IngestWorker, RunnerConfig

log = logging.getLogger(__name__)


def kafka_conf(config: Config) -> dict[str, Any]:
    """Client settings of the ingest role's consumers and producers (with the
    ``kafka.security_protocol``/``sasl_*``/``ssl_*`` keys, as every Kafka client)."""
    return {"bootstrap.servers": config.kafka.bootstrap_servers, **security_settings(config.kafka)}


def mapping_store(zk: KazooClient, config: Config) -> MappingStore:
    return MappingStore(ZooKeeperKV(zk, cluster_root(config.zookeeper, config.cluster.name)))


def schema_registry(url: str) -> Callable[[int], Any]:
    """Schema id -> parsed Avro writer schema, from a Confluent Schema Registry (cached)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    client = SchemaRegistryClient({"url": url})

    @functools.lru_cache(maxsize=256)
    def lookup(schema_id: int) -> Any:
        schema = client.get_schema(schema_id)
        if schema.schema_type not in (None, "AVRO"):
            raise ValueError(f"schema {schema_id} is {schema.schema_type}, not Avro")
        return fastavro.parse_schema(json.loads(schema.schema_str))

    return lookup


class IngestService:
    def __init__(self, config: Config, zk: KazooClient, writer: Writer) -> None:
        self.config = config
        self._zk = zk
        self._writer = writer
        self.worker: IngestWorker | None = None
        self._registry = SessionRegistry(zk, cluster_root(config.zookeeper, config.cluster.name))

    def start(self) -> IngestService:
        cfg = self.config.ingest
        conf = kafka_conf(self.config)
        runner = RunnerConfig(
            batch_rows=cfg.batch_rows,
            linger_ms=cfg.linger_ms,
            consumer={
                **conf,
                "session.timeout.ms": cfg.session_timeout_ms,
                "heartbeat.interval.ms": cfg.heartbeat_interval_ms,
                "max.poll.interval.ms": cfg.max_poll_interval_ms,
                "fetch.wait.max.ms": cfg.fetch_wait_max_ms,
                "max.partition.fetch.bytes": 16 * 1024 * 1024,
            },
            retry_backoff_max_s=cfg.retry_backoff_max_s,
        )
        self.worker = IngestWorker(
            mapping_store(self._zk, self.config),
            self._writer,
            DeadLetterProducer(conf),
            runner,
            registry_factory=schema_registry,
            refresh_s=cfg.refresh_s,
        ).start()
        # a new or removed mapping starts or stops its runner at once (the refresh remains
        # for edits and a missed watch)
        mappings = f"{cluster_root(self.config.zookeeper, self.config.cluster.name)}/{MAPPINGS}"
        self._zk.ensure_path(mappings)
        worker = self.worker
        self._zk.ChildrenWatch(mappings, lambda _children: worker.wake())
        self._session = self._registry.register("ingest", "-")
        log.info("ingest role running", extra={"mappings": self.worker.mappings()})
        return self

    def health(self) -> Health:
        """Serving while every mapping's runner runs (one that hit an error has stopped)."""
        if self.worker is None:
            return Health(False, "starting")
        failed = self.worker.failed()
        if failed:
            return Health(False, f"mapping runners stopped: {', '.join(failed)}")
        return Health(True, f"{len(self.worker.mappings())} mappings running")

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.stop()
