"""The TSO on a real ZooKeeper: concurrency, and restarts in new processes."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading

from tests.infra import REPO
from vectide.services.common.tso import TSOAllocator


def run_child(infra, root: str, offset_ms: int, count: int) -> list[int]:
    out = subprocess.run(
        [sys.executable, "-m", "tests.integration.tso_child", root, str(offset_ms), str(count)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        timeout=60,
        env={**os.environ, **infra.to_env()},
    )
    return [int(line) for line in out.stdout.split()]


def test_threads_get_unique_increasing_stamps_with_zookeeper_persistence(zk_kv):
    tso = TSOAllocator(zk_kv, window_ms=50)  # small window: the bound is re-persisted often
    tso.initialize()
    results: list[list[int]] = [[] for _ in range(8)]
    stop = threading.Event()

    def ticker() -> None:
        while not stop.wait(0.05):
            tso.update()

    def worker(out: list[int]) -> None:
        for _ in range(10_000):
            out.append(tso.alloc())

    tick = threading.Thread(target=ticker)
    tick.start()
    threads = [threading.Thread(target=worker, args=(r,)) for r in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    tick.join()
    for r in results:
        assert all(a < b for a, b in itertools.pairwise(r))
    assert len({ts for r in results for ts in r}) == 80_000


def test_restarts_never_go_backwards_even_with_the_clock_set_back(infra, zk_root):
    first = run_child(infra, zk_root, 0, 2000)
    back = run_child(infra, zk_root, -600_000, 2000)  # the clock is 10 minutes behind
    again = run_child(infra, zk_root, 0, 2000)
    for run in (first, back, again):
        assert all(a < b for a, b in itertools.pairwise(run))
    assert first[-1] < back[0]
    assert back[-1] < again[0]


def test_a_killed_allocator_is_succeeded_by_a_higher_one(infra, zk_root):
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.tso_child", zk_root, "0", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, **infra.to_env()},
    )
    seen = []
    for line in child.stdout:
        seen.append(int(line))
        if len(seen) >= 5000:
            break
    child.kill()  # SIGKILL mid-allocation: no clean shutdown
    child.wait()
    seen += [int(line) for line in child.stdout.read().split()]
    successor = run_child(infra, zk_root, -60_000, 10)
    assert successor[0] > max(seen)
