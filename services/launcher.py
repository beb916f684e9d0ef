"""Wiring the roles: all of them in one process (standalone) or one per process (cluster).

Standalone calls the cores directly; cluster mode puts the same cores behind RPC and finds
peers through ZooKeeper sessions. Both run against the real Kafka, ZooKeeper and S3.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient, KazooState

from services.common.config import Config
from services.common.discovery import ActiveClient, RoleClients
from services.common.election import LeaderElection
from services.common.kv.zookeeper import ZooKeeperKV, cluster_root, connect_zookeeper
from services.common.session import SessionRegistry
from services.proxy.service import ProxyService
from services.querynode.core import QueryNode
from services.querynode.service import QueryNodeService
from services.rootcoord.service import EPOCH_KEY, CoordinatorService

log = logging.getLogger(__name__)

ROLES = ("rootcoord", "proxy", "querynode", "datanode")


class LocalNodes:
    """Query nodes living in this process, for the querycoord and the proxy."""

    def __init__(self) -> None:
        self._nodes: dict[int, QueryNode] = {}

    def add(self, node: QueryNode) -> None:
        self._nodes[node.node_id] = node

    def live_nodes(self) -> list[int]:
        return sorted(self._nodes)

    def node(self, node_id: int) -> QueryNode:
        return self._nodes[node_id]


class LocalProxies:
    """Cache invalidation for proxies living in this process."""

    def __init__(self) -> None:
        self.proxies: list[Any] = []

    def invalidate(self, collection_name: str) -> None:
        for proxy in self.proxies:
            proxy.invalidate_collection_cache(collection_name)


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


@dataclass
class Deployment:
    """Started services of this process, stopped in reverse order."""

    zk: KazooClient
    stoppers: list[Callable[[], None]] = field(default_factory=list)
    proxy_addresses: list[str] = field(default_factory=list)

    def watch_session(self) -> None:
        """Exit the process if its ZooKeeper session expires (cluster roles)."""
        self._listener = lambda state: _exit_on_lost() if state == KazooState.LOST else None
        self.zk.add_listener(self._listener)

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


def address(config: Config, port: int) -> str:
    return f"{config.service.host}:{port}"


def start_standalone(
    config: Config,
    querynodes: int = 1,
    proxy_port: int | None = None,
    coordinator_port: int | None = None,
) -> Deployment:
    """Every role but the data node in this process. With ``coordinator_port`` the
    coordinators are also served over RPC, so a data node process can attach."""
    zk = connect_zookeeper(config.zookeeper)
    deployment = Deployment(zk)
    try:
        nodes = LocalNodes()
        for _ in range(querynodes):
            service = QueryNodeService(config, zk).start()
            deployment.stoppers.append(service.stop)
            nodes.add(service.node)
        proxies = LocalProxies()
        coord = CoordinatorService(
            config,
            zk,
            nodes,
            proxies,
            rpc_address=address(config, coordinator_port) if coordinator_port else None,
        ).start(campaign_timeout_s=60)
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
        ).start()
        deployment.stoppers.append(proxy.stop)
        proxies.proxies.append(proxy.proxy)
        deployment.proxy_addresses.append(proxy_address)
    except BaseException:
        deployment.stop()
        raise
    return deployment


def start_role(config: Config, role: str, port: int | None = None) -> Deployment:
    """One role of a cluster in this process (``vectide run ROLE``).

    A role whose ZooKeeper session expired is no longer known to the cluster (a proxy's
    writes would no longer hold the timeticks back), so the process exits.
    """
    zk = connect_zookeeper(config.zookeeper)
    deployment = Deployment(zk)
    deployment.watch_session()
    registry = SessionRegistry(zk, cluster_root(config.zookeeper, config.cluster.name))
    svc = config.service
    try:
        if role == "rootcoord":
            nodes = RoleClients(registry, "querynode", "QueryNode")
            proxies = RemoteProxies(RoleClients(registry, "proxy", "Proxy"))
            coord = CoordinatorService(
                config,
                zk,
                nodes,
                proxies,
                rpc_address=address(config, port or svc.rootcoord_port),
                on_lost=_exit_on_lost,
            ).start()
            nodes.on_change(lambda live: coord.querycoord.rebalance(live))
            deployment.stoppers.append(coord.stop)
        elif role == "querynode":
            qn = QueryNodeService(config, zk, address(config, port or svc.querynode_port)).start()
            deployment.stoppers.append(qn.stop)
        elif role == "proxy":
            proxy_address = address(config, port or svc.proxy_port)
            proxy = ProxyService(
                config,
                zk,
                ActiveClient(registry, "rootcoord", "RootCoord"),
                ActiveClient(registry, "rootcoord", "QueryCoord"),
                RoleClients(registry, "querynode", "QueryNode"),
                proxy_address,
                datacoord=ActiveClient(registry, "rootcoord", "DataCoord"),
            ).start()
            deployment.stoppers.append(proxy.stop)
            deployment.proxy_addresses.append(proxy_address)
        elif role == "datanode":
            deployment.stoppers.append(start_datanode(config, registry))
        else:
            raise ValueError(f"unknown role {role!r}; one of {', '.join(ROLES)}")
    except BaseException:
        deployment.stop()
        raise
    return deployment


def start_datanode(config: Config, registry: SessionRegistry) -> Callable[[], None]:
    """The Spark data node's streaming query, reporting to the active datacoord."""
    from streaming.job import default_checkpoint_dir, run, stop, ui_url
    from streaming.wake import FlushWake

    data = config.data
    # one data node per cluster: two would persist the same channels in different batches
    root = cluster_root(config.zookeeper, config.cluster.name)
    election = LeaderElection(
        registry.client, root, "datanode", f"{os.getpid()}", on_lost=_exit_on_lost
    )
    while not election.campaign(timeout_s=5):
        log.info("another data node is active; waiting as standby")
    epoch = _wait_channel_epoch(config, registry)
    checkpoint_dir = default_checkpoint_dir(config) / epoch
    wake = FlushWake(registry.client, root, checkpoint_dir.parent / "flush-wanted").start()
    query = run(
        config,
        ActiveClient(registry, "rootcoord", "DataCoord", patience_s=120),
        trigger_s=data.trigger_s,
        checkpoint_dir=checkpoint_dir,
        wake_file=wake.wake_file,
    )
    # the session's address names the Spark master and the driver's UI (vectide status)
    registry.register(
        "datanode",
        f"spark:{data.spark_master}",
        {"spark_master": data.spark_master, "spark_ui": ui_url()},
    )
    return lambda: stop(query)


def _wait_channel_epoch(config: Config, registry: SessionRegistry, timeout_s: float = 120) -> str:
    """The channels' epoch, once a coordinator has created them (the data node never does:
    its Spark checkpoint belongs to one epoch of the channels)."""
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
