"""``--client-cores``: the benchmark's client on some cores, every server on the others.

On this box pymilvus (the client) and the servers it measures share two cores, so a ratio
to the no-op ceiling also counts the CPU a server takes from its own client: the ceiling
spends ~0.3 ms of CPU a search, so its client has the cores nearly to itself. Users run
clients on other machines. Splitting the cores (Linux CPU affinity, every thread of every
process: the client's on the cores named, each server's tree on the rest, both systems
alike) shows what each server serves when it does not compete with its client.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterable

import psutil


def parse(text: str) -> set[int]:
    """``"0"`` or ``"0,1"`` or ``"0-2"``: CPU numbers, which must leave one for the servers."""
    cpus: set[int] = set()
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    available = os.sched_getaffinity(0)
    if not cpus or not cpus < available:
        raise SystemExit(f"--client-cores {text}: name some, not all, of CPUs {sorted(available)}")
    return cpus


def _pin_process(pid: int, cpus: set[int]) -> None:
    """Every thread of ``pid`` (affinity is per thread on Linux; new threads inherit it)."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except FileNotFoundError:
        return
    for tid in tids:
        with contextlib.suppress(ProcessLookupError):  # a thread that just ended
            os.sched_setaffinity(tid, cpus)


def pin_trees(pids: Iterable[int], cpus: set[int]) -> int:
    """``pids`` and all their descendants on ``cpus``; returns how many processes."""
    done: set[int] = set()
    for pid in pids:
        try:
            tree = [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
        except psutil.NoSuchProcess:
            continue
        for p in tree:
            if p not in done:
                _pin_process(p, cpus)
                done.add(p)
    return len(done)


class CoreSplit:
    """The client (this process) on ``client`` cores, servers on the rest of them."""

    def __init__(self, client: set[int]) -> None:
        self.client = client
        self.servers = os.sched_getaffinity(0) - client

    def pin_client(self) -> None:
        _pin_process(os.getpid(), self.client)

    def pin_servers(self, pids: Iterable[int]) -> int:
        return pin_trees(pids, self.servers)

    def __str__(self) -> str:
        return f"client on CPUs {sorted(self.client)}, servers on {sorted(self.servers)}"


def add_core_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--client-cores",
        default="",
        help="CPUs for the client, e.g. 0; every server runs on the others (benchmarks/cores.py)",
    )


def core_split(opts: argparse.Namespace) -> CoreSplit | None:
    """The split ``--client-cores`` asks for, with this process already on its cores (so
    servers it starts next begin there too, until ``pin_servers``); None without it."""
    if not opts.client_cores:
        return None
    split = CoreSplit(parse(opts.client_cores))
    split.pin_client()
    return split
