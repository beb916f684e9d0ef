"""Wiring the roles: all of them in one process (standalone) or one per process (cluster).

Standalone calls the cores directly; cluster mode puts the same cores behind RPC and finds
peers through ZooKeeper sessions. Both run against the real Kafka, ZooKeeper and S3.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kazoo.client import KazooClient, KazooState

from vectide.services.common.config import Config
from vectide.services.common.discovery import ActiveClient, RoleClients
from vectide.services.common.election import LeaderElection, process_identifier
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.kv.zookeeper import ZooKeeperKV, cluster_root, connect_zookeeper
from vectide.services.common.metrics import LEADER
from vectide.services.common.msgstream.kafka import use_security
from vectide.services.common.observability import OBSERVABILITY, Health, HealthCheck
from vectide.services.common.rpc.transport import use_tls
from vectide.services.common.session import SessionRegistry

if TYPE_CHECKING:
    from vectide.services.querynode.core import QueryNode

# Each role's modules are imported where the role starts: a restarted query node or ingest
# worker does not load the proxy's pymilvus and pandas (seconds on a busy machine, and every
# second of start-up is a second of recovery after a crash).

log = logging.getLogger(__name__)

ROLES = ("rootcoord", "proxy", "querynode", "datanode", "ingest")


class LocalNodes:
    """Query nodes living in this process, for the querycoord and the proxy."""

    def __init__(self) -> None:
        self._nodes: dict[int, QueryNode] = {}
        self._labels: dict[int, dict[str, str]] = {}

    def add(self, node: QueryNode, labels: dict[str, str] | None = None) -> None:
        self._nodes[node.node_id] = node
        self._labels[node.node_id] = dict(labels or {})

    def remove(self, node_id: int) -> None:
        """The node is gone (the fault harness crashes it)."""
        self._nodes.pop(node_id, None)
        self._labels.pop(node_id, None)

    def live_nodes(self) -> list[int]:
        return sorted(self._nodes)

    def labels(self, node_id: int) -> dict[str, str]:
        return self._labels.get(node_id, {})

    def node(self, node_id: int) -> QueryNode:
        node = self._nodes.get(node_id)
        if node is None:  # as RoleClients answers for a node whose session ended
            raise MilvusError(Code.SERVICE_NOT_READY, f"querynode {node_id} is gone")
        return node


class LocalProxies:
    """Cache invalidation for proxies living in this process."""

    def __init__(self) -> None:
        self.proxies: list[Any] = []

    def invalidate(self, collection_name: str) -> None:
        for proxy in self.proxies:
            proxy.invalidate_collection_cache(collection_name)

    def wake_timeticks(self, proxy_ids: list[int]) -> None:
        for proxy in self.proxies:
            if proxy.server_id in proxy_ids:
                proxy.wake_timetick()


class RemoteProxies:
    """Cache invalidation for every live proxy, over RPC."""

    def __init__(self, proxies: RoleClients) -> None:
        self._proxies = proxies

    def invalidate(self, collection_name: str) -> None:
        for client in self._proxies.all():
            try:
                client.invalidate_collection_cache(collection_name)
            except Exception:
                log.warning("proxy cache invalidation failed", exc_info=True)

    def wake_timeticks(self, proxy_ids: list[int]) -> None:
        """On a thread of its own: the caller is the rootcoord's report handler."""
        threading.Thread(target=self._wake, args=(proxy_ids,), daemon=True).start()

    def _wake(self, proxy_ids: list[int]) -> None:
        for proxy_id in proxy_ids:
            try:
                self._proxies.node(proxy_id).wake_timetick()
            except Exception:
                log.warning("proxy timetick wake-up failed", exc_info=True)


