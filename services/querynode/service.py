"""The query node process: a QueryNode fed from Kafka, registered in ZooKeeper, and (in
cluster mode) served over RPC."""

from __future__ import annotations

import logging
import os
import time

import faiss
from kazoo.client import KazooClient

from vectide.services.common import timestamp
from vectide.services.common.config import Config
from vectide.services.common.discovery import RoleClients
from vectide.services.common.index_spec import interim_index
from vectide.services.common.kv.zookeeper import cluster_root
from vectide.services.common.metrics import (
    QUERYNODE_HELD_BYTES,
    QUERYNODE_MEMORY,
    QUERYNODE_ROWS,
    QUERYNODE_SEGMENTS,
    SKIPPED_MESSAGES,
    TSAFE_LAG_MS,
)
from vectide.services.common.objectstore import ObjectStore
from vectide.services.common.observability import Health, Sample
from vectide.services.common.periodic import Periodic
from vectide.services.common.rpc import types as rpc_types
from vectide.services.common.rpc.transport import add_port, generic_handler, new_server
from vectide.services.common.session import SessionRegistry, labels_from_env
from vectide.services.querynode.core import QueryNode
from vectide.services.querynode.subscriber import KafkaSubscriber

log = logging.getLogger(__name__)


class QueryNodeService:
    def __init__(self, config: Config, zk: KazooClient, rpc_address: str | None = None) -> None:
        self.config = config
        self.registry = SessionRegistry(zk, cluster_root(config.zookeeper, config.cluster.name))
        self._rpc_address = rpc_address
        self._server = None
        self.node: QueryNode
        self.subscriber: KafkaSubscriber
        self._unregisters = [
            TSAFE_LAG_MS.add_source(self.tsafe_lags),
            SKIPPED_MESSAGES.add_source(self.skipped),
            QUERYNODE_MEMORY.add_source(lambda: self._load_samples("memory")),
            QUERYNODE_SEGMENTS.add_source(lambda: self._load_samples("segments")),
            QUERYNODE_ROWS.add_source(lambda: self._load_samples("rows")),
            QUERYNODE_HELD_BYTES.add_source(self.held_bytes),
        ]

    def start(self) -> QueryNodeService:
        # interim builds and searches beside ingest: one core for faiss, not all of them (in
        # this thread; server processes set OMP_NUM_THREADS=1 for every thread at start)
        faiss.omp_set_num_threads(1)
        if self._rpc_address:
            server = new_server()
            # the node exists before it is advertised: bind first, register last
            self._server = server
            if add_port(server, self.config.service.listen_address(self._rpc_address)) == 0:
                raise OSError(f"cannot listen on {self._rpc_address}")
        info = self.registry.register(
            "querynode", self._rpc_address or "inproc", labels=labels_from_env()
        )
        #: what resource groups' node filters read (the session carries them too)
        self.labels = info.labels
        self.node = QueryNode(
            info.id,
            chunk_rows=self.config.query.index_chunk_rows,
            binlogs=ObjectStore(self.config.s3),
            # other nodes holding segments of the shards led here (in-process nodes are
            # wired by the launcher instead)
            peers=RoleClients(self.registry, "querynode", "QueryNode") if self._server else None,
            memory_limit_mb=memory_limit_mb(self.config.query.memory_limit_mb),
            interim=interim_index(self.config.query),
        )
        kafka = self.config.kafka
        self.subscriber = KafkaSubscriber(
            kafka.bootstrap_servers,
            self.node,
            kafka.fetch_wait_max_ms,
            kafka.fetch_wait_idle_ms,
            kafka.broker_long_polls,
        )
        self.node.set_subscriber(self.subscriber)
        # not lowered (service.background_nice): the interim indexes are how growing rows
        # are searched; a builder that yields to inserts leaves chunks for the first
        # searches after them to scan exactly (config.py has the measurement)
        self._builder = Periodic("index-builder", 0.5, self._build_indexes).start()
        if self._server is not None:
            self._server.add_generic_rpc_handlers(
                (generic_handler("QueryNode", self.node, rpc_types.QUERYNODE_METHODS),)
            )
            self._server.start()
        return self

    def health(self) -> Health:
        """Serving when every watched shard's channel reader is reading."""
        if not hasattr(self, "subscriber"):
            return Health(False, "starting")
        problems = self.subscriber.problems()
        if problems:
            return Health(False, "; ".join(f"{v}: {e}" for v, e in sorted(problems.items())))
        return Health(True, f"node {self.node.node_id}: {len(self.node.watched())} shards read")

    def _build_indexes(self) -> None:
        """Every pending interim chunk and merge, not one per shard each period: rows arrive
        at up to ~2 chunks a second per shard, and a backlog left at the last insert is
        searched exactly (or chunk by chunk) until it is worked off."""
        while self.node.build_pending_indexes():
            pass

    def tsafe_lags(self) -> list[Sample]:
        """now - tsafe per shard; shards that saw no timetick yet have no tsafe to report."""
        if not hasattr(self, "node"):
            return []
        now = timestamp.now_ms()
        node = str(self.node.node_id)
        return [
            ((node, v), float(now - timestamp.physical_ms(ts)))
            for v in self.node.watched()
            if (ts := self.node.tsafe(v))
        ]

    def _load_samples(self, what: str) -> list[Sample]:
        if not hasattr(self, "node"):
            return []
        report = self.node.load_report()
        value = {
            "memory": report.memory_percentage,
            "segments": float(len(report.segments_mb)),
            "rows": float(report.rows),
        }[what]
        return [((str(self.node.node_id),), value)]

    def held_bytes(self) -> list[Sample]:
        if not hasattr(self, "node"):
            return []
        node = str(self.node.node_id)
        return [((node, *key), float(n)) for key, n in sorted(self.node.held_bytes().items())]

    def skipped(self) -> list[Sample]:
        if not hasattr(self, "subscriber"):
            return []
        node = str(self.node.node_id)
        return [
            ((node, "undecodable"), float(self.subscriber.undecodable())),
            ((node, "invalid"), float(self.node.skipped_messages)),
        ]

    def stop(self) -> None:
        self._drain()
        for unregister in self._unregisters:
            unregister()
        self._builder.stop()
        if self._server is not None:
            self._server.stop(grace=1).wait()
        self.subscriber.close()

    def _drain(self) -> None:
        """A graceful stop in a cluster: say so in the load report, and wait (up to
        ``query.graceful_stop_timeout_s``) while the coordinator gives this node's shards
        new leaders and moves its segments, so no read meets a node that went away."""
        if self._server is None or not hasattr(self, "node") or self.node.drained():
            return
        others = set(self.registry.members("querynode")) - {self.node.node_id}
        if not others:
            return
        self.node.stopping = True
        started = time.monotonic()
        deadline = started + self.config.query.graceful_stop_timeout_s
        while not self.node.drained() and time.monotonic() < deadline:
            time.sleep(0.2)
        log.info(
            "query node drained" if self.node.drained() else "query node stopped undrained",
            extra={"node": self.node.node_id, "after_s": round(time.monotonic() - started, 1)},
        )


def memory_limit_mb(configured: int) -> float:
    """``query.memory_limit_mb``, else the cgroup's limit, else the machine's memory."""
    if configured > 0:
        return float(configured)
    try:
        with open("/sys/fs/cgroup/memory.max") as limit:
            raw = limit.read().strip()
        if raw != "max":
            return int(raw) / 2**20
    except (OSError, ValueError):
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
