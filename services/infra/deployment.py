"""``vectide up|down|status``: the infrastructure plus Vectide's own processes, in background.

Standalone mode is one process; cluster mode is an active and a standby rootcoord, N query
nodes and M proxies (the first proxy on ``service.proxy_port``, the next ones on the
following ports). ``up`` starts a supervisor (services/infra/supervisor.py) that starts the
roles and restarts any that exits, and returns once every role is ready. What was started is
recorded in ``{run_dir}/deployment.json`` so ``status``, ``down`` and the supervisor know it.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass

import grpc
from pymilvus.grpc_gen import milvus_pb2, milvus_pb2_grpc

from vectide.services.common import tls
from vectide.services.common.config import Config
from vectide.services.common.kv.base import KVError
from vectide.services.common.kv.zookeeper import cluster_root, connect_zookeeper
from vectide.services.common.session import SessionInfo, SessionRegistry
from vectide.services.infra.components import Endpoint, InfraError
from vectide.services.infra.manager import InfraManager, Progress
from vectide.services.infra.process import ManagedProcess
from vectide.services.infra.spark import master_state, master_url, spark_components
from vectide.services.infra.supervisor import MARKER as SUPERVISOR_MARKER
from vectide.services.infra.supervisor import STATE_FILE as SUPERVISOR_STATE
from vectide.services.infra.supervisor import SessionEvictor, SupervisedRole, Supervisor
from vectide.services.infra.supervisor import read_state as read_supervisor_state

#: On one host every process needs its own /metrics and /healthz port: the role's offset
#: from ``service.metrics_port`` plus its index (standalone keeps 9091, rootcoords 9191..,
#: query nodes 9201.., proxies 9221.., the data node 9241, ingest workers 9251..). In
#: Kubernetes every pod uses ``service.metrics_port`` itself.
METRICS_PORT_OFFSETS = {
    "standalone": 0,
    "rootcoord": 100,
    "querynode": 110,
    "proxy": 130,
    "datanode": 150,
    "ingest": 160,
}


def metrics_port(config: Config, role: str, index: int = 0) -> int:
    return config.service.metrics_port + METRICS_PORT_OFFSETS[role] + index


@dataclass
class RoleProcess:
    name: str
    role: str
    port: int
    args: list[str]
    metrics_port: int = 0
    #: the RESTful API's port (proxies and standalone; 0: none)
    http_port: int = 0

    def endpoint(self, host: str) -> str:
        return f"{host}:{self.port}" if self.port else "-"

    def rest_endpoint(self, host: str, tls_on: bool = False) -> str:
        """The REST base URL; https when ``security.tls_mode`` is on."""
        scheme = "https" if tls_on else "http"
        return f"{scheme}://{host}:{self.http_port}/v2/vectordb" if self.http_port else "-"

    def metrics_endpoint(self, host: str) -> str:
        return f"http://{host}:{self.metrics_port}/metrics" if self.metrics_port else "-"


@dataclass
class RoleStatus:
    name: str
    role: str
    endpoint: str
    pid: int | None
    healthy: bool
    #: where Prometheus scrapes it (``/healthz`` beside it)
    metrics: str = "-"
    #: Milvus's RESTful API v2 base URL (proxies and standalone)
    rest: str = "-"
    #: times the supervisor started it again, and why it last exited ("signal SIGKILL")
    restarts: int = 0
    last_exit: str = ""
    #: rootcoords: "active" (holds the rootcoord session clients resolve) or "standby"
    state: str = ""


def plan(
    config: Config,
    mode: str,
    querynodes: int,
    proxies: int,
    datanode: bool = True,
    ingest: int = 1,
    rootcoords: int = 2,
) -> list[RoleProcess]:
    """The processes of a deployment. Standalone runs the ingest role inside its process;
    a cluster runs ``ingest`` replicas of it, which split the mapped topics' partitions,
    and ``rootcoords`` rootcoords: the first started leads, the others wait as standby."""
    roles = _plan(config, mode, querynodes, proxies, datanode, ingest, rootcoords)
    seen: dict[str, int] = {}
    for role in roles:  # the i-th process of a role takes the role's base port + i
        role.metrics_port = metrics_port(config, role.role, seen.get(role.role, 0))
        seen[role.role] = seen.get(role.role, 0) + 1
        role.args += ["--metrics-port", str(role.metrics_port)]
    return roles


def _plan(
    config: Config,
    mode: str,
    querynodes: int,
    proxies: int,
    datanode: bool,
    ingest: int,
    rootcoords: int,
) -> list[RoleProcess]:
    svc = config.service
    extra = [RoleProcess("datanode", "datanode", 0, ["run", "datanode"])] if datanode else []
    if mode == "standalone":
        args = ["standalone", "--port", str(svc.proxy_port), "--querynodes", str(querynodes)]
        return [
            RoleProcess(
                "standalone",
                "standalone",
                svc.proxy_port,
                [*args, "--http-port", str(svc.http_port)],
                http_port=svc.http_port,
            ),
            *extra,
        ]
    if mode != "cluster":
        raise InfraError(f"unknown mode {mode!r}: standalone or cluster")
    roles = []
    for i in range(max(1, rootcoords)):  # the standby serves its port once it leads
        port = svc.rootcoord_port + i
        name = "rootcoord" if i == 0 else f"rootcoord-{i}"
        roles.append(
            RoleProcess(name, "rootcoord", port, ["run", "rootcoord", "--port", str(port)])
        )
    for i in range(querynodes):
        port = svc.querynode_port + i
        roles.append(
            RoleProcess(
                f"querynode-{i}", "querynode", port, ["run", "querynode", "--port", str(port)]
            )
        )
    for i in range(proxies):  # proxy i: gRPC on proxy_port + i, REST on http_port + i
        port, http = svc.proxy_port + i, (svc.http_port + i if svc.http_port else 0)
        args = ["run", "proxy", "--port", str(port), "--http-port", str(http)]
        roles.append(RoleProcess(f"proxy-{i}", "proxy", port, args, http_port=http))
    for i in range(ingest):
        roles.append(RoleProcess(f"ingest-{i}", "ingest", 0, ["run", "ingest"]))
    return [*roles, *extra]


class DeploymentManager:
    def __init__(self, config: Config, progress: Progress | None = None) -> None:
        self.config = config
        self.infra = InfraManager(config, progress)
        #: cluster mode's Spark standalone master and workers (the data node's executors)
        self.spark = InfraManager(config, progress, spark_components(config))
        self._progress = progress or (lambda line: None)
        self._state_file = config.run_dir / "deployment.json"

    def _process(self, role: RoleProcess) -> ManagedProcess:
        return ManagedProcess(role.name, self.config.run_dir, " ".join(role.args))

    def _recorded(self) -> list[RoleProcess]:
        try:
            return [RoleProcess(**r) for r in json.loads(self._state_file.read_text())]
        except (OSError, ValueError):
            return []

    def up(
        self,
        mode: str = "standalone",
        querynodes: int = 1,
        proxies: int = 1,
        datanode: bool = True,
        ingest: int = 1,
        rootcoords: int = 2,
    ) -> list[RoleStatus]:
        self.infra.up()
        roles = plan(self.config, mode, querynodes, proxies, datanode, ingest, rootcoords)
        self._check_no_other_deployment(roles)
        self._state_file.parent.mkdir(parents=True, exist_ok=True)
        self._state_file.write_text(json.dumps([asdict(r) for r in roles], indent=2))
        env = self.config.to_env()
        if mode == "cluster" and datanode:
            self.spark.up()  # the data node submits to it instead of running local[N]
            env["VECTIDE_DATA_SPARK_MASTER"] = master_url(self.config)
        supervised = self.config.supervisor.enabled
        if supervised:  # it starts the roles in order, each once the previous one is ready
            self._start_supervisor(env)
        for role in roles:
            proc = self._process(role)
            if not supervised and proc.pid() is None:
                argv = [sys.executable, "-m", "vectide.services.cli", *role.args]
                pid = proc.start(argv, env=env)
                self._progress(f"{role.name}: started pid {pid} on port {role.port}")
            self._wait(role, proc)
        return self.status()

    def _check_no_other_deployment(self, roles: list[RoleProcess]) -> None:
        """Refuse to start over a different deployment, except one that differs only in
        its number of query nodes: that one is scaled (``_scale_querynodes``)."""
        recorded = self._recorded()
        running = {r.name for r in recorded if self._process(r).pid() is not None}
        if self.supervisor.pid() is not None:  # it may be restarting every role right now
            running |= {r.name for r in recorded}
        wanted = {r.name for r in roles}
        if not running or running == wanted:
            return
        if _without_querynodes(running) == _without_querynodes(wanted):
            self._scale_querynodes(recorded, wanted)
            return
        raise InfraError(
            f"a different deployment is running ({', '.join(sorted(running))}): "
            "run `vectide down` first"
        )

    def _scale_querynodes(self, recorded: list[RoleProcess], wanted: set[str]) -> None:
        """Stop the supervisor (``up`` starts one again, which adopts the running roles and
        starts the new query nodes) and the query nodes no longer wanted: a node stopped
        gracefully hands its shards and segments to the others."""
        if self.supervisor.stop():
            self._progress("supervisor: stopped, to scale the query nodes")
        for role in recorded:
            gone = role.role == "querynode" and role.name not in wanted
            if gone and self._process(role).stop():
                self._progress(f"{role.name}: stopped")

    @property
    def supervisor(self) -> ManagedProcess:
        return ManagedProcess("supervisor", self.config.run_dir, SUPERVISOR_MARKER)

    def _start_supervisor(self, env: dict[str, str]) -> None:
        if self.supervisor.pid() is not None:
            return
        (self.config.run_dir / SUPERVISOR_STATE).unlink(missing_ok=True)
        argv = [sys.executable, "-m", "vectide.services.cli", "supervise"]
        pid = self.supervisor.start(argv, env=env)
        self._progress(f"supervisor: started pid {pid}; it starts and restarts the roles")

    def supervise(self) -> None:
        """Run the recorded deployment's roles until SIGTERM (``vectide supervise``)."""
        roles = {r.name: r for r in self._recorded()}
        if not roles:
            raise InfraError("no deployment recorded: run `vectide up`")
        supervised = {
            name: SupervisedRole(
                [sys.executable, "-m", "vectide.services.cli", *r.args], " ".join(r.args)
            )
            for name, r in roles.items()
        }
        evictor = SessionEvictor(self.config)
        try:
            Supervisor(
                self.config, supervised, lambda name, pid: self._healthy(roles[name], pid), evictor
            ).run()
        finally:
            evictor.close()

    def _wait(self, role: RoleProcess, proc: ManagedProcess) -> None:
        deadline = time.monotonic() + self.config.infra.startup_timeout_s
        while not self._healthy(role, proc.pid()):
            failure = self._start_failure(role, proc)
            if failure:
                raise InfraError(f"{failure}; last log lines ({proc.log_file}):\n{proc.log_tail()}")
            if time.monotonic() > deadline:
                raise InfraError(
                    f"{role.name} did not answer on port {role.port}; log "
                    f"{proc.log_file}:\n{proc.log_tail()}"
                )
            time.sleep(0.1)
        self._progress(f"{role.name}: ready on {role.endpoint(self.config.service.host)}")

    def _start_failure(self, role: RoleProcess, proc: ManagedProcess) -> str:
        """Why ``role`` will not come up by itself ("" while it may still)."""
        if not self.config.supervisor.enabled:
            return f"{role.name} exited during start-up" if proc.exited_early() else ""
        if self.supervisor.pid() is None:
            return f"the supervisor exited (log {self.supervisor.log_file})"
        record = read_supervisor_state(self.config.run_dir).get(role.name, {})
        if record.get("restarts") or record.get("last_exit"):
            return (
                f"{role.name} exited during start-up ({record.get('last_exit')}); the "
                "supervisor keeps restarting it until `vectide down`"
            )
        return ""

    def _healthy(self, role: RoleProcess, pid: int | None) -> bool:
        """Ready: the proxy answers the Milvus API, a rootcoord's /healthz says active or
        standby, the data node and ingest workers registered their sessions (a standalone's
        ingest role starts just after its proxy answers: both count)."""
        host = self.config.service.host
        if role.role in ("proxy", "standalone"):
            files = tls.client_files(self.config.security)
            if not milvus_answers(role.endpoint(host), files=files):
                return False
            return role.role == "proxy" or self._has_session("ingest", pid)
        if role.role in ("datanode", "ingest"):  # no port: up once its session registered
            return self._has_session(role.role, pid)
        if role.role == "rootcoord" and role.metrics_port:
            return http_ok(f"http://{host}:{role.metrics_port}/healthz")
        return Endpoint(host, role.port).accepts()

    def _has_session(self, role: str, pid: int | None) -> bool:
        return pid is not None and any(m.pid == pid for m in self._members(role))

    def _members(self, role: str) -> list[SessionInfo]:
        try:
            zk = connect_zookeeper(self.config.zookeeper, timeout_s=2.0)
        except KVError:
            return []
        try:
            root = cluster_root(self.config.zookeeper, self.config.cluster.name)
            return list(SessionRegistry(zk, root).members(role).values())
        finally:
            zk.stop()
            zk.close()

    def status(self) -> list[RoleStatus]:
        host = self.config.service.host
        supervised = read_supervisor_state(self.config.run_dir)
        recorded = self._recorded()
        leaders = set()
        if any(r.role == "rootcoord" for r in recorded):
            leaders = {m.pid for m in self._members("rootcoord")}
        out = []
        for r in recorded:
            pid = self._process(r).pid()
            metrics = r.metrics_endpoint(host)
            record = supervised.get(r.name, {})
            state = ("active" if pid in leaders else "standby") if r.role == "rootcoord" else ""
            out.append(
                RoleStatus(
                    r.name,
                    r.role,
                    r.endpoint(host),
                    pid,
                    self._healthy(r, pid),
                    metrics,
                    r.rest_endpoint(host, self.config.security.tls_mode != tls.OFF),
                    int(record.get("restarts", 0)),
                    str(record.get("last_exit", "")),
                    state if pid else "",
                )
            )
            if r.role == "standalone":  # the ingest role lives in the standalone process
                healthy = self._has_session("ingest", pid)
                out.append(RoleStatus("ingest", "ingest", "-", pid, healthy, metrics))
        return out

    def supervisor_status(self) -> dict[str, object]:
        """The supervisor's pid (None: not running) and whether this deployment wants one."""
        return {"pid": self.supervisor.pid(), "enabled": self.config.supervisor.enabled}

    def down(self, infra: bool = True) -> None:
        if self.supervisor.stop():  # first: nothing it stops below may be started again
            self._progress("supervisor: stopped")
        for role in reversed(self._recorded()):
            if self._process(role).stop():
                self._progress(f"{role.name}: stopped")
        self._state_file.unlink(missing_ok=True)
        (self.config.run_dir / SUPERVISOR_STATE).unlink(missing_ok=True)
        self.spark.down()
        if infra:
            self.infra.down()

    def spark_status(self) -> dict[str, object]:
        """The Spark master (when cluster mode runs one) and the data node driver's UI."""
        state = master_state(self.config)
        ui = ""
        for member in self._members("datanode"):
            ui = member.extra.get("spark_ui", "")
        return {
            "master": master_url(self.config) if state else None,
            "master_ui": (
                f"http://{self.config.service.host}:{self.config.infra.spark_master_webui_port}"
                if state
                else None
            ),
            "workers": len([w for w in (state or {}).get("workers", []) if w["state"] == "ALIVE"]),
            "driver_ui": ui or None,
        }