@dataclass
class Deployment:
    """Started services of this process, stopped in reverse order."""

    zk: KazooClient
    stoppers: list[Callable[[], None]] = field(default_factory=list)
    proxy_addresses: list[str] = field(default_factory=list)
    _zk_observed: bool = False

    def watch_session(self) -> None:
        """Exit the process if its ZooKeeper session expires (cluster roles)."""
        self._listener = lambda state: _exit_on_lost() if state == KazooState.LOST else None
        self.zk.add_listener(self._listener)

    def serve_observability(self, config: Config, port: int | None) -> None:
        """/metrics and /healthz of this process (released when the deployment stops)."""
        port = port or config.service.metrics_port
        self.stoppers.append(
            OBSERVABILITY.serve(config.service.bind_host or config.service.host, port)
        )

    def observe(self, name: str, check: HealthCheck) -> None:
        """Add a role's health check to /healthz until the deployment stops, and with the
        first role the ZooKeeper session's (sessions, leadership and meta live there).
        Registered before the role starts, so /healthz is 503 until it serves."""
        self.stoppers.append(OBSERVABILITY.add_check(name, check))
        if not self._zk_observed:
            self._zk_observed = True
            self.stoppers.append(OBSERVABILITY.add_check("zookeeper", self._zookeeper_health))

    def _zookeeper_health(self) -> Health:
        return Health(self.zk.connected, f"session {self.zk.state}")

    def stop(self) -> None:
        if getattr(self, "_listener", None) is not None:
            self.zk.remove_listener(self._listener)  # our own shutdown is no session loss
        for stop in reversed(self.stoppers):
            try:
                stop()
            except Exception:
                log.exception("error while stopping")
        self.zk.stop()
        self.zk.close()


def use_process_settings(config: Config) -> None:
    """What every server process sets once for all its clients and threads: Kafka's
    security settings, TLS, and the GIL's switch interval."""
    use_security(config.kafka)
    use_tls(config.security)
    use_switch_interval(config.service.gil_switch_interval_ms)


def use_switch_interval(interval_ms: float) -> None:
    """Threads waiting for the GIL (a request woken by its write's ack) get it after at most
    ``interval_ms`` of another thread's Python work (``service.gil_switch_interval_ms``)."""
    if interval_ms > 0:
        sys.setswitchinterval(interval_ms / 1000)


def address(config: Config, port: int) -> str:
    return f"{config.service.host}:{port}"


def start_standalone(
    config: Config,
    querynodes: int = 1,
    proxy_port: int | None = None,
    coordinator_port: int | None = None,
    metrics_port: int | None = None,
    ingest: bool = True,
    http_port: int | None = None,
    exit_on_lost: bool = False,
) -> Deployment:
    """Every role but the data node in this process. With ``coordinator_port`` the
    coordinators are also served over RPC, so a data node process can attach. The ingest
    role writes through this process's proxy core.

    ``exit_on_lost`` (``vectide standalone``): exit when the ZooKeeper session or the
    coordinator's leadership is lost, so the supervisor starts a whole process again;
    otherwise (in-process tests) the coordinator stops and /healthz reports it."""
    from vectide.services.ingest.proxy_writer import LocalWriter
    from vectide.services.ingest.service import IngestService
    from vectide.services.proxy.service import ProxyService
    from vectide.services.querynode.service import QueryNodeService
    from vectide.services.rootcoord.service import CoordinatorService

    use_process_settings(config)
    zk = connect_zookeeper(config.zookeeper)
    deployment = Deployment(zk)
    if exit_on_lost:
        deployment.watch_session()
    try:
        deployment.serve_observability(config, metrics_port)
        nodes = LocalNodes()
        for _ in range(querynodes):
            service = QueryNodeService(config, zk)
            deployment.observe("querynode", service.health)
            deployment.stoppers.append(service.start().stop)
            nodes.add(service.node, service.labels)
            service.node.set_peers(nodes)
        proxies = LocalProxies()
        coord = CoordinatorService(
            config,
            zk,
            nodes,
            proxies,
            rpc_address=address(config, coordinator_port) if coordinator_port else None,
            on_lost=_exit_on_lost if exit_on_lost else None,
        )
        deployment.observe("rootcoord", coord.health)
        coord.start(campaign_timeout_s=60)
        deployment.stoppers.append(coord.stop)
        proxy_address = address(config, proxy_port or config.service.proxy_port)
        proxy = ProxyService(
            config,
            zk,
            coord.rootcoord,
            coord.querycoord,
            nodes,
            proxy_address,
            deploy_mode="STANDALONE",
            datacoord=coord.datacoord,
            http_port=config.service.http_port if http_port is None else http_port,
        )
        deployment.observe("proxy", proxy.health)
        proxy.start()
        deployment.stoppers.append(proxy.stop)
        proxies.proxies.append(proxy.proxy)
        deployment.proxy_addresses.append(proxy_address)
        if ingest:
            ingest_service = IngestService(config, zk, LocalWriter(proxy.proxy))
            deployment.observe("ingest", ingest_service.health)
            deployment.stoppers.append(ingest_service.start().stop)
    except BaseException:
        deployment.stop()
        raise
    return deployment


