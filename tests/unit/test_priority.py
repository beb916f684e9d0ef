"""Background threads run niced, serving threads do not (services/common/priority.py)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from vectide.services.common.periodic import Periodic
from vectide.services.common.priority import lower_process, lower_thread


def own_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def in_thread(fn: Callable[[], object]) -> object:
    """fn's result, run on a throwaway thread (the test runner's thread is never niced)."""
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join()
    return out[0]


def test_lowered_thread_only_and_inherited_by_the_threads_it_starts() -> None:
    before = own_nice()

    def lowered() -> tuple[bool, int, int]:
        done = lower_thread(before + 7)
        return done, own_nice(), in_thread(own_nice)  # type: ignore[return-value]

    done, nice, child = in_thread(lowered)  # type: ignore[misc]
    assert done and nice == before + 7
    assert child == before + 7  # faiss's OpenMP workers, started by the builder thread
    assert own_nice() == before


def test_zero_leaves_the_thread_alone_and_a_lower_value_never_raises_priority() -> None:
    before = own_nice()
    assert in_thread(lambda: (lower_thread(0), own_nice())) == (False, before)
    both = in_thread(lambda: (lower_thread(before + 9), lower_thread(before + 3), own_nice()))
    assert both == (True, True, before + 9)


def test_process_sets_its_autogroup_too(tmp_path: Path) -> None:
    group = tmp_path / "autogroup"
    group.write_text("0")
    assert in_thread(lambda: lower_process(12, group))
    assert group.read_text() == "12"
    assert in_thread(lambda: lower_process(12, tmp_path / "absent" / "autogroup"))


def test_periodic_runs_its_work_at_the_given_nice() -> None:
    seen: dict[str, int] = {}
    both = threading.Barrier(3)

    def work(name: str) -> Callable[[], None]:
        def run() -> None:
            if name not in seen:
                seen[name] = own_nice()
                both.wait(5)

        return run

    base = own_nice()
    loop = Periodic("niced", 0.01, work("niced"), nice=base + 5).start()
    plain = Periodic("plain", 0.01, work("plain")).start()
    try:
        both.wait(5)
    finally:
        loop.stop()
        plain.stop()
    assert seen == {"niced": base + 5, "plain": base}
