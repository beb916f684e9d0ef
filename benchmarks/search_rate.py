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
functions; raw files stay under ``.vectide/bench/profiles``. ``--thread-cpu`` splits each
server process's CPU a search by thread (names from ``py-spy dump``): gRPC's workers, its
poll thread, its C event engine, the standalone's background loops.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np

from benchmarks import datasets
from benchmarks.common import apply_set, log, stop_on_sigterm
from benchmarks.cores import add_core_options, core_split
from benchmarks.insert_rate import (
    cpu_seconds,
    insert_seconds,
    log_threads,
    print_profile,
    thread_cpu,
)
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
    add_search_options(p)
    p.add_argument("--queries", type=int, default=300, help="serial searches per round")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--seconds", type=float, default=5.0, help="concurrent phase per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--label", default="search", help="names the profile files")
    add_core_options(p)
    p.add_argument(
        "--thread-cpu", action="store_true", help="CPU per search of each standalone thread"
    )
    return p.parse_args(argv)


def add_search_options(p: argparse.ArgumentParser) -> None:
    """The data, search and deployment options of the search modules (``fresh_rate`` too)."""
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--ef", type=int, default=64)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--profile", action="store_true", help="py-spy the standalone process")
    p.add_argument("--py-spy", default="", help="py-spy options, e.g. '--gil'")
    p.add_argument("--no-datanode", action="store_true", help="Vectide without its data node")
    p.add_argument("--set", action="append", default=[], help="section.key=value (repeatable)")


Rates = dict[str, list[float]]


def serial_rate(uri: str, queries: np.ndarray, opts: argparse.Namespace) -> Phase:
    """Serial searches/s (1 / mean latency), and the hits for recall."""
    client = connect(uri)
    params = search_params("L2", "ef", opts.ef)
    latencies, hits = timed_searches(client, NAME, queries, opts.k, params)
    client.close()
    return Phase(len(latencies) / float(np.sum(latencies)), len(latencies), hits)


def concurrent_rate(uri: str, queries: np.ndarray, opts: argparse.Namespace) -> Phase:
    params = search_params("L2", "ef", opts.ef)
    make = milvus_searcher(uri, NAME, opts.k, params)
    summary = concurrent_throughput(make, queries, opts.clients, opts.seconds)
    if summary["errors"]:
        log(f"{summary['errors']} searches failed")
    return Phase(float(summary["qps"]), int(summary["n"]))  # type: ignore[arg-type]


@dataclass
class Phase:
    rate: float
    searches: int
    hits: list = field(default_factory=list)
    #: CPU ms a search of the server process, and of every process listed
    cpu_ms: float = 0.0
    all_cpu_ms: float = 0.0


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


@dataclass
class System:
    """A measured server: where pymilvus reaches it, the processes whose CPU it costs."""

    name: str
    uri: str
    #: name -> pid; the first is the server process itself
    pids: dict[str, int]
    target: VectideTarget | None = None


@dataclass
class Figures:
    """Per phase kind (serial, concurrent) and system: searches/s, and CPU ms a search of
    the server process and of every process listed (Vectide: broker, data node, ...)."""

    rates: dict[str, Rates] = field(default_factory=dict)
    cpu_ms: dict[str, Rates] = field(default_factory=dict)
    all_cpu_ms: dict[str, Rates] = field(default_factory=dict)

    def add(self, kind: str, system: str, rate: float, cpu: float, all_cpu: float) -> None:
        for table, value in ((self.rates, rate), (self.cpu_ms, cpu), (self.all_cpu_ms, all_cpu)):
            table.setdefault(kind, {}).setdefault(system, []).append(value)


def measure_phase(
    kind: str,
    system: System,
    run: Callable[[], Phase],
    profiled: Callable[[], Profile],
    by_thread: bool = False,
) -> Phase:
    """Run one phase on ``system``, profiled when it is Vectide; log what it cost
    (``by_thread``: the server process's CPU split by thread too)."""
    server = next(iter(system.pids))
    threads = thread_cpu(system.pids[server], by_thread)
    before = cpu_seconds(system.pids)
    served = insert_seconds(system.target, "Search") if system.target else 0.0
    with profiled() if system.target else nullcontext():
        phase = run()
    after = cpu_seconds(system.pids)
    if by_thread:
        after_threads = thread_cpu(system.pids[server], True)
        log_threads(
            system.pids[server], threads, after_threads, phase.searches, "search", system.name
        )
    phase.cpu_ms = (after[server] - before[server]) / phase.searches * 1000
    phase.all_cpu_ms = sum(after[n] - before[n] for n in after if n in before) / phase.searches
    phase.all_cpu_ms *= 1000
    if system.target:
        served = (insert_seconds(system.target, "Search") - served) / phase.searches * 1000
        log(
            f"{kind} {system.name}: {phase.rate:,.0f}/s, in the Search handler {served:.2f} ms a "
            f"search, CPU {phase.cpu_ms:.2f} ms a search ({phase.all_cpu_ms:.2f} ms with "
            "every process)"
        )
    else:
        log(f"{kind} {system.name}: {phase.rate:,.0f}/s, CPU {phase.cpu_ms:.2f} ms a search")
    return phase


