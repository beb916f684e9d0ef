"""``python -m benchmarks.fresh_rate``: search over just-inserted rows against the settled rate.

The fresh-search figure of ``make bench`` (issue 15 item 1) alone, in a few minutes: a
standalone Vectide (with its Spark data node, as ``vectide up`` runs it) gets ``--rows``
synthetic rows through pymilvus into an HNSW collection (M=16, efConstruction=128, created
with its index and loaded before any row, 1,000-row numpy inserts, as ``make bench``). Right
after the Strong count that sees every row, before any flush, serial searches (one query per
call, k=10, ``output_fields=["id"]``, Bounded, ef=64: the bench's ``fresh_search``) run for
``--seconds``: the rows are growing data then, searched through the query node's interim
indexes. Then (unless ``--no-settle``) the collection is flushed, its index builds settle,
and the same searches run again: the settled rate the fresh one is a share of (the target is
>= 50 % at recall >= 0.95).

Per phase it prints searches/s, p50/p99, recall@k, CPU ms a search of the standalone process
and of every process, and each process's CPU share meanwhile (what still works on the rows).
``--rounds N`` repeats insert + fresh search on a new collection in the same deployment.
``--profile`` samples the standalone process with py-spy during the fresh searches
(``--py-spy`` options) and prints the top functions. ``--set section.key=value`` changes
Vectide's configuration (A/B runs of a setting, alternated).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from benchmarks import datasets
from benchmarks.common import apply_set, latency_summary, log, stop_on_sigterm
from benchmarks.insert_rate import (
    add_nice_options,
    cpu_seconds,
    cpu_share,
    print_profile,
    set_autogroup_nice,
)
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
from benchmarks.search_rate import BOUNDED_STALENESS_S, add_search_options
from benchmarks.targets import RUN_DIR, vectide_target

NAME = "fresh_rate"
#: the searches answered in a phase at least, whatever ``--seconds`` says
MIN_QUERIES = 30


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_search_options(p)
    p.add_argument("--queries", type=int, default=3000, help="distinct queries (at most one each)")
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=10.0, help="serial searches per phase")
    p.add_argument("--rounds", type=int, default=1, help="insert + fresh search, repeated")
    p.add_argument("--no-settle", action="store_true", help="skip flush + settled searches")
    add_nice_options(p, 10)
    p.add_argument(
        "--like-bench",
        action="store_true",
        help="first fill a FLAT (list vectors) and an IVF_FLAT collection as make bench does, "
        "so their persistence and interim builds run beside the fresh searches",
    )
    return p.parse_args(argv)


@dataclass
class Phase:
    """One phase's serial searches: rate, latencies, recall and what they cost."""

    name: str
    summary: dict[str, float]
    recall: float
    cpu_ms: float
    all_cpu_ms: float
    shares: str = ""
    #: mean latency (ms) of each tenth of the searches, in order: whether the first ones,
    #: right after the last insert, pay for work still pending
    tenths: list[float] = field(default_factory=list)

    def line(self) -> str:
        s = self.summary
        return (
            f"{self.name}: {s['qps']:,.0f}/s (n={s['n']}), p50 {s['p50_ms']:.2f} ms, p99 "
            f"{s['p99_ms']:.2f} ms, recall {self.recall:.3f}; CPU ms a search: standalone "
            f"{self.cpu_ms:.2f}, every process {self.all_cpu_ms:.2f}; CPU % meanwhile: "
            f"{self.shares}; mean ms by tenth: {' '.join(f'{t:.1f}' for t in self.tenths)}"
        )


@dataclass
class Figures:
    fresh: list[Phase] = field(default_factory=list)
    settled: Phase | None = None


def searches(
    client: object,
    data: datasets.Dataset,
    opts: argparse.Namespace,
    pids: dict[str, int],
    name: str,
    profile: Profile | None = None,
) -> Phase:
    """Serial searches for ``opts.seconds`` (at least ``MIN_QUERIES``), measured."""
    params = search_params(data.metric, "ef", opts.ef)
    server = next(iter(pids))
    before, started = cpu_seconds(pids), time.monotonic()
    with profile or Profile(None, RUN_DIR / "none.txt", False):
        latencies, hits = timed_searches(
            client,
            NAME,
            data.queries,
            opts.k,
            params,
            budget_s=opts.seconds,
            min_queries=MIN_QUERIES,
        )
    took = time.monotonic() - started
    after = cpu_seconds(pids)
    n = len(latencies)
    every = sum(after[p] - before[p] for p in after if p in before)
    return Phase(
        name,
        latency_summary(latencies),
        recall(hits, data.ground_truth, opts.k),
        (after[server] - before[server]) / n * 1000,
        every / n * 1000,
        cpu_share(before, after, took),
        [float(np.mean(part)) * 1000 for part in np.array_split(latencies, 10) if len(part)],
    )


