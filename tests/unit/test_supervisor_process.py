"""The supervisor adapter with real child processes (no infrastructure): it starts roles in
order, restarts a killed one with its signal recorded, and starts nothing after stop."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from vectide.services.common.config import Config
from vectide.services.infra.process import ManagedProcess, alive
from vectide.services.infra.supervisor import SupervisedRole, Supervisor, read_state


def sleeper(tag: str) -> SupervisedRole:
    marker = f"vectide-test-supervised-{tag}"
    return SupervisedRole([sys.executable, "-c", "import time; time.sleep(60)", marker], marker)


def wait_until(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_killed_child_is_restarted_counted_and_nothing_starts_after_stop(tmp_path):
    config = Config()
    config.infra.run_dir = str(tmp_path)
    config.supervisor.backoff_initial_s = 0.2
    config.supervisor.poll_interval_s = 0.05
    roles = {"first": sleeper("first"), "second": sleeper("second")}
    exits: list[tuple[str, int]] = []
    supervisor = Supervisor(
        config, roles, probe=lambda name, pid: True, on_exit=lambda n, p, _: exits.append((n, p))
    )
    runner = threading.Thread(target=supervisor.run)
    runner.start()
    procs = {name: ManagedProcess(name, tmp_path, role.marker) for name, role in roles.items()}
    try:
        wait_until(lambda: all(p.pid() for p in procs.values()))
        victim = procs["second"].pid()
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: read_state(tmp_path)["second"]["restarts"] == 1)
        record = read_state(tmp_path)["second"]
        assert record["last_exit"] == "signal SIGKILL"
        assert record["pid"] not in (None, victim) and alive(record["pid"])
        assert exits == [("second", victim)]  # the hook frees the dead pid's sessions
        assert read_state(tmp_path)["first"]["restarts"] == 0
    finally:
        supervisor.stop()
        runner.join(timeout=5)
    survivor = procs["first"].pid()
    os.kill(survivor, signal.SIGKILL)
    time.sleep(0.5)  # a running supervisor would have restarted it by now
    assert procs["first"].pid() is None
    assert read_state(tmp_path)["first"]["phase"] == "stopped"
    procs["second"].stop(timeout_s=5)
