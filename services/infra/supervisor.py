"""``vectide supervise``: the process that starts a deployment's roles and restarts them.

A thin adapter around services/infra/supervision.py: it polls its children, turns what it
sees into events (exited with a status or signal, ready, time passed), executes the policy's
starts, and records every role's restarts and last exit in ``{run_dir}/supervisor.json``
for ``vectide status``. ``vectide up`` starts it; ``vectide down`` stops it first, so no
role it stops is started again.

A role it saw die is certainly dead, so it also deletes that process's ZooKeeper sessions
and leader-lock nodes at once: the cluster then reassigns its shards and a standby takes
over without waiting for the session timeout (a stalled process is not dead: its session
only ends when ZooKeeper expires it).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from vectide.services.common.config import Config
from vectide.services.common.election import evict_contenders
from vectide.services.common.kv.base import KVError
from vectide.services.common.kv.zookeeper import cluster_root, connect_zookeeper
from vectide.services.common.session import SessionRegistry
from vectide.services.infra.process import ManagedProcess, alive
from vectide.services.infra.supervision import (
    Backoff,
    Event,
    Exited,
    Phase,
    Ready,
    Shutdown,
    Start,
    SupervisionPolicy,
    Tick,
)

log = logging.getLogger(__name__)

#: the supervisor's own command line contains this (its ManagedProcess marker)
MARKER = "vectide.services.cli supervise"
STATE_FILE = "supervisor.json"
#: how often a starting role's readiness is probed (a probe may open a connection)
PROBE_INTERVAL_S = 0.5


@dataclass
class Child:
    """A role process: our own child (exit status known) or one adopted from a previous
    supervisor (only its disappearance is known)."""

    pid: int
    started_wall: float
    popen: subprocess.Popen[bytes] | None = None

    def exited(self) -> tuple[bool, int | None]:
        if self.popen is not None:
            code = self.popen.poll()
            return code is not None, code
        return not alive(self.pid), None


def supervision_backoff(config: Config) -> Backoff:
    s = config.supervisor
    return Backoff(s.backoff_initial_s, s.backoff_multiplier, s.backoff_max_s, s.stable_after_s)


def read_state(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The roles' records as the supervisor last wrote them ({} when there are none)."""
    try:
        return json.loads((run_dir / STATE_FILE).read_text())["roles"]
    except (OSError, ValueError, KeyError):
        return {}


@dataclass(frozen=True)
class SupervisedRole:
    argv: list[str]
    #: a string in its command line (its ManagedProcess marker: the PID file's check)
    marker: str


#: called with a role's name, the pid that exited and when (wall clock) it had started
ExitHook = Callable[[str, int, float], None]


class Supervisor:
    """Runs the roles of one deployment until SIGTERM; ``probe(name, pid)`` says ready."""

    def __init__(
        self,
        config: Config,
        roles: dict[str, SupervisedRole],
        probe: Callable[[str, int], bool],
        on_exit: ExitHook | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._roles = roles
        self._probe = probe
        self._on_exit = on_exit or (lambda name, pid, started_wall: None)
        self._clock = clock
        self.policy = SupervisionPolicy(list(roles), supervision_backoff(config))
        self._children: dict[str, Child] = {}
        self._probed: dict[str, float] = {}
        self._done = threading.Event()
        self._state_file = config.run_dir / STATE_FILE

    def _process(self, name: str) -> ManagedProcess:
        return ManagedProcess(name, self._config.run_dir, self._roles[name].marker)

    def stop(self) -> None:
        """End ``run`` (what SIGTERM does)."""
        self._done.set()

    def run(self) -> None:
        """Supervise until ``stop`` (SIGTERM or SIGINT when on the main thread)."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self._done.set())
        self._adopt()
        try:
            while not self._done.is_set():
                self.step()
                self._done.wait(self._config.supervisor.poll_interval_s)
        finally:
            self.policy.handle(Shutdown(self._clock()))
            self._write_state()

    def _adopt(self) -> None:
        """Roles still running from before (a supervisor restarted by ``vectide up``)."""
        now = self._clock()
        for name in self._roles:
            pid = self._process(name).pid()
            if pid is not None:
                self._children[name] = Child(pid, time.time())
                record = self.policy.roles[name]
                record.phase, record.started_at = Phase.RUNNING, now

    def step(self) -> None:
        """One round: report exits and readiness to the policy, execute its starts."""
        now = self._clock()
        events: list[Event] = [*self._exits(now), *self._readiness(now), Tick(now)]
        changed = len(events) > 1
        for event in events:
            for start in self.policy.handle(event):
                self._start(start)
                changed = True
        if changed:
            self._write_state()

    def _exits(self, now: float) -> list[Exited]:
        out = []
        for name, child in list(self._children.items()):
            done, code = child.exited()
            if done:
                del self._children[name]
                self._on_exit(name, child.pid, child.started_wall)
                out.append(Exited(name, now, code))
        return out

    def _readiness(self, now: float) -> list[Ready]:
        out = []
        for name, child in self._children.items():
            if self.policy.roles[name].ready_once:
                continue
            if now - self._probed.get(name, -PROBE_INTERVAL_S) < PROBE_INTERVAL_S:
                continue
            self._probed[name] = now
            if self._probe(name, child.pid):
                out.append(Ready(name, now))
        return out

    def _start(self, start: Start) -> None:
        try:
            popen = self._process(start.name).spawn(self._roles[start.name].argv)
        except OSError as exc:
            log.error("role could not start", extra={"role": start.name, "error": str(exc)})
            self.policy.handle(Exited(start.name, self._clock(), None))
            return
        self._children[start.name] = Child(popen.pid, time.time(), popen)
        if start.reason:
            log.warning(
                "role restarted",
                extra={
                    "role": start.name,
                    "exit": start.reason,
                    "attempt": start.attempt,
                    "after_s": start.delay_s,
                    "pid": popen.pid,
                },
            )
        else:
            log.info("role started", extra={"role": start.name, "pid": popen.pid})

    def _write_state(self) -> None:
        roles = {}
        for name, record in self.policy.roles.items():
            child = self._children.get(name)
            roles[name] = {**record.to_dict(), "pid": child.pid if child else None}
        tmp = self._state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "roles": roles}, indent=2))
        tmp.replace(self._state_file)


class SessionEvictor:
    """Frees a dead role's ZooKeeper sessions and lock nodes (see the module docstring)."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._zk: KazooClient | None = None

    def __call__(self, name: str, pid: int, started_wall: float) -> None:
        zk = self._zookeeper()
        if zk is None:
            return
        root = cluster_root(self._config.zookeeper, self._config.cluster.name)
        try:
            sessions = SessionRegistry(zk, root).evict(pid, started_wall - 1)
            locks = evict_contenders(zk, root, pid)
        except Exception:
            log.warning("could not free a dead role's sessions", exc_info=True)
            return
        if sessions or locks:
            log.info(
                "freed a dead role's sessions",
                extra={"role": name, "sessions": len(sessions), "locks": len(locks)},
            )

    def _zookeeper(self) -> KazooClient | None:
        if self._zk is None:
            try:
                self._zk = connect_zookeeper(self._config.zookeeper, timeout_s=2.0)
            except KVError:
                log.warning("ZooKeeper unreachable: a dead role's sessions expire on their own")
        return self._zk

    def close(self) -> None:
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