def start_role(
    config: Config,
    role: str,
    port: int | None = None,
    metrics_port: int | None = None,
    http_port: int | None = None,
) -> Deployment:
    """One role of a cluster in this process (``vectide run ROLE``).

    A role whose ZooKeeper session expired is no longer known to the cluster (a proxy's
    writes would no longer hold the timeticks back), so the process exits. /metrics and
    /healthz answer from the start: a standby rootcoord or data node blocks in its election.
    """
    use_process_settings(config)
    zk = connect_zookeeper(config.zookeeper)
    deployment = Deployment(zk)
    deployment.watch_session()
    registry = SessionRegistry(zk, cluster_root(config.zookeeper, config.cluster.name))
    svc = config.service
    try:
        deployment.serve_observability(config, metrics_port)
        if role == "rootcoord":
            from vectide.services.rootcoord.service import CoordinatorService

            nodes = RoleClients(registry, "querynode", "QueryNode")
            proxies = RemoteProxies(RoleClients(registry, "proxy", "Proxy"))
            coord = CoordinatorService(
                config,
                zk,
                nodes,
                proxies,
                rpc_address=address(config, port or svc.rootcoord_port),
                on_lost=_exit_on_lost,
            )
            deployment.observe("rootcoord", coord.health)
            coord.start()
            nodes.on_change(lambda live: coord.querycoord.rebalance(live))
            deployment.stoppers.append(coord.stop)
        elif role == "querynode":
            from vectide.services.querynode.service import QueryNodeService

            qn = QueryNodeService(config, zk, address(config, port or svc.querynode_port))
            deployment.observe("querynode", qn.health)
            deployment.stoppers.append(qn.start().stop)
        elif role == "proxy":
            from vectide.services.proxy.service import ProxyService

            proxy_address = address(config, port or svc.proxy_port)
            fast = svc.coordinator_fail_fast_s  # reads and writes must not hang on a stall
            proxy = ProxyService(
                config,
                zk,
                ActiveClient(
                    registry,
                    "rootcoord",
                    "RootCoord",
                    fail_fast=dict.fromkeys(
                        ("alloc_timestamp", "alloc_ids", "report_timetick", "read_fence"), fast
                    ),
                ),
                ActiveClient(registry, "rootcoord", "QueryCoord"),
                RoleClients(registry, "querynode", "QueryNode"),
                proxy_address,
                datacoord=ActiveClient(
                    registry, "rootcoord", "DataCoord", fail_fast={"assign_segment": fast}
                ),
                http_port=svc.http_port if http_port is None else http_port,
            )
            deployment.observe("proxy", proxy.health)
            deployment.stoppers.append(proxy.start().stop)
            deployment.proxy_addresses.append(proxy_address)
        elif role == "datanode":
            state = DataNodeState()
            deployment.observe("datanode", state.health)
            deployment.stoppers.append(LEADER.add_source(state.leader_samples))
            deployment.stoppers.append(start_datanode(config, registry, state))
        elif role == "ingest":
            from vectide.services.ingest.proxy_writer import RemoteWriter
            from vectide.services.ingest.service import IngestService

            writer = RemoteWriter(RoleClients(registry, "proxy", "Proxy"))
            ingest_service = IngestService(config, zk, writer)
            deployment.observe("ingest", ingest_service.health)
            deployment.stoppers.append(ingest_service.start().stop)
        else:
            raise ValueError(f"unknown role {role!r}; one of {', '.join(ROLES)}")
    except BaseException:
        deployment.stop()
        raise
    return deployment


@dataclass
class DataNodeState:
    """What the data node's probe and leader gauge report while it waits, starts and runs."""

    leading: bool = False
    query: Any = None

    def health(self) -> Health:
        if not self.leading:
            return Health(True, "standby: another data node is active")
        if self.query is None:
            return Health(False, "starting the Spark streaming query")
        if not self.query.isActive:
            return Health(False, f"streaming query stopped: {self.query.exception()}")
        return Health(True, "active: streaming query running")

    def leader_samples(self) -> list[tuple[tuple[str, ...], float]]:
        return [(("datanode",), float(self.leading))]


