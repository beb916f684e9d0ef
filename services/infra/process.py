"""A background process owned through a PID file: start, check, stop (TERM, then KILL).

The PID file alone is not trusted: a recycled PID could belong to anything, so a process
counts as ours only if its command line still contains the marker we started it with.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass
class ManagedProcess:
    name: str
    run_dir: Path
    #: a string that appears in the process's command line (binary or main class)
    marker: str

    @property
    def pid_file(self) -> Path:
        return self.run_dir / "pids" / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.run_dir / "logs" / f"{self.name}.log"

    def pid(self) -> int | None:
        """The PID if our process is alive; clears a stale PID file."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        if _cmdline_contains(pid, self.marker) or _starting_child(pid):
            return pid
        self.pid_file.unlink(missing_ok=True)
        return None

    def start(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> int:
        return self.spawn(argv, env, cwd).pid

    def spawn(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> subprocess.Popen[bytes]:
        """Start the process and keep its handle: a parent that polls it learns its exit
        status or signal (the supervisor's restart reasons)."""
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                cwd=cwd,
                start_new_session=True,  # own process group: stopped as one, immune to ^C
            )
        self.pid_file.write_text(f"{proc.pid}\n")
        return proc

    def exited_early(self) -> bool:
        """True once a started process has died (reaps it if it is our child)."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return True
        return not alive(pid)

    def stop(self, timeout_s: float = 15.0) -> bool:
        """Stop the process group; True if something was running."""
        pid = self.pid()
        if pid is None:
            return False
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and alive(pid):
            time.sleep(0.05)
        if alive(pid):
            _signal_group(pid, signal.SIGKILL)
            while alive(pid):
                time.sleep(0.05)
        self.pid_file.unlink(missing_ok=True)
        return True

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie still answers kill(0)
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def _cmdline_contains(pid: int, marker: str) -> bool:
    if not alive(pid):
        return False
    try:
        return marker in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False


def _starting_child(pid: int) -> bool:
    """Our own live child: between fork and exec its command line is still ours, not the
    marker's (a start-up check in that window took it for a stranger, deleted the PID file,
    and left the process running, unowned, on its ports)."""
    if not alive(pid):
        return False
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return False
    return int(fields[1]) == os.getpid()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, sig)
