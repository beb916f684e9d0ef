"""The proxy process: the Milvus gRPC service on its port (behind the metrics and the auth
interceptors), the internal cache-invalidation RPC on the same port, Milvus's RESTful API v2
on its HTTP port, its session, and the
periodic timetick report."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from kazoo.client import KazooClient
from pymilvus.grpc_gen import milvus_pb2_grpc

from vectide.services.common import tls
from vectide.services.common.config import Config
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.kv.zookeeper import ZooKeeperKV, cluster_root
from vectide.services.common.msgstream.channels import pchannels
from vectide.services.common.msgstream.writer import KafkaChannelWriter
from vectide.services.common.objectstore import ObjectStore
from vectide.services.common.observability import Health
from vectide.services.common.periodic import Periodic
from vectide.services.common.rpc import types as rpc_types
from vectide.services.common.rpc.transport import generic_handler, new_server
from vectide.services.common.security import audit
from vectide.services.common.security.guard import Guard
from vectide.services.common.security.rbac import Rbac
from vectide.services.common.security.store import VERSION_KEY, RbacStore
from vectide.services.common.session import SessionRegistry
from vectide.services.proxy.context import (
    DataCoordPort,
    ProxyConfig,
    QueryCoordPort,
    QueryNodes,
    RootCoordPort,
)
from vectide.services.proxy.core import Proxy
from vectide.services.proxy.grpc_auth import PRIVILEGE_NAMES, AuthInterceptor
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.proxy.imports import Importer
from vectide.services.proxy.interceptor import MILVUS_SERVICE, MetricsInterceptor
from vectide.services.proxy.limits import RateLimiter
from vectide.services.proxy.rest import RestServer
from vectide.services.proxy.rest_api import RestApi
from vectide.services.proxy.system_info import MILVUS_ROLES, Member

log = logging.getLogger(__name__)

#: Milvus's proxy limits (``proxy.grpc.serverMaxRecvSize`` / ``serverMaxSendSize``): a
#: request over 64 MB fails with RESOURCE_EXHAUSTED, as Milvus's would; replies may be larger
MAX_REQUEST_BYTES = 64 * 1024 * 1024
MAX_REPLY_BYTES = 256 * 1024 * 1024


def watch_rbac_changes(zk: KazooClient, root: str, on_change: Callable[[], None]) -> None:
    """Call ``on_change`` whenever any proxy changes users, roles or grants of the cluster at
    ``root`` (every change bumps the store's version key), for as long as ``zk`` runs."""
    zk.DataWatch(f"{root}/{VERSION_KEY}", lambda *_: on_change())


class ProxyService:
    def __init__(
        self,
        config: Config,
        zk: KazooClient,
        rootcoord: RootCoordPort,
        querycoord: QueryCoordPort,
        nodes: QueryNodes,
        address: str,
        deploy_mode: str = "CLUSTER",
        datacoord: DataCoordPort | None = None,
        http_port: int = 0,
    ) -> None:
        self._datacoord = datacoord
        #: the RESTful API's port (0: no REST server)
        self.http_port = http_port
        self._rest: RestServer | None = None
        self.config = config
        self.address = address
        self._zk = zk
        self._root = cluster_root(config.zookeeper, config.cluster.name)
        self.registry = SessionRegistry(zk, self._root)
        self.writer = KafkaChannelWriter(config.kafka.bootstrap_servers)
        self._ports = (rootcoord, querycoord, nodes)
        self._deploy_mode = deploy_mode
        self.proxy: Proxy
        self._importer: Importer | None = None
        self._loop: Periodic | None = None
        self._server = None
        #: the standard grpc.health.v1 service, on the Milvus port (load balancers, probes)
        self._grpc_health = health.HealthServicer()
        self._undo_audit_file: Callable[[], None] | None = None
        #: who may call what (None: authorization off), for every front-end of this proxy
        #: (the gRPC interceptor and the REST API admit calls through it)
        self.guard: Guard | None = None
        #: the client ports' TLS (``security.tls_mode``; None: plain)
        self._tls = tls.client_files(config.security)
        self._mutual_tls = config.security.tls_mode == tls.MUTUAL

    def _security(self) -> Rbac:
        """Set up :attr:`guard` and return the user and role store's operations.

        Root, ``admin`` and ``public`` are created on first start; a watch on the store's
        version clears this proxy's cache whenever any proxy changes users, roles or grants.
        """
        cfg = self.config.security
        if cfg.audit_log_file:
            self._undo_audit_file = audit.log_to_file(cfg.audit_log_file)
        store = RbacStore(ZooKeeperKV(self._zk, self._root))
        guard = Guard(store, cfg.credential_cache_ttl_s)
        rbac = Rbac(store, PRIVILEGE_NAMES, on_change=guard.invalidate)
        rbac.bootstrap(cfg.initial_root_password())
        watch_rbac_changes(self._zk, self._root, guard.invalidate)
        self.guard = guard if cfg.authorization_enabled else None
        return rbac

    def start(self) -> ProxyService:
        rbac = self._security()
        server = new_server(
            max_workers=64,
            interceptors=(MetricsInterceptor(), AuthInterceptor(self.guard)),
            max_receive=MAX_REQUEST_BYTES,
            max_send=MAX_REPLY_BYTES,
        )
        listen = self.config.service.listen_address(self.address)
        if tls.add_port(server, listen, self._tls, mutual=self._mutual_tls) == 0:
            raise OSError(f"cannot listen on {self.address}: is another proxy running?")
        info = self.registry.register("proxy", self.address)
        rootcoord, querycoord, nodes = self._ports
        self.proxy = Proxy(
            info.id,
            rootcoord,
            querycoord,
            nodes,
            self.writer,
            pchannels(self.config.cluster.name, self.config.cluster.dml_channels),
            ProxyConfig.from_config(self.config),
            datacoord=self._datacoord,
        )
        # import files are keys of the bucket itself, not of the binlogs' root path
        files = ObjectStore(replace(self.config.s3, root_path=""))
        self.proxy.importer = self._importer = Importer(self.proxy, files)
        # promise the rootcoord a timetick before taking any write
        self._first_report()
        pacer = self.proxy.report_pacer
        self._loop = Periodic(
            "proxy-timetick",
            lambda: pacer.interval(time.monotonic()),
            self.proxy.report_timetick,
        ).start()
        self.proxy.ticker.on_done = self._loop.wake
        limiter = RateLimiter(self.config.quota)
        if self.config.quota.rate_limit_enabled:  # quota.* rates are cluster-wide: split them
            self.registry.watch("proxy", lambda members: limiter.set_proxies(len(members)))
        milvus = MilvusService(self.proxy, self._deploy_mode, self._members, rbac, limiter)
        milvus_pb2_grpc.add_MilvusServiceServicer_to_server(milvus, server)
        server.add_generic_rpc_handlers(
            (generic_handler("Proxy", self.proxy, rpc_types.PROXY_METHODS),)
        )
        health_pb2_grpc.add_HealthServicer_to_server(self._grpc_health, server)
        if self.http_port:
            self._start_rest(milvus)
        server.start()
        self._server = server
        for service in ("", MILVUS_SERVICE):
            self._grpc_health.set(service, health_pb2.HealthCheckResponse.SERVING)
        log.info("proxy serving", extra={"address": self.address, "id": info.id})
        return self

    def _start_rest(self, milvus: MilvusService) -> None:
        """Milvus's RESTful API over the same servicer; a taken port stops the proxy with a
        message naming the knob, as a taken gRPC port does."""
        host = self.config.service.bind_host or self.address.rsplit(":", 1)[0]
        try:
            context = tls.http_context(self._tls, self._mutual_tls) if self._tls else None
            api = RestApi(milvus, self.guard)
            self._rest = RestServer(api, host, self.http_port, ssl_context=context).start()
        except OSError as exc:
            self.stop()
            raise OSError(
                exc.errno,
                f"cannot serve the REST API on {host}:{self.http_port} ({exc.strerror}): "
                "is another proxy running? (service.http_port)",
            ) from exc

    def _members(self) -> list[Member]:
        """Every live Vectide process, from the sessions (GetMetrics' system topology). A
        standalone's coordinators live in this process without a session of their own: they
        are listed at this address, as Milvus's standalone lists each of its components."""
        members = [
            Member(role, info.id, info.address)
            for role in MILVUS_ROLES
            for info in self.registry.members(role).values()
        ]
        if not any(m.role == "rootcoord" for m in members):
            members.append(Member("rootcoord", 0, self.address))
        return members

    def health(self) -> Health:
        """Serving once the Milvus API listens and the proxy promised its first timetick."""
        if self._server is None:
            return Health(False, "not serving yet")
        return Health(True, f"serving on {self.address}")

    def _first_report(self, patience_s: float = 30.0) -> None:
        """The first timetick report, waiting out a coordinator failover: reports fail fast
        (``service.coordinator_fail_fast_s``) so that writes do not hang, but a proxy that
        starts while a standby takes over should wait for it, not exit."""
        deadline = time.monotonic() + patience_s
        while True:
            try:
                self.proxy.report_timetick()
                return
            except MilvusError as exc:
                if exc.code != Code.SERVICE_UNAVAILABLE or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def stop(self) -> None:
        self._grpc_health.enter_graceful_shutdown()
        if self._rest is not None:
            self._rest.stop()
        if self._server is not None:
            self._server.stop(grace=2).wait()
        if self._importer is not None:
            self._importer.stop()  # a job cut short deletes its rows while writes still work
        if self._loop is not None:
            self._loop.stop()
        self.writer.close()
        if self._undo_audit_file is not None:
            self._undo_audit_file()