def _without_querynodes(names: set[str]) -> set[str]:
    return {n for n in names if not n.startswith("querynode")}


def http_ok(url: str, timeout_s: float = 1.0) -> bool:
    """True when ``url`` answers 200 (a role's /healthz)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as reply:
            return reply.status == 200
    except (OSError, ValueError):
        return False


def milvus_answers(
    endpoint: str, timeout_s: float = 2.0, files: tls.TlsFiles | None = None
) -> bool:
    """True when a Milvus API server answers GetVersion on ``endpoint`` (refusing it for
    want of credentials is an answer too: ``security.authorization_enabled``). With
    ``files`` (``security.tls_mode`` on) it dials TLS, trusting ``tls_ca_file`` and showing
    ``tls_cert_file``, which a mutual-TLS proxy requires."""
    try:
        with _milvus_channel(endpoint, files) as channel:
            stub = milvus_pb2_grpc.MilvusServiceStub(channel)
            reply = stub.GetVersion(milvus_pb2.GetVersionRequest(), timeout=timeout_s)
            return reply.status.code == 0
    except grpc.RpcError as exc:
        return exc.code() == grpc.StatusCode.UNAUTHENTICATED


def _milvus_channel(endpoint: str, files: tls.TlsFiles | None) -> grpc.Channel:
    if files is None:
        return grpc.insecure_channel(endpoint)
    credentials = tls.channel_credentials(files)
    return grpc.secure_channel(endpoint, credentials, options=tls.name_options(files))
