"""The proxy process: the Milvus gRPC service on its port, the internal cache-invalidation
RPC on the same port, its session, and the periodic timetick report."""

from __future__ import annotations

import logging
import time

from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from kazoo.client import KazooClient
from pymilvus.grpc_gen import milvus_pb2_grpc

from services.common.config import Config
from services.common.errors import Code, MilvusError
from services.common.kv.zookeeper import cluster_root
from services.common.msgstream.channels import pchannels
from services.common.msgstream.writer import KafkaChannelWriter
from services.common.observability import Health
from services.common.periodic import Periodic
from services.common.rpc import types as rpc_types
from services.common.rpc.transport import generic_handler, new_server
from services.common.session import SessionRegistry
from services.proxy.core import (
    DataCoordPort,
    Proxy,
    ProxyConfig,
    QueryCoordPort,
    QueryNodes,
    RootCoordPort,
)
from services.proxy.grpc_service import MilvusService
from services.proxy.interceptor import MILVUS_SERVICE, MetricsInterceptor
from services.proxy.system_info import MILVUS_ROLES, Member

log = logging.getLogger(__name__)

#: Milvus's proxy limits (``proxy.grpc.serverMaxRecvSize`` / ``serverMaxSendSize``): a
#: request over 64 MB fails with RESOURCE_EXHAUSTED, as Milvus's would; replies may be larger
MAX_REQUEST_BYTES = 64 * 1024 * 1024
MAX_REPLY_BYTES = 256 * 1024 * 1024


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
    ) -> None:
        self._datacoord = datacoord
        self.config = config
        self.address = address
        self.registry = SessionRegistry(zk, cluster_root(config.zookeeper, config.cluster.name))
        self.writer = KafkaChannelWriter(config.kafka.bootstrap_servers)
        self._ports = (rootcoord, querycoord, nodes)
        self._deploy_mode = deploy_mode
        self.proxy: Proxy
        self._loop: Periodic | None = None
        self._server = None
        #: the standard grpc.health.v1 service, on the Milvus port (load balancers, probes)
        self._grpc_health = health.HealthServicer()

    def start(self) -> ProxyService:
        server = new_server(
            max_workers=64,
            interceptors=(MetricsInterceptor(),),
            max_receive=MAX_REQUEST_BYTES,
            max_send=MAX_REPLY_BYTES,
        )
        if server.add_insecure_port(self.config.service.listen_address(self.address)) == 0:
            raise OSError(f"cannot listen on {self.address}: is another proxy running?")
        info = self.registry.register("proxy", self.address)
        rootcoord, querycoord, nodes = self._ports
        q = self.config.query
        self.proxy = Proxy(
            info.id,
            rootcoord,
            querycoord,
            nodes,
            self.writer,
            pchannels(self.config.cluster.name, self.config.cluster.dml_channels),
            ProxyConfig(
                q.graceful_time_ms,
                q.max_timestamp_lag_ms,
                q.max_concurrent_reads,
                self.config.service.default_shards,
                self.config.time.timetick_interval_ms,
                self.config.time.idle_timetick_interval_ms,
            ),
            datacoord=self._datacoord,
        )
        # promise the rootcoord a timetick before taking any write
        self._first_report()
        pacer = self.proxy.report_pacer
        self._loop = Periodic(
            "proxy-timetick",
            lambda: pacer.interval(time.monotonic()),
            self.proxy.report_timetick,
        ).start()
        self.proxy.ticker.on_done = self._loop.wake
        milvus_pb2_grpc.add_MilvusServiceServicer_to_server(
            MilvusService(self.proxy, self._deploy_mode, self._members), server
        )
        server.add_generic_rpc_handlers(
            (generic_handler("Proxy", self.proxy, rpc_types.PROXY_METHODS),)
        )
        health_pb2_grpc.add_HealthServicer_to_server(self._grpc_health, server)
        server.start()
        self._server = server
        for service in ("", MILVUS_SERVICE):
            self._grpc_health.set(service, health_pb2.HealthCheckResponse.SERVING)
        log.info("proxy serving", extra={"address": self.address, "id": info.id})
        return self

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
        if self._server is not None:
            self._server.stop(grace=2).wait()
        if self._loop is not None:
            self._loop.stop()
        self.writer.close()