def start_datanode(
    config: Config, registry: SessionRegistry, state: DataNodeState | None = None
) -> Callable[[], None]:
    """The Spark data node's streaming query, reporting to the active datacoord, and its
    compaction worker (datacoord's merge plans, as Spark jobs of the same application)."""
    from pyspark.sql import SparkSession

    from vectide.services.common.periodic import Periodic
    from vectide.services.common.priority import lower_process
    from vectide.streaming.compaction import CompactionWorker, SparkCompactions
    from vectide.streaming.job import default_checkpoint_dir, run, stop, ui_url
    from vectide.streaming.source import s3_options
    from vectide.streaming.wake import FlushWake

    state = state or DataNodeState()
    # before Spark's JVM and threads start, so that they inherit it
    lower_process(config.data.nice)
    data = config.data
    # one data node per cluster: two would persist the same channels in different batches
    root = cluster_root(config.zookeeper, config.cluster.name)
    election = LeaderElection(
        registry.client, root, "datanode", process_identifier(), on_lost=_exit_on_lost
    )
    while not election.campaign(timeout_s=5):
        log.info("another data node is active; waiting as standby")
    state.leading = True
    epoch = _wait_channel_epoch(config, registry)
    checkpoint_dir = default_checkpoint_dir(config) / epoch
    wake = FlushWake(registry.client, root, checkpoint_dir.parent / "flush-wanted").start()
    datacoord = ActiveClient(registry, "rootcoord", "DataCoord", patience_s=120)
    query = run(
        config,
        datacoord,
        checkpoint_dir=checkpoint_dir,
        wake_file=wake.wake_file,
    )
    state.query = query
    stopping = threading.Event()
    threading.Thread(
        target=_exit_when_query_ends, args=(query, stopping), name="query-watch", daemon=True
    ).start()
    # the session's address names the Spark master and the driver's UI (vectide status)
    registry.register(
        "datanode",
        f"spark:{data.spark_master}",
        {"spark_master": data.spark_master, "spark_ui": ui_url()},
    )
    spark = SparkSession.getActiveSession()  # run() made it in this thread
    worker = CompactionWorker(datacoord, SparkCompactions(spark, s3_options(config.s3)))
    compaction = Periodic("compaction-worker", 1.0, worker.run_once).start()

    def stop_datanode() -> None:
        stopping.set()
        compaction.stop()
        try:
            stop(query)
        finally:
            election.resign()  # a clean stop hands the lock over: no leadership loss

    return stop_datanode


def _exit_when_query_ends(query: Any, stopping: threading.Event) -> None:
    """A data node whose streaming query died (Spark lost its Python worker on a loaded
    machine, an executor failed past its retries) persists nothing while its process lives
    on: exit, so the supervisor starts it again and the query resumes from its checkpoint.
    Found by the chaos suite: a flush then waited forever on a process reporting unhealthy."""
    try:
        query.awaitTermination()
        reason = "streaming query stopped"
    except Exception as exc:  # the query's own failure, as Spark reports it
        reason = f"streaming query failed: {str(exc)[:500]}"
    if not stopping.is_set():
        log.error("%s; exiting", reason)
        os._exit(4)


def _wait_channel_epoch(config: Config, registry: SessionRegistry, timeout_s: float = 120) -> str:
    """The channels' epoch, once a coordinator has created them (the data node never does:
    its Spark checkpoint belongs to one epoch of the channels)."""
    from vectide.services.rootcoord.service import EPOCH_KEY

    kv = ZooKeeperKV(registry.client, cluster_root(config.zookeeper, config.cluster.name))
    deadline = time.monotonic() + timeout_s
    while (epoch := kv.get(EPOCH_KEY)) is None:
        if time.monotonic() > deadline:
            raise TimeoutError("no coordinator created the channels: start it first")
        time.sleep(0.5)
    return epoch.decode()


def _exit_on_lost() -> None:
    """A role that lost its ZooKeeper session or leadership must not keep serving: exit, and
    let the supervisor (Kubernetes, a test) start it again."""
    log.error("ZooKeeper session or leadership lost; exiting")
    os._exit(3)


def serve_forever(deployment: Deployment) -> None:
    """Block until SIGTERM or SIGINT, then stop everything cleanly."""
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    deployment.stop()