def measure_round(
    r: int,
    systems: list[System],
    data: datasets.Dataset,
    opts: argparse.Namespace,
    profiled: Callable[[str], Profile],
    figures: Figures,
) -> None:
    queries = data.queries[: opts.queries]
    runs: dict[str, Callable[[str], Phase]] = {
        "serial": lambda uri: serial_rate(uri, queries, opts),
        "concurrent": lambda uri: concurrent_rate(uri, data.queries, opts),
    }
    for kind, run in runs.items():
        for system in systems:
            phase = measure_phase(
                kind,
                system,
                lambda run=run, system=system: run(system.uri),
                lambda kind=kind: profiled(f"{opts.label}-{kind}-{r}"),
                opts.thread_cpu,
            )
            figures.add(kind, system.name, phase.rate, phase.cpu_ms, phase.all_cpu_ms)
            if phase.hits and system.target:
                log(f"vectide recall@{opts.k} {recall(phase.hits, data.ground_truth, opts.k):.3f}")
    for kind in runs:
        ceil, vect = (figures.rates[kind][s.name][-1] for s in systems)
        log(f"round {r}: {kind} ceiling {ceil:,.0f}/s vectide {vect:,.0f}/s ({vect / ceil:.0%})")


def main(argv: list[str] | None = None) -> None:
    stop_on_sigterm()
    opts = parse_args(argv)
    data = datasets.synthetic(opts.rows, opts.dim, max(opts.queries, 200), opts.k)
    ceiling, vectide = null_target(), vectide_target("searchrate")
    apply_set(vectide.config, opts.set)
    figures = Figures()
    split = core_split(opts)
    ceiling.start()
    try:
        vectide.start_infra()
        vectide.deployment.up("standalone", datanode=not opts.no_datanode)
        found = vectide.processes()
        if split:
            pinned = split.pin_servers([*found.values(), *ceiling.processes().values()])
            log(f"{split} ({pinned} server processes)")
        pid = found["standalone"]
        servers = [p for name, p in found.items() if not name.startswith("infra:")]
        deployment = {"standalone": pid, **{n: p for n, p in found.items() if p != pid}}
        deployment.pop("supervisor", None)  # its roles are its children: counted on their own
        prepare_ceiling(ceiling.uri, opts.dim)
        prepare_vectide(vectide.uri, data, servers)
        systems = [
            System("ceiling", ceiling.uri, ceiling.processes()),
            System("vectide", vectide.uri, deployment, vectide),
        ]
        for system in systems:  # warm-up: connections, caches
            serial_rate(system.uri, data.queries[:20], opts)

        def profiled(label: str) -> Profile:
            path = RUN_DIR / "profiles" / f"{label}.txt"
            return Profile(pid, path, opts.profile, opts.py_spy.split())

        for r in range(opts.rounds):
            measure_round(r, systems, data, opts, profiled, figures)
    finally:
        vectide.stop()
        ceiling.stop()
    report(figures)
    if opts.profile:
        for kind in ("serial", "concurrent"):
            print_profile(RUN_DIR / "profiles" / f"{opts.label}-{kind}-{opts.rounds - 1}.txt")


def report(figures: Figures) -> None:
    for kind, by_system in figures.rates.items():
        ceil, vect = by_system["ceiling"], by_system["vectide"]
        each = ", ".join(f"{v / c:.0%}" for c, v in zip(ceil, vect, strict=True))
        print(f"{kind} ceiling searches/s: {', '.join(f'{x:,.0f}' for x in ceil)}")
        print(f"{kind} vectide searches/s: {', '.join(f'{x:,.0f}' for x in vect)}")
        c, v = statistics.median(ceil), statistics.median(vect)
        print(f"{kind} medians: ceiling {c:,.0f}, vectide {v:,.0f}: {v / c:.0%} ({each})")
        cpu = figures.cpu_ms[kind]
        every = statistics.median(figures.all_cpu_ms[kind]["vectide"])
        print(
            f"{kind} server CPU ms a search (medians): ceiling "
            f"{statistics.median(cpu['ceiling']):.2f}, vectide standalone "
            f"{statistics.median(cpu['vectide']):.2f} ({every:.2f} with every process)"
        )


if __name__ == "__main__":
    main()
