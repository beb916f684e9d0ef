"""The coordinator process: rootcoord and querycoord cores behind one leadership.

Only the elected leader runs: it initialises the TSO above every stamp ever handed out,
reloads the catalog and the shard assignments, then broadcasts timeticks. A standby waits on
the election and takes over when the leader's ZooKeeper session ends. In cluster mode both
cores are served over RPC on one port, and the leader's session advertises it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

from kazoo.client import KazooClient

from vectide.services.common import metrics, timestamp
from vectide.services.common.config import Config
from vectide.services.common.election import LeaderElection, process_identifier
from vectide.services.common.kv.zookeeper import ZooKeeperKV, cluster_root
from vectide.services.common.msgstream.kafka import ensure_topics
from vectide.services.common.msgstream.tick_index import KafkaTickIndex, tick_index_topic
from vectide.services.common.msgstream.writer import KafkaChannelWriter
from vectide.services.common.objectstore import ObjectStore
from vectide.services.common.observability import Health, Sample
from vectide.services.common.periodic import Periodic
from vectide.services.common.rpc import types as rpc_types
from vectide.services.common.rpc.transport import add_port, generic_handler, new_server
from vectide.services.common.session import SessionRegistry
from vectide.services.querycoord.core import NodeDirectory
from vectide.services.rootcoord.coordinators import build_coordinators
from vectide.services.rootcoord.core import CacheInvalidator

log = logging.getLogger(__name__)

#: changes whenever the channels are (re)created empty; offsets are only valid within one
EPOCH_KEY = "channels/epoch"


class CoordinatorService:
    def __init__(
        self,
        config: Config,
        zk: KazooClient,
        nodes: NodeDirectory,
        invalidator: CacheInvalidator | None = None,
        rpc_address: str | None = None,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        root = cluster_root(config.zookeeper, config.cluster.name)
        self.registry = SessionRegistry(zk, root)
        self.writer = KafkaChannelWriter(config.kafka.bootstrap_servers)
        self.tick_index = KafkaTickIndex(
            self.writer.producer, tick_index_topic(config.cluster.name)
        )
        kv = self._kv = ZooKeeperKV(zk, root)
        self.cores = build_coordinators(
            config,
            kv,
            self.writer,
            nodes,
            ObjectStore(config.s3),
            invalidator,
            datanode_alive=lambda: bool(self.registry.members("datanode")),
            tick_index=self.tick_index,
        )
        self.rootcoord = self.cores.rootcoord
        self.datacoord = self.cores.datacoord
        self.querycoord = self.cores.querycoord
        self.indexes = self.cores.indexes
        self.gc = self.cores.gc
        identifier = f"{process_identifier()}:{rpc_address or 'inproc'}"
        self.election = LeaderElection(
            zk, root, "rootcoord", identifier, on_lost=on_lost or self._default_lost
        )
        self._rpc_address = rpc_address
        self._loops: list[Periodic] = []
        self._server = None
        self._lost = False
        self._unregister = [
            metrics.LEADER.add_source(lambda: [(("rootcoord",), float(self.active))]),
            metrics.SEGMENTS.add_source(lambda: self._segment_samples(0)),
            metrics.SEGMENT_ROWS.add_source(lambda: self._segment_samples(1)),
            metrics.FLUSH_LAG_MS.add_source(self._flush_lags),
            metrics.INDEX_BUILD_QUEUE.add_source(self._index_queue),
            metrics.SEGMENT_MOVES.add_source(self._segment_moves),
        ]

    @property
    def active(self) -> bool:
        """Leader with its loops running: the TSO, ticks and coordinators are served."""
        return self.election.is_leader and bool(self._loops)

    def health(self) -> Health:
        """Active, or standby waiting for the leader lock (healthy, as Milvus's StandBy: a
        probe must not restart the standby); a leader still starting is not serving yet."""
        if self._lost:
            return Health(False, "leadership lost: stopped serving")
        if self.active:
            return Health(True, "active")
        if self.election.is_leader:
            return Health(False, "leader, starting")
        return Health(True, "standby: waiting for the leader lock")

    def _segment_samples(self, column: int) -> list[Sample]:
        if not self.active:
            return []
        totals = self.datacoord.segment_totals()
        return [((state.value,), float(values[column])) for state, values in totals.items()]

    def _flush_lags(self) -> list[Sample]:
        if not self.active:
            return []
        now = timestamp.now_ms()
        return [
            ((pchannel,), float(now - timestamp.physical_ms(position.ts)))
            for pchannel, position in self.datacoord.checkpoints().items()
        ]

    def _index_queue(self) -> list[Sample]:
        if not self.active:
            return []
        return [((state,), float(n)) for state, n in self.indexes.backlog().items()]

    def _segment_moves(self) -> list[Sample]:
        moves = self.querycoord.distribution
        if not self.active or moves is None:
            return []
        return [(("done",), float(moves.moves.done)), (("failed",), float(moves.moves.failed))]

    def start(self, campaign_timeout_s: float | None = None) -> CoordinatorService:
        created = ensure_topics(self.config.kafka.bootstrap_servers, self.rootcoord.pchannels)
        # apart from the channels: a new index beside old channels (an upgrade) is no new epoch
        ensure_topics(self.config.kafka.bootstrap_servers, [self.tick_index.topic])
        if not self.election.campaign(campaign_timeout_s):
            raise TimeoutError("another rootcoord stays active")
        self.cores.rootcoord.start()
        self.cores.datacoord.start()
        self._check_channel_epoch(created)
        self.cores.querycoord.start()
        if self._rpc_address:
            self._serve(self._rpc_address)
            info = self.registry.register("rootcoord", self._rpc_address)
            self.rootcoord.server_id = info.id
        self.registry.watch("proxy", lambda members: self.rootcoord.set_live_proxies(list(members)))
        t = self.config.time
        # paced (fast while active, backing off when idle); woken by urgent proxy reports and
        # own DDL, at most one broadcast per 5 ms under a burst of them
        pacer = self.rootcoord.tick_pacer
        background = self.config.service.background_nice
        ticker = Periodic(
            "timetick",
            lambda: pacer.interval(time.monotonic()),
            self.rootcoord.broadcast_ticks,
            0.005,
        )
        self._loops = [
            Periodic("tso-update", t.tso_update_interval_ms / 1000, self.rootcoord.update_tso),
            ticker,
            Periodic("segment-seal", 1.0, self.datacoord.seal_idle),
            Periodic("handoff", 0.5, self.querycoord.handoff),
            Periodic("rebalance", 5.0, self.querycoord.rebalance),
            Periodic("balance", self.config.query.balance_interval_s, self.querycoord.balance),
            Periodic("index-build", 1.0, self.indexes.run_once, nice=background),
            Periodic("index-recycle", 30.0, self.indexes.recycle),
        ]
        data = self.config.data
        if data.compaction_enabled:
            self._loops.append(
                Periodic("compaction", data.compaction_interval_s, self.datacoord.auto_compact)
            )
        if data.gc_enabled:
            self._loops.append(Periodic("gc", data.gc_interval_s, self.gc.run_once))
        for loop in self._loops:
            loop.start()
        self.rootcoord.on_report = ticker.wake  # an urgent report may allow a tick right now
        log.info("coordinator active", extra={"address": self._rpc_address or "inproc"})
        return self

    def _check_channel_epoch(self, created: list[str]) -> None:
        """Notice a broker that lost its log (memory storage restarted): the channels are new
        and empty, so offsets recorded before mean nothing. Start a new channel epoch (the
        data node keeps a Spark checkpoint per epoch) and reset what referred to offsets.
        Flushed segments are unaffected: they live on S3."""
        if self._kv.get(EPOCH_KEY) is not None and not created:
            return
        if created and self.rootcoord.meta.list():
            collections = self.rootcoord.reset_channel_offsets()
            kept, dropped = self.datacoord.forget_channels()
            log.warning(
                "channels were recreated: unflushed data is gone",
                extra={
                    "collections": collections,
                    "partial_segments_kept": kept,
                    "segments_dropped": dropped,
                },
            )
        self._kv.put(EPOCH_KEY, uuid.uuid4().hex.encode())

    def _serve(self, address: str) -> None:
        server = new_server()
        server.add_generic_rpc_handlers(
            (
                generic_handler("RootCoord", self.rootcoord, rpc_types.ROOTCOORD_METHODS),
                generic_handler("QueryCoord", self.querycoord, rpc_types.QUERYCOORD_METHODS),
                generic_handler("DataCoord", self.datacoord, rpc_types.DATACOORD_METHODS),
            )
        )
        if add_port(server, self.config.service.listen_address(address)) == 0:
            raise OSError(f"cannot listen on {address}")
        server.start()
        self._server = server

    def _default_lost(self) -> None:
        log.error("rootcoord lost leadership: stopping")
        self._lost = True  # no longer serving: /healthz must say so (a probe restarts it)
        self.rootcoord.tso.fence()  # nor may a proxy in this process get stamps from it
        self.stop()

    def stop(self) -> None:
        for unregister in self._unregister:
            unregister()
        for loop in self._loops:
            loop.stop()
        if self.election.is_leader:
            self.election.resign()
        if self._server is not None:
            self._server.stop(grace=1).wait()
        self.writer.close()
