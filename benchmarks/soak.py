"""Freshness over a long run: does insert -> visible grow as a deployment keeps ingesting?

Issue 15 asks for insert-ack -> visible to an Eventually query at p50 <= 30 ms, stable over a
30-minute run. ``make bench`` measures freshness once, at the end of a 10-minute run; this
module keeps a standalone deployment ingesting at a steady rate (another client, in
``--batch``-row inserts) for ``--minutes`` and, in every ``--window``, times freshness
trials the way the bench does (``measure.freshness``: one row inserted, Eventually queries
back to back until it shows; Strong searches on alternate trials) and the CPU each process
spent. Growth shows as a rising p50 or CPU from window to window.

``python -m benchmarks.soak [--minutes 30] [--window 300] [--rate 1000]``; uses the bench's
ports (``VECTIDE_BENCH_PORT_SHIFT`` moves them).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

from benchmarks import measure
from benchmarks.common import apply_set, log, rounded, stop_on_sigterm
from benchmarks.datasets import synthetic
from benchmarks.idle import measure as cpu_window
from benchmarks.milvus_ops import connect, create_collection, row_batches
from benchmarks.targets import vectide_target


def window(client: Any, name: str, dim: int, pids: dict[str, int], seconds: float) -> dict:
    """Freshness trials spread over ``seconds``, beside every process's CPU meanwhile."""
    started = time.perf_counter()
    trials: list[dict[str, Any]] = []

    def run_trials() -> None:
        while time.perf_counter() - started < seconds - 5:
            trials.append(measure.freshness(client, name, dim, 2))
            time.sleep(2.0)

    worker = threading.Thread(target=run_trials, daemon=True)
    worker.start()
    cpu = cpu_window(pids, seconds, 1)
    worker.join()
    eventual = [t["eventually_query"]["p50_ms"] for t in trials if t["eventually_query"]["n"]]
    strong = [t["strong_search"]["p50_ms"] for t in trials if t["strong_search"]["n"]]
    return {
        "eventually_p50_ms": _median(eventual),
        "eventually_max_ms": max(eventual, default=None),
        "strong_p50_ms": _median(strong),
        "trials": len(trials),
        "not_visible": sum(t["eventually_query"]["not_visible"] for t in trials),
        "cpu_percent": {**cpu.percent, "total": cpu.total},
    }


def _median(values: list[float]) -> float | None:
    return sorted(values)[len(values) // 2] if values else None


def main(argv: list[str] | None = None) -> None:
    stop_on_sigterm()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--window", type=float, default=300.0, help="seconds per measured window")
    p.add_argument("--rate", type=float, default=1000.0, help="rows/s of the steady writer")
    p.add_argument("--set", action="append", default=[], help="section.key=value (repeatable)")
    p.add_argument("--json", help="write the figures here")
    a = p.parse_args(argv)
    target = vectide_target(f"soak-{int(time.time())}")
    target.config.infra.startup_timeout_s = 300  # Spark starts slowly on a busy box
    apply_set(target.config, a.set)
    data = synthetic(20_000, 128, 10, 10)
    results: list[dict[str, Any]] = []
    try:
        target.start()
        client = connect(target.uri)
        create_collection(client, "soak", data.dim, data.metric, "FLAT")
        for rows in row_batches(data.vectors[:1000], 1000, False):
            client.insert("soak", rows)
        writer = measure.BackgroundIngest(
            target.uri, "soak", data.vectors, 1_000_000, a.rate
        ).start()
        try:
            for i in range(max(1, int(a.minutes * 60 / a.window))):
                got = window(client, "soak", data.dim, target.processes(), a.window)
                results.append(got)
                log(
                    f"soak window {i + 1}: Eventually p50 {got['eventually_p50_ms']} ms "
                    f"(max {got['eventually_max_ms']}), Strong p50 {got['strong_p50_ms']} ms, "
                    f"CPU {got['cpu_percent']['total']:.1f} % of a core, "
                    f"{got['not_visible']} not visible"
                )
        finally:
            ingest = writer.stop()
        log(f"soak: writer {ingest['rows_per_s']:,.0f} rows/s, {ingest['errors']} failed calls")
    finally:
        target.stop()
    out = {"rate": a.rate, "window_s": a.window, "windows": results, "writer": ingest}
    print(json.dumps(rounded(out), indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rounded(out), f, indent=1)


if __name__ == "__main__":
    main()
