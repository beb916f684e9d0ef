"""What the local supervisor does, as a pure policy: events in, actions out, time injected.

``vectide up`` leaves a supervisor process running (services/infra/supervisor.py) that starts
the deployment's roles and restarts any that exits, as Kubernetes restarts a pod. The
decisions live here, apart from processes and clocks, so every rule is unit-tested:

- bring-up follows the plan's order: a role starts once every role before it has been ready
  once (the rootcoord before the proxies that call it, the active rootcoord before its
  standby), as ``vectide up`` always started them;
- a role that exits is started again after a back-off: ``backoff_initial_s``, multiplied by
  ``backoff_multiplier`` for each further exit in a row, at most ``backoff_max_s``; a role
  that ran ``stable_after_s`` before exiting starts its row again;
- after ``Shutdown`` (``vectide down``) nothing is started any more.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from enum import Enum


@dataclass(frozen=True)
class Backoff:
    """Delays between restarts of a role that keeps exiting (config ``supervisor.*``)."""

    initial_s: float = 0.5
    multiplier: float = 2.0
    max_s: float = 30.0
    stable_after_s: float = 60.0

    def delay(self, exits_in_a_row: int) -> float:
        """The wait before restart number ``exits_in_a_row`` (1 = first exit of a row)."""
        return min(self.max_s, self.initial_s * self.multiplier ** max(0, exits_in_a_row - 1))


class Phase(Enum):
    PENDING = "pending"  # not started yet: waits for the roles before it
    RUNNING = "running"
    WAITING = "waiting"  # exited; restarts once its back-off passed
    STOPPED = "stopped"  # shut down with the deployment


@dataclass(frozen=True)
class Exited:
    name: str
    at: float
    #: Popen's returncode: the exit status, or minus the signal number; None = unknown
    returncode: int | None


@dataclass(frozen=True)
class Ready:
    """The role answered its health check (only bring-up waits for it)."""

    name: str
    at: float


@dataclass(frozen=True)
class Tick:
    at: float


@dataclass(frozen=True)
class Shutdown:
    at: float


Event = Exited | Ready | Tick | Shutdown


@dataclass(frozen=True)
class Start:
    """Start ``name``; ``attempt`` 0 is its first start, 1.. its restarts."""

    name: str
    attempt: int
    #: why: "" for the first start, else the exit that caused this restart
    reason: str = ""
    delay_s: float = 0.0


@dataclass
class RoleRecord:
    """One role's life as the supervisor saw it (also what ``vectide status`` shows)."""

    name: str
    phase: Phase = Phase.PENDING
    ready_once: bool = False
    started_at: float = 0.0
    restarts: int = 0
    exits_in_a_row: int = 0
    restart_at: float = 0.0
    last_exit: str = ""
    last_exit_at: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "phase": self.phase.value,
            "restarts": self.restarts,
            "last_exit": self.last_exit,
            "last_exit_at": self.last_exit_at,
        }


def describe_exit(returncode: int | None) -> str:
    """``exit code 3``, ``signal SIGKILL`` or ``unknown``: what ``status`` prints."""
    if returncode is None:
        return "unknown"
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


@dataclass
class SupervisionPolicy:
    """The roles of one deployment, in bring-up order, and what to do on each event."""

    order: list[str]
    backoff: Backoff = field(default_factory=Backoff)
    shutting_down: bool = False

    def __post_init__(self) -> None:
        self.roles = {name: RoleRecord(name) for name in self.order}

    def handle(self, event: Event) -> list[Start]:
        """Apply ``event``; return the starts due now."""
        if isinstance(event, Shutdown):
            self.shutting_down = True
            for record in self.roles.values():
                record.phase = Phase.STOPPED
            return []
        if isinstance(event, Ready):
            self.roles[event.name].ready_once = True
        elif isinstance(event, Exited):
            self._exited(event)
        return self._due(event.at)

    def _exited(self, event: Exited) -> None:
        record = self.roles[event.name]
        if record.phase is not Phase.RUNNING:
            return  # a stale report: the role was started again since
        if event.at - record.started_at >= self.backoff.stable_after_s:
            record.exits_in_a_row = 0
        record.exits_in_a_row += 1
        record.phase = Phase.WAITING
        record.last_exit = describe_exit(event.returncode)
        record.last_exit_at = event.at
        record.restart_at = event.at + self.backoff.delay(record.exits_in_a_row)

    def _due(self, now: float) -> list[Start]:
        if self.shutting_down:
            return []
        starts = []
        for record in self.roles.values():
            if record.phase is Phase.WAITING and now >= record.restart_at:
                record.restarts += 1
                starts.append(self._start(record, now, record.last_exit))
        pending = self._next_pending()
        if pending is not None:
            starts.append(self._start(pending, now, ""))
        return starts

    def _next_pending(self) -> RoleRecord | None:
        """The first role not started yet, once every role before it was ready once."""
        for name in self.order:
            record = self.roles[name]
            if record.phase is Phase.PENDING:
                return record
            if not record.ready_once:
                return None
        return None

    def _start(self, record: RoleRecord, now: float, reason: str) -> Start:
        delay = now - record.last_exit_at if reason else 0.0
        record.phase = Phase.RUNNING
        record.started_at = now
        return Start(record.name, record.restarts, reason, round(delay, 3))
