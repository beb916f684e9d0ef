"""Small helpers shared by the phases: progress lines, percentiles, the repository root."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
_START = time.monotonic()


def log(message: str) -> None:
    """A progress line with the time since the run started (long phases print several)."""
    print(f"[{time.monotonic() - _START:7.1f}s] {message}", file=sys.stderr, flush=True)


def percentile_ms(samples_s: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of latencies given in seconds, in milliseconds."""
    if not len(samples_s):
        return float("nan")
    return float(np.percentile(np.asarray(samples_s) * 1000.0, q))


def latency_summary(samples_s: Sequence[float]) -> dict[str, float]:
    """p50/p99/mean in ms and the serial rate those latencies imply."""
    total = float(np.sum(samples_s)) if len(samples_s) else 0.0
    return {
        "n": len(samples_s),
        "p50_ms": percentile_ms(samples_s, 50),
        "p99_ms": percentile_ms(samples_s, 99),
        "mean_ms": total / len(samples_s) * 1000.0 if len(samples_s) else float("nan"),
        "qps": len(samples_s) / total if total > 0 else float("nan"),
    }


def rounded(value: object, digits: int = 4) -> object:
    """JSON-friendly figures: floats rounded, NaN as None, containers recursed."""
    if isinstance(value, float):
        return None if value != value else round(value, digits)
    if isinstance(value, dict):
        return {str(k): rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v, digits) for v in value]
    if isinstance(value, np.floating | np.integer):
        return rounded(value.item(), digits)
    return value


def own_tree(pid: int, listed: set[int] | frozenset[int] = frozenset()) -> list[Any]:
    """``pid``'s process and its descendants, without those under another listed process: a
    server's workers count with it, the supervisor's roles (its children) count on their own."""
    import psutil

    proc = psutil.Process(pid)
    tree = [proc]
    for child in proc.children(recursive=True):
        try:
            chain = [child, *child.parents()]
        except psutil.Error:
            continue
        above = []
        for node in chain:
            if node.pid == pid:
                break
            above.append(node.pid)
        if not any(other in listed for other in above if other != pid):
            tree.append(child)
    return tree


def apply_set(config: Any, items: list[str]) -> None:
    """``--set section.key=value`` options (repeatable) onto a Vectide configuration."""
    from vectide.services.common.config import apply_overrides

    for item in items:
        key, _, value = item.partition("=")
        section, _, name = key.partition(".")
        apply_overrides(config, {section: {name: value}}, source="--set")


def stop_on_sigterm() -> None:
    """A SIGTERM (``kill``, ``timeout``) unwinds like ^C, so the ``finally`` blocks that stop
    the bench's deployments run instead of leaving their processes behind."""
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
