"""`vectide infra` as a user runs it, against the session's infrastructure."""

import json
import os
import socket
import subprocess
import sys

from vectide.services.common.config import Config
from vectide.services.infra.components import InfraError
from vectide.services.infra.manager import InfraManager


def vectide(infra: Config, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vectide.services.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **infra.to_env()},
    )


def test_status_json_reports_every_service_healthy(infra):
    result = vectide(infra, "infra", "status", "--json")
    assert result.returncode == 0, result.stderr
    status = {s["name"]: s for s in json.loads(result.stdout)}
    assert set(status) == {"zookeeper", "seaweedfs", "kafka"}
    assert all(s["healthy"] for s in status.values())
    assert status["kafka"]["endpoint"] == infra.kafka.bootstrap_servers


def test_up_is_idempotent(infra):
    before = {s.name: s.pid for s in InfraManager(infra).status()}
    result = vectide(infra, "infra", "up")
    assert result.returncode == 0, result.stderr
    assert "(running," in result.stderr
    assert {s.name: s.pid for s in InfraManager(infra).status()} == before


def test_a_port_taken_by_a_stranger_is_a_clear_error(tmp_path):
    config = Config()
    config.infra.run_dir = str(tmp_path)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        config.zookeeper.hosts = f"127.0.0.1:{squatter.getsockname()[1]}"
        try:
            InfraManager(config).up()
        except InfraError as exc:
            assert "already in use by a process vectide did not start" in str(exc)
            assert "zookeeper.managed=false" in str(exc)
        else:
            raise AssertionError("up() started ZooKeeper on a taken port")


def test_config_command_prints_the_effective_tree(infra):
    result = vectide(infra, "config")
    assert result.returncode == 0
    assert f"bootstrap_servers: {infra.kafka.bootstrap_servers}" in result.stdout
