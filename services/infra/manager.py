"""``vectide infra up|down|status``: the managed services as one unit.

``up`` is idempotent (what already runs is left alone) and returns only once every service,
managed or external, answers its health check. ``down`` stops what ``up`` started, in reverse
order, and waits for each process to exit (SeaweedFS loses volumes if restarted over itself).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from vectide.services.common.config import Config
from vectide.services.infra.components import Component, InfraError, components
from vectide.services.infra.process import ManagedProcess

log = logging.getLogger(__name__)

Progress = Callable[[str], None]


@dataclass
class ComponentStatus:
    name: str
    endpoint: str
    managed: bool
    pid: int | None
    healthy: bool

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class InfraManager:
    def __init__(
        self,
        config: Config,
        progress: Progress | None = None,
        managed: list[Component] | None = None,
    ) -> None:
        self.config = config
        self.components = components(config) if managed is None else managed
        self._progress = progress or (lambda line: log.info(line))

    def process(self, component: Component) -> ManagedProcess:
        return ManagedProcess(component.name, self.config.run_dir, component.marker)

    def up(self) -> list[ComponentStatus]:
        for component in self.components:
            self._up_one(component)
        return self.status()

    def _up_one(self, component: Component) -> None:
        proc = self.process(component)
        if not component.managed:
            self._wait_healthy(component, proc=None, what="external")
            return
        if proc.pid() is not None:
            self._wait_healthy(component, proc, what="running")
            return
        if component.endpoint.accepts():
            raise InfraError(
                f"{component.name}: {component.endpoint} is already in use by a process vectide "
                f"did not start. Stop it, or set {component.section}.managed=false to use it."
            )
        component.prepare()
        pid = proc.start(component.argv(), env=component.env(), cwd=component.data_dir)
        self._progress(f"{component.name}: started pid {pid} on {component.endpoint}")
        self._wait_healthy(component, proc, what="started")

    def _wait_healthy(self, component: Component, proc: ManagedProcess | None, what: str) -> None:
        timeout = self.config.infra.startup_timeout_s
        start = time.monotonic()
        next_report = start + 5
        while not component.healthy():
            now = time.monotonic()
            if proc is not None and proc.exited_early():
                raise InfraError(
                    f"{component.name} exited during start-up; last log lines "
                    f"({proc.log_file}):\n{proc.log_tail()}"
                )
            if now - start > timeout:
                raise InfraError(
                    f"{component.name} ({what}) did not answer on {component.endpoint} "
                    f"within {timeout:.0f}s"
                    + (f"; log {proc.log_file}:\n{proc.log_tail()}" if proc else "")
                )
            if now >= next_report:
                self._progress(f"{component.name}: waiting ({now - start:.0f}s)")
                next_report = now + 5
            time.sleep(0.1)
        self._progress(
            f"{component.name}: ready on {component.endpoint} "
            f"({what}, {time.monotonic() - start:.1f}s)"
        )

    def down(self) -> list[str]:
        stopped = []
        for component in reversed(self.components):
            if self.process(component).stop():
                stopped.append(component.name)
                self._progress(f"{component.name}: stopped")
        return stopped

    def status(self) -> list[ComponentStatus]:
        return [
            ComponentStatus(
                name=c.name,
                endpoint=str(c.endpoint),
                managed=c.managed,
                pid=self.process(c).pid(),
                healthy=c.healthy(),
            )
            for c in self.components
        ]
