"""A Spark standalone cluster for the data node, from pyspark's own distribution.

pyspark's wheel ships ``bin/spark-class`` and the jars of a full Spark, so a master and its
workers run locally without a download (``vectide up --mode cluster``). They are managed
infrastructure like ZooKeeper, Tansu and SeaweedFS: a process group each, a PID file, a log,
a health check (the master's ``/json/`` lists its alive workers). The data node then submits
to ``spark://host:port`` and its tasks run on the workers' executors.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path
from typing import Any

from vectide.services.common.config import Config
from vectide.services.infra.components import Component, Endpoint, InfraError

MASTER_MAIN = "org.apache.spark.deploy.master.Master"
WORKER_MAIN = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path | None:
    try:
        import pyspark
    except ImportError:
        return None
    home = Path(pyspark.__file__).parent
    return home if (home / "bin" / "spark-class").exists() else None


def master_url(config: Config) -> str:
    return f"spark://{config.service.host}:{config.infra.spark_master_port}"


def master_state(config: Config, timeout_s: float = 1.0) -> dict[str, Any] | None:
    """The master's JSON status (workers, cores, applications), or None if it does not answer."""
    url = f"http://{config.service.host}:{config.infra.spark_master_webui_port}/json/"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as reply:
            return json.loads(reply.read())
    except (OSError, ValueError):
        return None


class _SparkProcess(Component):
    section = "infra"

    @property
    def managed(self) -> bool:
        return True

    def prepare(self) -> None:
        if spark_home() is None:
            raise InfraError("Spark not found: pip install 'pyspark>=4.2,<5'")
        super().prepare()

    def env(self) -> dict[str, str]:
        home = str(spark_home())
        return {
            "SPARK_HOME": home,
            "SPARK_LOCAL_IP": self.config.service.host,
            "SPARK_LOG_DIR": str(self.data_dir),
            "SPARK_WORKER_DIR": str(self.data_dir / "work"),
            # executors start the Python workers with this interpreter (it has Vectide)
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_NO_DAEMONIZE": "1",
            "PATH": os.environ.get("PATH", ""),
        }

    def _spark_class(self, main: str, *args: str) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), main, *args]


class SparkMaster(_SparkProcess):
    name = "spark-master"
    marker = MASTER_MAIN

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(self.config.service.host, self.config.infra.spark_master_port)

    def argv(self) -> list[str]:
        infra = self.config.infra
        return self._spark_class(
            MASTER_MAIN,
            "--host",
            self.config.service.host,
            "--port",
            str(infra.spark_master_port),
            "--webui-port",
            str(infra.spark_master_webui_port),
        )

    def healthy(self) -> bool:
        state = master_state(self.config)
        return state is not None and state.get("status") == "ALIVE"


class SparkWorker(_SparkProcess):
    marker = WORKER_MAIN

    def __init__(self, config: Config, index: int) -> None:
        super().__init__(config)
        self.index = index
        self.name = f"spark-worker-{index}"
        # the marker must tell workers apart: their port is on the command line
        self.marker = f"--port {config.infra.spark_worker_port + index}"

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(self.config.service.host, self.config.infra.spark_worker_port + self.index)

    def argv(self) -> list[str]:
        infra = self.config.infra
        return self._spark_class(
            WORKER_MAIN,
            master_url(self.config),
            "--host",
            self.config.service.host,
            "--port",
            str(infra.spark_worker_port + self.index),
            "--webui-port",
            str(infra.spark_worker_webui_port + self.index),
            "--cores",
            str(infra.spark_worker_cores),
            "--memory",
            f"{infra.spark_worker_memory_mb}m",
            "--work-dir",
            str(self.data_dir / "work"),
        )

    def healthy(self) -> bool:
        """Registered with the master and alive there."""
        state = master_state(self.config) or {}
        port = self.endpoint.port
        return any(
            w.get("state") == "ALIVE" and w.get("port") == port for w in state.get("workers", [])
        )


def spark_components(config: Config, workers: int | None = None) -> list[Component]:
    """The master, then its workers (``infra.spark_workers`` unless given)."""
    count = config.infra.spark_workers if workers is None else workers
    return [SparkMaster(config), *(SparkWorker(config, i) for i in range(count))]
