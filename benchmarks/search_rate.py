"""``python -m benchmarks.search_rate``: pymilvus searches/s, Vectide beside the ceiling.

The search figures of ``make bench`` (issue 15 item 6) alone, in a few minutes: the no-op
server (``benchmarks.nullserver``) and a standalone Vectide (with its Spark data node, as
``vectide up`` runs it) both started; Vectide gets ``--rows`` synthetic rows in an HNSW
collection (M=16, efConstruction=128, as ``make bench``), flushed, its index builds settled
and the Bounded staleness passed. Then ``--rounds`` rounds, each measuring the ceiling and
then Vectide back to back, so both see the same machine load: serial searches (one query
per call, k=10, ``output_fields=["id"]``, Bounded, ``ef``) and ``--clients`` threads (a
``MilvusClient`` each) searching back to back for ``--seconds``. It prints every round, the
medians, and Vectide's share of the ceiling.

``--profile`` samples the standalone process with py-spy during Vectide's searches (``--py-spy``
options, e.g. ``--gil`` for only the thread holding the interpreter lock) and prints the top
functions; raw files stay under ``.vectide/bench/profiles``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext

import numpy as np

from benchmarks import datasets
from benchmarks.common import apply_set, log
from benchmarks.insert_rate import insert_seconds, print_profile
from benchmarks.measure import concurrent_throughput, milvus_searcher
from benchmarks.milvus_ops import (
    connect,
    cpu_percent,
    create_collection,
    ingest,
    recall,
    search_params,
    timed_searches,
    wait_settled,
)
from benchmarks.profiling import Profile
from benchmarks.targets import RUN_DIR, VectideTarget, null_target, vectide_target

NAME = "search_rate"
#: Bounded reads see what was written this long ago (Milvus's graceful time)
BOUNDED_STALENESS_S = 5.5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--queries", type=int, default=300, help="serial searches per round")
    p.add_argument("--ef", type=int, default=64)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--seconds", type=float, default=5.0, help="concurrent phase per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--profile", action="store_true", help="py-spy the standalone process")
    p.add_argument("--label", default="search", help="names the profile files")
    p.add_argument("--py-spy", default="", help="py-spy options, e.g. '--gil'")
    p.add_argument("--no-datanode", action="store_true", help="Vectide without its data node")
    p.add_argument("--set", action="append", default=[], help="section.key=value (repeatable)")
    return p.parse_args(argv)


Rates = dict[str, list[float]]


def serial_rate(uri: str, queries: np.ndarray, opts: argparse.Namespace) -> tuple[float, list]:
    """Serial searches/s (1 / mean latency) and the hits, for recall."""
    client = connect(uri)
    params = search_params("L2", "ef", opts.ef)
    latencies, hits = timed_searches(client, NAME, queries, opts.k, params)
    client.close()
    return len(latencies) / float(np.sum(latencies)), hits


def concurrent_rate(uri: str, queries: np.ndarray, opts: argparse.Namespace) -> float:
    params = search_params("L2", "ef", opts.ef)
    make = milvus_searcher(uri, NAME, opts.k, params)
    summary = concurrent_throughput(make, queries, opts.clients, opts.seconds)
    if summary["errors"]:
        log(f"{summary['errors']} searches failed")
    return float(summary["qps"])  # type: ignore[arg-type]


def prepare_vectide(uri: str, data: datasets.Dataset, pids: list[int]) -> None:
    """Fill, flush and settle the collection: the indexed state ``make bench`` searches."""
    client = connect(uri)
    idle = cpu_percent(pids, 3.0)
    create_collection(client, NAME, data.dim, data.metric, "HNSW")
    res = ingest(client, NAME, data.vectors, 1000, False, "vectide")
    last_insert = time.monotonic()
    log(f"vectide: {res.rows_per_s:,.0f} rows/s; flushing")
    t0 = time.monotonic()
    client.flush(NAME)
    log(f"vectide: flushed in {time.monotonic() - t0:.1f} s; waiting for index builds")
    waited = wait_settled(client, [NAME], pids, idle, "vectide")
    log(f"vectide: settled after {waited:.1f} s")
    time.sleep(max(0.0, BOUNDED_STALENESS_S - (time.monotonic() - last_insert)))
    client.close()


def prepare_ceiling(uri: str, dim: int) -> None:
    """The no-op server needs the collection to exist (pymilvus describes it)."""
    client = connect(uri)
    create_collection(client, NAME, dim, "L2", "HNSW")
    client.close()


def measure_round(
    r: int,
    uris: dict[str, str],
    target: VectideTarget,
    data: datasets.Dataset,
    opts: argparse.Namespace,
    profiled: Callable[[str], Profile],
    rates: dict[str, Rates],
) -> None:
    queries = data.queries[: opts.queries]
    for system, uri in uris.items():
        served = insert_seconds(target, "Search") if system == "vectide" else 0.0
        with profiled(f"{opts.label}-serial-{r}") if system == "vectide" else nullcontext():
            rate, hits = serial_rate(uri, queries, opts)
        rates["serial"][system].append(rate)
        if system == "vectide":
            served = (insert_seconds(target, "Search") - served) / len(queries) * 1000
            found = recall(hits, data.ground_truth, opts.k)
            log(
                f"round {r}: vectide recall@{opts.k} {found:.3f}; {1000 / rate:.2f} ms a "
                f"search, {served:.2f} ms of it in the proxy's Search handler"
            )
    for system, uri in uris.items():
        with profiled(f"{opts.label}-concurrent-{r}") if system == "vectide" else nullcontext():
            rates["concurrent"][system].append(concurrent_rate(uri, data.queries, opts))
    for kind in ("serial", "concurrent"):
        ceil, vect = rates[kind]["ceiling"][-1], rates[kind]["vectide"][-1]
        log(f"round {r}: {kind} ceiling {ceil:,.0f}/s vectide {vect:,.0f}/s ({vect / ceil:.0%})")


def main(argv: list[str] | None = None) -> None:
    opts = parse_args(argv)
    data = datasets.synthetic(opts.rows, opts.dim, max(opts.queries, 200), opts.k)
    ceiling, vectide = null_target(), vectide_target("searchrate")
    apply_set(vectide.config, opts.set)
    rates: dict[str, Rates] = {
        kind: {"ceiling": [], "vectide": []} for kind in ("serial", "concurrent")
    }
    ceiling.start()
    try:
        vectide.start_infra()
        vectide.deployment.up("standalone", datanode=not opts.no_datanode)
        found = vectide.processes()
        pid = found.get("standalone")
        servers = [p for name, p in found.items() if not name.startswith("infra:")]
        prepare_ceiling(ceiling.uri, opts.dim)
        prepare_vectide(vectide.uri, data, servers)
        uris = {"ceiling": ceiling.uri, "vectide": vectide.uri}
        for uri in uris.values():  # warm-up: connections, caches
            serial_rate(uri, data.queries[:20], opts)

        def profiled(label: str) -> Profile:
            path = RUN_DIR / "profiles" / f"{label}.txt"
            return Profile(pid, path, opts.profile, opts.py_spy.split())

        for r in range(opts.rounds):
            measure_round(r, uris, vectide, data, opts, profiled, rates)
    finally:
        vectide.stop()
        ceiling.stop()
    report(rates)
    if opts.profile:
        for kind in ("serial", "concurrent"):
            print_profile(RUN_DIR / "profiles" / f"{opts.label}-{kind}-{opts.rounds - 1}.txt")


def report(rates: dict[str, Rates]) -> None:
    for kind, by_system in rates.items():
        ceil, vect = by_system["ceiling"], by_system["vectide"]
        each = ", ".join(f"{v / c:.0%}" for c, v in zip(ceil, vect, strict=True))
        print(f"{kind} ceiling searches/s: {', '.join(f'{x:,.0f}' for x in ceil)}")
        print(f"{kind} vectide searches/s: {', '.join(f'{x:,.0f}' for x in vect)}")
        c, v = statistics.median(ceil), statistics.median(vect)
        print(f"{kind} medians: ceiling {c:,.0f}, vectide {v:,.0f}: {v / c:.0%} ({each})")


if __name__ == "__main__":
    main()
