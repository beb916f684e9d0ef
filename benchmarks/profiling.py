"""Optional py-spy sampling of a server process during a phase (``--profile``).

py-spy attaches from outside (``py-spy record --pid``), non-blocking, so the server runs
unmodified. The raw (collapsed-stack) output is summarised into the functions with the most
samples on-CPU at the top of the stack (self) and anywhere in it (inclusive), which is what
the README's findings cite. Raw files stay under ``.vectide/bench/profiles`` (too big to keep
with the results).
"""

from __future__ import annotations

import collections
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from benchmarks.common import REPO, log


def py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Profile:
    """``with Profile(pid, path):`` samples ``pid`` at 100 Hz while the block runs."""

    def __init__(
        self,
        pid: int | None,
        path: Path,
        enabled: bool = True,
        options: Sequence[str] = (),
    ) -> None:
        """``options``: more py-spy flags, e.g. ``--threads`` (a root frame per thread),
        ``--idle`` (waiting threads too), ``--gil`` (only the thread holding the GIL)."""
        self.pid = pid
        self.options = list(options)
        self.path = path
        self.enabled = enabled and pid is not None and py_spy() is not None
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Profile:
        if not self.enabled:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        argv = [str(py_spy()), "record", "--pid", str(self.pid), "--format", "raw"]
        argv += ["--rate", "100", "--nonblocking", "--output", str(self.path)]
        argv += self.options
        with open(self.path.with_suffix(".log"), "wb") as out:
            self._proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        time.sleep(0.5)  # attached before the phase starts
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log(f"profile written to {self.path}")


def summarise(path: Path, top: int = 15) -> dict[str, object]:
    """Top functions by self and inclusive samples in a py-spy raw (collapsed) file."""
    self_counts: collections.Counter[str] = collections.Counter()
    incl_counts: collections.Counter[str] = collections.Counter()
    total = 0
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return {}
    for line in lines:
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_short(f) for f in stack.split(";")]
        total += count
        self_counts[frames[-1]] += count
        for frame in set(frames):
            incl_counts[frame] += count
    if not total:
        return {"samples": 0}

    def share(counter: collections.Counter[str]) -> list[dict[str, object]]:
        return [{"function": f, "share": round(c / total, 4)} for f, c in counter.most_common(top)]

    return {"samples": total, "self": share(self_counts), "inclusive": share(incl_counts)}


def _short(frame: str) -> str:
    """``fn (path/to/services/x/y.py:12)`` -> ``fn (services/x/y.py:12)``."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    for marker in ("/site-packages/", f"{REPO}/", "/lib/python3.11/"):
        if marker in where:
            where = where.split(marker, 1)[1]
            break
    return f"{name} ({where})" if where else name