def visible_after(client: object, rows: int, timeout_s: float = 60.0) -> float:
    """Seconds from the last acknowledged insert until a Strong count sees every row."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        res = client.query(  # type: ignore[attr-defined]
            NAME, filter="", output_fields=["count(*)"], consistency_level="Strong"
        )
        if res and int(res[0]["count(*)"]) >= rows:
            return time.perf_counter() - t0
        time.sleep(0.05)
    return float("nan")


def fresh_round(
    r: int,
    client: object,
    data: datasets.Dataset,
    opts: argparse.Namespace,
    pids: dict[str, int],
) -> Phase:
    """A new collection filled with every row, then searched at once."""
    if opts.like_bench:  # make bench's order: FLAT with list vectors, IVF_FLAT, then HNSW
        for index_type in ("FLAT", "IVF_FLAT"):
            name = f"{NAME}_{r}_{index_type.lower()}"
            create_collection(client, name, data.dim, data.metric, index_type)
            ingest(client, name, data.vectors, opts.batch, index_type == "FLAT", "vectide")
    create_collection(client, NAME, data.dim, data.metric, "HNSW")
    res = ingest(client, NAME, data.vectors, opts.batch, False, "vectide")
    visible = visible_after(client, data.rows)
    log(f"round {r}: {res.rows_per_s:,.0f} rows/s; every row visible {visible:.2f} s after")
    profile = Profile(
        pids["standalone"],
        RUN_DIR / "profiles" / f"fresh-{r}.txt",
        opts.profile,
        opts.py_spy.split(),
    )
    phase = searches(client, data, opts, pids, f"round {r} fresh", profile)
    log(phase.line())
    return phase


def settled(
    client: object,
    data: datasets.Dataset,
    opts: argparse.Namespace,
    pids: dict[str, int],
    idle: float,
) -> Phase:
    """Flush, wait for the index builds, then the same searches on the settled index."""
    servers = [p for n, p in pids.items() if not n.startswith("infra:")]
    t0 = time.monotonic()
    client.flush(NAME)  # type: ignore[attr-defined]
    log(f"flushed in {time.monotonic() - t0:.1f} s; waiting for index builds")
    waited = wait_settled(client, [NAME], servers, idle, "vectide")  # type: ignore[arg-type]
    log(f"settled after {waited:.1f} s")
    time.sleep(BOUNDED_STALENESS_S)
    phase = searches(client, data, opts, pids, "settled")
    log(phase.line())
    return phase


def main(argv: list[str] | None = None) -> None:
    stop_on_sigterm()
    opts = parse_args(argv)
    data = datasets.synthetic(opts.rows, opts.dim, opts.queries, opts.k)
    vectide = vectide_target("freshrate")
    apply_set(vectide.config, opts.set)
    figures = Figures()
    try:
        vectide.start_infra()
        vectide.deployment.up("standalone", datanode=not opts.no_datanode)
        found = vectide.processes()
        pid = found["standalone"]
        pids = {"standalone": pid, **{n: p for n, p in found.items() if p != pid}}
        pids.pop("supervisor", None)  # its roles are its children: counted on their own
        client = connect(vectide.uri)
        servers = [p for n, p in pids.items() if not n.startswith("infra:")]
        idle = cpu_percent(servers, 3.0)
        log(f"idle CPU of the Vectide processes before the rows: {idle:.0f} %")
        niced = [pids[name] for name in filter(None, opts.nice.split(","))]
        for r in range(opts.rounds):
            if niced:
                set_autogroup_nice(niced, 0 if opts.alternate and r % 2 else opts.nice_value)
            figures.fresh.append(fresh_round(r, client, data, opts, pids))
        if not opts.no_settle:
            figures.settled = settled(client, data, opts, pids, idle)
        client.close()  # type: ignore[attr-defined]
    finally:
        vectide.stop()
    report(figures)
    if opts.profile:
        print_profile(RUN_DIR / "profiles" / f"fresh-{opts.rounds - 1}.txt")


def report(figures: Figures) -> None:
    for phase in [*figures.fresh, *([figures.settled] if figures.settled else [])]:
        print(phase.line())
    rates = [p.summary["qps"] for p in figures.fresh]
    fresh = statistics.median(rates)
    line = f"fresh searches/s (median of {len(rates)}): {fresh:,.0f}"
    if figures.settled:
        ratio = fresh / figures.settled.summary["qps"]
        line += f"; settled {figures.settled.summary['qps']:,.0f}/s: fresh = {ratio:.0%}"
    recalls = [p.recall for p in figures.fresh]
    print(f"{line}; fresh recall {min(recalls):.3f}-{max(recalls):.3f}")


if __name__ == "__main__":
    main()
