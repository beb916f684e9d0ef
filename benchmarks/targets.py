"""The systems under test, each a server process of its own that the bench starts and stops.

Every port and directory here is the bench's own, clear of a developer deployment (2181,
9092, 8333, 19530) and of the test suite's ports, so ``make bench`` can run beside both:

- Vectide: ZooKeeper, the Tansu broker and SeaweedFS started by ``InfraManager``, then a
  standalone process by ``DeploymentManager``, all under ``.vectide/bench``;
- milvus-lite: its own gRPC server (``milvus-lite server``) on port 24540;
- the do-nothing server (``benchmarks.nullserver``) on port 24550.

SeaweedFS also listens on each of its ports + 10000 (gRPC). The test suite's SeaweedFS
(28333, 29333, 28380, 28888) therefore holds 38333, 39333, 38380 and 38888, so the bench's
SeaweedFS takes 22433-22436 (S3, master, volume, filer; gRPC on 32433-32436): below Linux's
ephemeral range (32768-60999), where a client connection's local port can also take a port
for a while. The other ports (24xxx, ZooKeeper 32181) lie below it too; a start that fails
anyway (the infrastructure's or the standalone's) is retried.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from benchmarks.common import REPO, log, own_tree
from vectide.services.common.config import Config
from vectide.services.infra.components import InfraError
from vectide.services.infra.deployment import DeploymentManager, milvus_answers
from vectide.services.infra.manager import InfraManager

HOST = "127.0.0.1"
#: ``VECTIDE_BENCH_PORT_SHIFT`` (e.g. 1000) moves every bench port and the run dir, so two
#: engineers can run bench modules on one machine at once (figures then share the cores)
SHIFT = int(os.environ.get("VECTIDE_BENCH_PORT_SHIFT", "0"))
RUN_DIR = REPO / ".vectide" / (f"bench{SHIFT}" if SHIFT else "bench")
MILVUS_LITE_PORT = 24540 + SHIFT
NULL_PORT = 24550 + SHIFT


def bench_config(cluster_name: str, dml_channels: int = 4) -> Config:
    """Vectide's configuration for the bench: defaults, with the bench's ports and run dir.

    Built in code from the defaults (not from ``vectide.yaml`` or ``VECTIDE_*``), so a
    developer's settings never leak into the measurement; the child process receives it
    whole through ``Config.to_env``. Every port lies below Linux's ephemeral range (32768
    and up; SeaweedFS's gRPC ports are its ports + 10000), where an outgoing connection can
    hold one at the moment a role binds it.
    """
    config = Config()
    config.infra.run_dir = str(RUN_DIR)
    config.zookeeper.hosts = f"{HOST}:{32181 + SHIFT}"
    config.kafka.bootstrap_servers = f"{HOST}:{24092 + SHIFT}"
    config.s3.endpoint = f"http://{HOST}:{22433 + SHIFT}"
    config.infra.seaweed_master_port = 22434 + SHIFT
    config.infra.seaweed_volume_port = 22435 + SHIFT
    config.infra.seaweed_filer_port = 22436 + SHIFT
    config.service.host = HOST
    config.service.proxy_port = 24530 + SHIFT
    config.service.rootcoord_port = 24600 + SHIFT
    config.service.querynode_port = 24610 + SHIFT
    config.service.http_port = 24121 + SHIFT
    config.service.metrics_port = 24091 + SHIFT  # clear of a developer's `make run` (9091)
    config.cluster.name = cluster_name
    config.cluster.dml_channels = dml_channels
    return config


def _retried(
    what: str, start: Callable[[], None], reset: Callable[[], None] | None = None, attempts: int = 3
) -> None:
    """``start`` until it succeeds, ``attempts`` times at most, 5 s apart and after
    ``reset``: a port can be held for a moment (a developer's run, a connection's end)."""
    for attempt in range(attempts):
        try:
            start()
            return
        except InfraError as exc:
            if attempt == attempts - 1:
                raise
            log(f"{what}: start failed ({str(exc).splitlines()[0]}); retrying")
            time.sleep(5)
            if reset is not None:
                reset()


@dataclass
class Target:
    """A server the bench talks to through pymilvus."""

    name: str
    uri: str

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def processes(self) -> dict[str, int]:
        """Name -> pid of the processes serving this target (for RSS and profiling)."""
        return {}


@dataclass
class VectideTarget(Target):
    """Infra plus a standalone Vectide, started like a user does (``vectide up``)."""

    config: Config = field(default_factory=lambda: bench_config("bench"))

    @property
    def deployment(self) -> DeploymentManager:
        return DeploymentManager(self.config, progress=lambda line: log(f"vectide: {line}"))

    _infra_up: bool = False

    def start_infra(self) -> None:
        """ZooKeeper, S3 and the broker, fresh: leftovers of an interrupted bench run (in the
        bench's own run dir only) are stopped and their data removed first."""

        def fresh() -> None:
            self.stop()
            remove_data()
            InfraManager(self.config, progress=lambda line: log(f"infra: {line}")).up()

        _retried("infra", fresh)
        self._infra_up = True

    def start(self) -> None:
        """Infrastructure, then the standalone: a standalone that fails to start is started
        again on fresh infrastructure."""
        if not self._infra_up:
            self.start_infra()
        # start_infra stops what ran (the failed standalone too) before starting afresh
        _retried("vectide", lambda: self.deployment.up("standalone"), reset=self.start_infra)

    def stop(self) -> None:
        self.deployment.down()
        self._infra_up = False

    def processes(self) -> dict[str, int]:
        from benchmarks.idle import processes

        return processes(self.config)


@dataclass
class SubprocessTarget(Target):
    """A server launched as a child process in its own process group, stopped with it."""

    argv: list[str] = field(default_factory=list)
    log_name: str = "server"
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return self.uri.removeprefix("http://")

    def prepare(self) -> None:
        """Clear what a previous run left (data directories)."""

    def start(self) -> None:
        self.prepare()
        self._refuse_taken_port()
        log_file = RUN_DIR / "logs" / f"{self.log_name}.log"
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(log_file, "ab") as out:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while not milvus_answers(self.endpoint, timeout_s=1.0):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                tail = log_file.read_text(errors="replace")[-2000:]
                self.stop()
                raise RuntimeError(f"{self.name} did not start; log {log_file}:\n{tail}")
            time.sleep(0.2)
        log(f"{self.name}: ready on {self.endpoint} (pid {self._proc.pid})")

    def _refuse_taken_port(self) -> None:
        if milvus_answers(self.endpoint, timeout_s=0.5):
            raise RuntimeError(
                f"{self.endpoint} already answers: another bench run (or something else) "
                "holds the bench's port; stop it first"
            )

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def processes(self) -> dict[str, int]:
        if self._proc is None or self._proc.poll() is not None:
            return {}
        return {self.name: self._proc.pid}


@dataclass
class MilvusLiteTarget(SubprocessTarget):
    """milvus-lite as a real gRPC server process on its own data directory."""

    data_dir: Path = RUN_DIR / "milvus-lite"

    def prepare(self) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self.data_dir.mkdir(parents=True)


def vectide_target(cluster_name: str) -> VectideTarget:
    config = bench_config(cluster_name)
    return VectideTarget("vectide", f"http://{HOST}:{config.service.proxy_port}", config=config)


def milvus_lite_target() -> MilvusLiteTarget:
    data_dir = RUN_DIR / "milvus-lite"
    binary = str(Path(sys.executable).parent / "milvus-lite")
    argv = [binary, "server", "--data-dir", str(data_dir), "--host", HOST]
    argv += ["--port", str(MILVUS_LITE_PORT)]
    return MilvusLiteTarget(
        "milvus-lite",
        f"http://{HOST}:{MILVUS_LITE_PORT}",
        argv=argv,
        log_name="milvus-lite",
        data_dir=data_dir,
    )


def null_target() -> SubprocessTarget:
    argv = [sys.executable, "-m", "benchmarks.nullserver", "--host", HOST]
    argv += ["--port", str(NULL_PORT)]
    return SubprocessTarget(
        "ceiling", f"http://{HOST}:{NULL_PORT}", argv=argv, log_name="nullserver"
    )


def remove_data() -> None:
    """Delete what the servers stored under the bench's run dir (hundreds of MB after a run);
    logs stay. Only ``.vectide/bench`` is touched, never a developer's or the tests' dirs."""
    for name in ("data", "datanode", "milvus-lite"):
        shutil.rmtree(RUN_DIR / name, ignore_errors=True)


def rss_bytes(pids: dict[str, int]) -> dict[str, int]:
    """Resident memory of each process and its children (a server's workers count too),
    except children listed on their own (the supervisor's roles are its children)."""
    out: dict[str, int] = {}
    listed = set(pids.values())
    for name, pid in pids.items():
        try:
            out[name] = sum(p.memory_info().rss for p in own_tree(pid, listed))
        except psutil.Error:
            continue
    return out
