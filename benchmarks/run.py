"""``python -m benchmarks.run``: Vectide against its peers, same data, same client, one run.

Systems, each measured while the others are stopped (they would otherwise share the two
cores): faiss in-process (the floor of the search cost), the do-nothing server (the ceiling of
the client path), milvus-lite as a server process, then Vectide (its broker's raw produce
rate first, then Vectide itself). Prints a side-by-side table and writes
``benchmarks/results/latest.json`` and ``latest.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import yaml

from benchmarks import datasets, idle, kafka_ingest, measure, report
from benchmarks.common import REPO, latency_summary, log, rounded, stop_on_sigterm
from benchmarks.datasets import Dataset
from benchmarks.milvus_ops import (
    INDEX_PARAMS,
    SWEEP,
    connect,
    cpu_percent,
    create_collection,
    ingest,
    recall,
    row_batches,
    search_params,
    timed_searches,
    wait_settled,
)
from benchmarks.profiling import Profile, summarise
from benchmarks.targets import (
    RUN_DIR,
    SubprocessTarget,
    Target,
    VectideTarget,
    milvus_lite_target,
    null_target,
    remove_data,
    rss_bytes,
    vectide_target,
)

INDEX_TYPES = ("FLAT", "IVF_FLAT", "HNSW")
#: the Vectide setting a Bounded read depends on: rows younger than this may be invisible
BOUNDED_STALENESS_S = 5.5
#: longest wait for background index builds after a flush
SETTLE_TIMEOUT_S = 300.0
#: longest wait for a flush (pymilvus waits for GetFlushState) before measuring anyway
FLUSH_TIMEOUT_S = 300.0
#: the fresh-search phase: HNSW ef (its recall-0.95 setting is only known once the sweep has
#: run on the settled index; faiss needs ef ~64 for 0.95 on the synthetic set), how long its
#: serial searches run and how many are answered anyway (milvus-lite takes ~1 s each). Three
#: seconds hold one of Vectide's data node micro-batches (``data.trigger_s``) whenever they
#: start: the rate is the average over one persistence period, not a sample of ~0.5 s that
#: happens to hold a batch or not (it moved between 49 % and 78 % of settled for that alone).
#: Distinct queries, each asked once, enough for 1,000 searches a second.
FRESH_EF = 64
FRESH_SECONDS = 3.0
FRESH_MIN_QUERIES = 30
FRESH_QUERIES = 3_000


@dataclass
class Options:
    rows: int = 100_000
    dim: int = 128
    queries: int = 300
    k: int = 10
    batch: int = 1000
    text: bool = True
    text_limit: int | None = None
    clients: int = 8
    concurrent_s: float = 5.0
    #: alternating 8-client windows of the no-op server and each server (``fastest_window``)
    concurrent_rounds: int = 3
    consistency_searches: int = 100
    consistency_budget_s: float = 40.0
    ingest_rate: float = 5000.0
    freshness_trials: int = 60
    systems: tuple[str, ...] = ("faiss", "ceiling", "milvus-lite", "vectide")
    profile: bool = False
    out: str = str(REPO / "benchmarks" / "results")


def parse_args(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--large", action="store_true", help="1,000,000 synthetic rows")
    p.add_argument("--tiny", action="store_true", help="5,000 rows, for trying the suite out")
    p.add_argument("--rows", type=int, help="synthetic rows (default 100,000)")
    p.add_argument("--queries", type=int, default=Options.queries)
    p.add_argument("--batch", type=int, default=Options.batch, help="rows per insert call")
    p.add_argument("--no-text", action="store_true", help="skip the docstring dataset")
    p.add_argument("--text-limit", type=int, help="use only the first N docstrings")
    p.add_argument("--clients", type=int, default=Options.clients)
    p.add_argument("--ingest-rate", type=float, default=Options.ingest_rate)
    p.add_argument(
        "--systems",
        default=",".join(Options.systems),
        help="comma-separated subset of faiss,ceiling,milvus-lite,vectide",
    )
    p.add_argument("--profile", action="store_true", help="py-spy the Vectide process")
    p.add_argument("--out", default=Options.out)
    a = p.parse_args(argv)
    opts = Options(
        queries=a.queries,
        batch=a.batch,
        text=not a.no_text,
        text_limit=a.text_limit,
        clients=a.clients,
        ingest_rate=a.ingest_rate,
        systems=tuple(s.strip() for s in a.systems.split(",") if s.strip()),
        profile=a.profile,
        out=a.out,
    )
    if a.large:
        opts.rows = 1_000_000
    if a.tiny:
        opts.rows, opts.queries, opts.text_limit = 5_000, 100, 1_000
        opts.consistency_searches, opts.freshness_trials, opts.concurrent_s = 30, 20, 2.0
        opts.concurrent_rounds = 1
    if a.rows:
        opts.rows = a.rows
    return opts


# -- context of the run -----------------------------------------------------------------------


def machine() -> dict[str, object]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model or platform.processor(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "load_average_at_start": os.getloadavg(),
    }


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for name in ("pymilvus", "milvus-lite", "faiss-cpu", "numpy", "vectide", "grpcio"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "absent"
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        found["vectide_commit"] = commit
    except OSError:
        pass
    return found


def load_datasets(opts: Options) -> tuple[list[Dataset], str | None]:
    """The synthetic set, plus the text set unless it cannot be built (then why not)."""
    log(f"synthetic: {opts.rows} x {opts.dim}, {opts.queries} queries, exact ground truth")
    sets = [
        datasets.synthetic(opts.rows, opts.dim, opts.queries, opts.k, timed_queries=FRESH_QUERIES)
    ]
    skipped = None
    if opts.text:
        try:
            sets.append(datasets.text(opts.k, RUN_DIR / "cache", opts.text_limit))
        except datasets.EncoderUnavailable as exc:
            skipped = f"text dataset skipped: {exc}"
            log(skipped)
    else:
        skipped = "text dataset skipped: --no-text"
    return sets, skipped


# -- faiss: the floor -------------------------------------------------------------------------


def run_faiss(sets: list[Dataset], opts: Options) -> dict[str, Any]:
    """The same indexes in-process, no client or server: what the search itself costs."""
    out: dict[str, Any] = {"search": {}, "at_recall": {}, "build_s": {}}
    hnsw_at_95 = None
    for data in sets:
        out["search"][data.name], out["at_recall"][data.name] = {}, {}
        out["build_s"][data.name] = {}
        for index_type in INDEX_TYPES:
            t0 = time.perf_counter()
            index = measure.faiss_index(data, index_type)
            out["build_s"][data.name][index_type] = time.perf_counter() - t0
            log(f"faiss: built {index_type} on {data.name} in {time.perf_counter() - t0:.1f}s")
            points = measure.faiss_sweep(index, data, index_type, opts.k)
            out["search"][data.name][index_type] = points
            out["at_recall"][data.name][index_type] = measure.at_recall(points)
            if data.name == "synthetic" and index_type == "HNSW":
                hnsw_at_95 = (index, _setting(points, "0.95"))
    if hnsw_at_95 is not None:
        index, (param, value) = hnsw_at_95
        params = measure.faiss_params("HNSW", param, value)

        def make() -> Callable[[np.ndarray], object]:
            return lambda q: index.search(q[None, :], opts.k, params=params)

        out["concurrent"] = measure.concurrent_throughput(
            make, sets[0].queries, opts.clients, opts.concurrent_s
        )
        out["concurrent"]["setting"] = {"param": param, "value": value}
    return out


def _setting(points: list[dict[str, object]], target: str) -> tuple[str | None, int]:
    """The parameter reaching ``target`` recall, else the dearest one swept."""
    chosen = measure.at_recall(points)[target] or points[-1]
    return chosen["param"], int(chosen["value"] or 0)  # type: ignore[arg-type]


# -- the ceiling ------------------------------------------------------------------------------


def ceiling_probe(target: SubprocessTarget, data: Dataset, opts: Options) -> dict[str, Any]:
    """The ceiling measured again just before a server's phases (the no-op server idles
    meanwhile, using no CPU). The machine is shared: comparing a server with the ceiling
    measured minutes earlier under another load would compare the load, not the server."""
    client = connect(target.uri)
    create_collection(client, "probe", data.dim, data.metric, "HNSW")
    rows = data.vectors[:20_000]
    res = ingest(client, "probe", rows, opts.batch, False, "ceiling probe")
    params = search_params(data.metric, "ef", 64)
    latencies, _ = timed_searches(client, "probe", data.queries, opts.k, params)
    out = {"insert_numpy_rows_per_s": res.rows_per_s, "search": measure.latency_summary(latencies)}
    log(
        f"ceiling re-measured: insert {res.rows_per_s:,.0f} rows/s, "
        f"serial search {out['search']['qps']:,.0f}/s"
    )
    return out


def clients_window(
    target: Target, collection: str, data: Dataset, opts: Options, params: dict[str, Any]
) -> dict[str, Any]:
    """``opts.clients`` client threads searching ``collection`` back to back for
    ``opts.concurrent_s``: their rate and latencies."""
    out = measure.concurrent_throughput(
        measure.milvus_searcher(target.uri, collection, opts.k, params),
        data.queries,
        opts.clients,
        opts.concurrent_s,
    )
    log(f"{target.name}: {opts.clients} concurrent clients {out['qps']:,.0f}/s")
    return out


def concurrent_windows(
    target: Target,
    ceiling: SubprocessTarget | None,
    data: Dataset,
    opts: Options,
    params: dict[str, Any],
) -> dict[str, Any]:
    """``concurrent`` (the server's 8-client windows) and ``ceiling_concurrent`` (the no-op
    server's, each right before one of the server's, on the probe's collection: the no-op
    phase at the start ran minutes earlier, under another load): the fastest of each."""
    windows: dict[str, list[dict[str, Any]]] = {"ceiling_concurrent": [], "concurrent": []}
    for _ in range(opts.concurrent_rounds):
        if ceiling is not None:
            windows["ceiling_concurrent"].append(
                clients_window(ceiling, "probe", data, opts, params)
            )
        windows["concurrent"].append(clients_window(target, "synthetic_hnsw", data, opts, params))
    return {key: fastest_window(found) for key, found in windows.items() if found}


def fastest_window(windows: list[dict[str, Any]]) -> dict[str, Any]:
    """The fastest of a server's 8-client windows, with every window's rate. Windows
    alternate with the no-op server's, and each side counts at its fastest: on this shared
    box one 5-s window moved 54-78 % of the no-op window next to it, so one window against
    the fastest of several no-op ones measured the box's swings more than the server."""
    best = dict(max(windows, key=lambda w: w["qps"]))
    best["rounds"] = [w["qps"] for w in windows]
    return best


def ceiling_phases(target: SubprocessTarget, data: Dataset, opts: Options) -> dict[str, Any]:
    """Insert and search rates through pymilvus against a server that does nothing."""
    client = connect(target.uri)
    out: dict[str, Any] = {"ingest": {}}
    for as_lists in (True, False):
        kind = "lists" if as_lists else "numpy"
        create_collection(client, f"ceiling_{kind}", data.dim, data.metric, "HNSW")
        res = ingest(client, f"ceiling_{kind}", data.vectors, opts.batch, as_lists, "ceiling")
        out["ingest"][kind] = res.to_dict()
        log(f"ceiling: insert ({kind}) {res.rows_per_s:,.0f} rows/s")
    params = search_params(data.metric, "ef", 64)
    timed_searches(client, "ceiling_numpy", data.queries[:20], opts.k, params)
    latencies, _ = timed_searches(client, "ceiling_numpy", data.queries, opts.k, params)
    out["search"] = measure.latency_summary(latencies)
    log(f"ceiling: serial search {out['search']['qps']:,.0f}/s")
    out["concurrent"] = clients_window(target, "ceiling_numpy", data, opts, params)
    return out


# -- servers through pymilvus: milvus-lite and Vectide ---------------------------------------


def run_server(
    target: Target,
    sets: list[Dataset],
    opts: Options,
    before: Callable[[], dict] | None = None,
    ceiling: SubprocessTarget | None = None,
) -> dict[str, Any]:
    """Start ``target``, run every phase, stop it (also on errors and ^C)."""
    out: dict[str, Any] = {}
    try:
        if isinstance(target, VectideTarget) and before is not None:
            out.update(before())
        target.start()
        out.update(server_phases(target, sets, opts, ceiling))
    finally:
        target.stop()
    return out


def server_phases(
    target: Target, sets: list[Dataset], opts: Options, ceiling: SubprocessTarget | None = None
) -> dict[str, Any]:
    label = target.name
    client = connect(target.uri)
    load_at_start = os.getloadavg()
    pids = target.processes()
    main_pid = pids.get("standalone") or pids.get(label)
    servers = [pid for name, pid in pids.items() if not name.startswith("infra:")]
    profiles = RUN_DIR / "profiles"
    out: dict[str, Any] = {"ingest": {}, "visible_after_ingest_s": {}, "flush_s": {}}
    out["fresh_search"] = {}
    out["settle_s"], out["search"], out["at_recall"] = {}, {}, {}
    idle_cpu = cpu_percent(servers, 3.0)
    out["idle_cpu_percent"] = idle_cpu
    out["load_average_at_start"] = load_at_start
    broker_cpu(pids, out, "start")
    idle.bench_phase(pids, out, "start")
    # freshness of the deployment as it starts, before the run's load: compared with the
    # end-of-run figure it shows what a few minutes of running did (Tansu's growing load)
    out["freshness_at_start"] = freshness_phase(client, sets[0], opts, label, "fresh_start")
    rss_start = rss_bytes(idle.distinct(pids))  # a process hosting two roles counts once
    loaded_rows = 0
    for data in sets:
        profile = Profile(main_pid, profiles / f"{label}-ingest-{data.name}.txt", opts.profile)

        def quiet(names: list[str]) -> float:
            return wait_settled(client, names, servers, idle_cpu, label, timeout_s=120.0)

        with profile:
            names = ingest_dataset(client, data, opts, label, out, pids, quiet)
        last_insert = time.monotonic()
        broker_cpu(pids, out, f"after ingest {data.name}")
        out["flush_s"][data.name] = flush_all(target.uri, names, label)
        loaded_rows += data.rows * len(names)
        log(f"{label}: waiting for index builds on {data.name}")
        out["settle_s"][data.name] = wait_settled(
            client, names, servers, idle_cpu, label, timeout_s=SETTLE_TIMEOUT_S
        )
        time.sleep(max(0.0, BOUNDED_STALENESS_S - (time.monotonic() - last_insert)))
        profile = Profile(main_pid, profiles / f"{label}-search-{data.name}.txt", opts.profile)
        with profile:
            search_dataset(client, data, opts, label, out)
        broker_cpu(pids, out, f"after searches {data.name}")
    out["memory"] = memory(rss_start, rss_bytes(idle.distinct(pids)), loaded_rows)
    synthetic = sets[0]
    param, value = _setting(out["search"]["synthetic"]["HNSW"], "0.95")
    params = search_params(synthetic.metric, param, value)
    log(f"{label}: {opts.clients} concurrent clients, HNSW {param}={value}")
    out.update(concurrent_windows(target, ceiling, synthetic, opts, params))
    out["concurrent"]["setting"] = {"param": param, "value": value}
    with Profile(main_pid, profiles / f"{label}-consistency.txt", opts.profile):
        out["consistency"] = consistency_phase(target, client, synthetic, opts, params)
    out["freshness"] = freshness_phase(client, synthetic, opts, label)
    if isinstance(target, VectideTarget):
        out["kafka_ingest"] = kafka_ingest_phase(target, synthetic)
    broker_cpu(pids, out, "end")
    idle.bench_phase(pids, out, "end")
    out["load_average_at_end"] = os.getloadavg()
    if opts.profile:
        out["profiles"] = {p.stem: summarise(p) for p in sorted(profiles.glob(f"{label}-*.txt"))}
    return out


def kafka_ingest_phase(target: VectideTarget, data: Dataset) -> dict[str, Any]:
    """Vectide only: producers' records in through a mapping (see benchmarks/kafka_ingest.py)."""
    log(f"{target.name}: Kafka producer ingestion")
    config_file = RUN_DIR / "kafka-ingest.yaml"
    config_file.write_text(yaml.safe_dump(target.config.to_dict()))
    return kafka_ingest.ingest_phase(
        target.uri,
        str(config_file),
        target.config.kafka.bootstrap_servers,
        data.vectors,
        target.processes(),
    )


def broker_cpu(pids: dict[str, int], out: dict[str, Any], phase: str) -> None:
    """The broker's CPU use (2 s sample) at a phase boundary: Tansu's idle load grows while a
    deployment runs (see benchmarks/README.md), and this shows how much it did here."""
    broker = pids.get("infra:kafka")
    if broker is not None:
        busy = cpu_percent([broker], 2.0)
        out.setdefault("broker_cpu_percent", {})[phase] = busy
        log(f"broker CPU {phase}: {busy:.0f}%")


def ingest_dataset(
    client: Any,
    data: Dataset,
    opts: Options,
    label: str,
    out: dict[str, Any],
    pids: dict[str, int] | None = None,
    quiet: Callable[[list[str]], float] | None = None,
) -> list[str]:
    """Fill one collection per index type: FLAT with list vectors, the others with numpy.
    Each insert starts on a quiet deployment (``quiet``: the collections filled before are
    persisted and indexed), as a single collection's would: measured back to back, the
    second and third paid for the first ones' persistence (the data node, the S3 server)
    inside their own insert calls."""
    out["ingest"][data.name], out["visible_after_ingest_s"][data.name] = {}, {}
    out.setdefault("quiet_before_ingest_s", {})[data.name] = {}
    names = []
    for index_type in INDEX_TYPES:
        name = f"{data.name}_{index_type.lower()}"
        if names and quiet is not None:
            waited = quiet(names)
            out["quiet_before_ingest_s"][data.name][index_type] = waited
            log(f"{label}: quiet {waited:.1f}s after the previous collection; {name} next")
        create_collection(client, name, data.dim, data.metric, index_type)
        as_lists = index_type == "FLAT"
        res = ingest(client, name, data.vectors, opts.batch, as_lists, f"{label} {name}")
        visible = visible_after(client, name, data.rows)
        kind = "lists" if as_lists else "numpy"
        out["ingest"][data.name][index_type] = {**res.to_dict(), "vectors": kind}
        out["visible_after_ingest_s"][data.name][index_type] = visible
        log(
            f"{label}: {name} insert ({kind}) {res.rows_per_s:,.0f} rows/s; "
            f"all rows visible {visible:.2f}s after the last ack"
        )
        if data.name == "synthetic" and index_type == "HNSW":
            out["fresh_search"][data.name] = fresh_search(client, name, data, opts, label, pids)
        names.append(name)
    return names


def fresh_search(
    client: Any,
    name: str,
    data: Dataset,
    opts: Options,
    label: str,
    pids: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Serial searches right after the last insert (and the Strong count that saw every
    row), before any flush: what a user who inserts and searches gets while the rows are
    growing data (Vectide: interim chunk indexes plus an exact tail). Issue 15 item 1 sets
    it against the settled rate at recall 0.95 (``report.fresh_ratio``). The server
    processes' CPU meanwhile shows what else still works on the rows (persistence, builds)."""
    params = search_params(data.metric, "ef", FRESH_EF)
    procs = idle.distinct(pids or {})
    listed = frozenset(procs.values())
    cpu_before = {n: idle.cpu_seconds(p, listed) for n, p in procs.items()}
    started = time.monotonic()
    queries, truth = data.queries, data.ground_truth
    if data.timed_queries is not None and data.timed_truth is not None:
        queries, truth = data.timed_queries, data.timed_truth
    latencies, hits = timed_searches(
        client,
        name,
        queries,
        opts.k,
        params,
        budget_s=FRESH_SECONDS,
        min_queries=FRESH_MIN_QUERIES,
    )
    out: dict[str, Any] = {"param": "ef", "value": FRESH_EF}
    out["recall"] = recall(hits, truth, opts.k)
    out.update(latency_summary(latencies))
    took = time.monotonic() - started
    out["searching_s"] = took
    out["cpu_percent"] = {
        n: (idle.cpu_seconds(p, listed) - cpu_before[n]) / took * 100 for n, p in procs.items()
    }
    log(
        f"{label}: fresh search (before flush) ef={FRESH_EF}: {out['qps']:,.0f}/s, "
        f"p50 {out['p50_ms']:.1f} ms, p99 {out['p99_ms']:.1f} ms, recall {out['recall']:.3f}; "
        "CPU meanwhile (% of one core): "
        + ", ".join(f"{n} {v:.0f}" for n, v in sorted(out["cpu_percent"].items()))
    )
    return out


def flush_all(uri: str, names: list[str], label: str) -> dict[str, float]:
    """Flush the collections at once (one client each) and time each until pymilvus returns
    (it waits for GetFlushState): the persisted, indexed state is what searches then see."""
    took: dict[str, float] = {}

    def flush(name: str) -> None:
        t0 = time.perf_counter()
        connect(uri).flush(name)
        took[name] = time.perf_counter() - t0

    log(f"{label}: flushing {', '.join(names)}")
    threads = [threading.Thread(target=flush, args=(n,), daemon=True) for n in names]
    for t in threads:
        t.start()
    deadline = time.monotonic() + FLUSH_TIMEOUT_S
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    missing = [n for n in names if n not in took]
    if missing:
        log(f"{label}: flush of {', '.join(missing)} not done after {FLUSH_TIMEOUT_S:.0f}s")
    log(f"{label}: flushed in {max(took.values(), default=0):.1f}s")
    return {n: took.get(n, float("nan")) for n in names}


def visible_after(client: Any, name: str, rows: int, timeout_s: float = 60.0) -> float:
    """Seconds from the last acknowledged insert until a Strong count sees every row."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        res = client.query(name, filter="", output_fields=["count(*)"], consistency_level="Strong")
        if res and int(res[0]["count(*)"]) >= rows:
            return time.perf_counter() - t0
        time.sleep(0.05)
    return float("nan")


def search_dataset(
    client: Any, data: Dataset, opts: Options, label: str, out: dict[str, Any]
) -> None:
    out["search"][data.name], out["at_recall"][data.name] = {}, {}
    for index_type in INDEX_TYPES:
        name = f"{data.name}_{index_type.lower()}"
        points = measure.milvus_sweep(client, name, data, index_type, opts.k, label)
        out["search"][data.name][index_type] = points
        out["at_recall"][data.name][index_type] = measure.at_recall(points)


def memory(before: dict[str, int], after: dict[str, int], rows: int) -> dict[str, Any]:
    """RSS per process, and the growth per million vectors loaded (extrapolated linearly)."""
    per_million = {
        name: (after.get(name, 0) - before.get(name, 0)) / rows * 1e6 / 2**20
        for name in after
        if rows
    }
    return {
        "rss_start_mib": {k: v / 2**20 for k, v in before.items()},
        "rss_loaded_mib": {k: v / 2**20 for k, v in after.items()},
        "rows_loaded": rows,
        "mib_per_million_vectors": per_million,
        "note": "RSS growth from start to all collections loaded, divided by the rows "
        "loaded (all index types together) and scaled to 1M: an extrapolation",
    }


def consistency_phase(
    target: Target, client: Any, data: Dataset, opts: Options, params: dict[str, object]
) -> dict[str, Any]:
    """Search latency per consistency level, idle and while another client ingests."""
    label = target.name
    name = "synthetic_hnsw"
    out: dict[str, Any] = {}
    log(f"{label}: consistency levels, idle")
    out["idle"] = measure.consistency_latencies(
        client,
        name,
        data,
        opts.k,
        params,
        opts.consistency_searches // 2,
        opts.consistency_budget_s / 2,
    )
    log(f"{label}: consistency levels while ingesting {opts.ingest_rate:,.0f} rows/s")
    writer = measure.BackgroundIngest(
        target.uri, name, data.vectors, data.rows + 1_000_000, opts.ingest_rate
    ).start()
    try:
        out["ingesting"] = measure.consistency_latencies(
            client,
            name,
            data,
            opts.k,
            params,
            opts.consistency_searches,
            opts.consistency_budget_s,
        )
    finally:
        out["ingest"] = writer.stop()
    strong = out["ingesting"]["Strong"]
    log(f"{label}: Strong while ingesting p50 {strong['p50_ms']:.1f} ms p99 {strong['p99_ms']:.1f}")
    return out


def freshness_phase(
    client: Any, data: Dataset, opts: Options, label: str, name: str = "freshness"
) -> dict[str, Any]:
    create_collection(client, name, data.dim, data.metric, "FLAT")
    for rows in row_batches(data.vectors[:1000], 1000, False):
        client.insert(name, rows)
    visible_after(client, name, 1000)
    log(f"{label}: freshness, {opts.freshness_trials} trials")
    out = measure.freshness(client, name, data.dim, opts.freshness_trials)
    log(
        f"{label}: visible to Eventually query after p50 {out['eventually_query']['p50_ms']:.1f} ms"
    )
    return out


def broker_phase(target: VectideTarget, data: Dataset, opts: Options) -> Callable[[], dict]:
    """Before Vectide starts: infra up, the raw produce rate of the same bytes."""

    def run() -> dict[str, Any]:
        target.start_infra()
        topic = f"{target.config.cluster.name}-raw-produce"
        bootstrap = target.config.kafka.bootstrap_servers
        return {"broker": measure.raw_broker(bootstrap, topic, data, opts.batch)}

    return run


# -- main -------------------------------------------------------------------------------------


def run(opts: Options) -> dict[str, Any]:
    started = time.time()
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "machine": machine(),
        "versions": versions(),
        "options": asdict(opts),
        "index_params": INDEX_PARAMS,
        "sweeps": {k: {"param": v[0], "values": v[1]} for k, v in SWEEP.items()},
    }
    sets, skipped = load_datasets(opts)
    results["datasets"] = [d.summary() for d in sets]
    results["skipped"] = [skipped] if skipped else []
    systems: dict[str, Any] = {}
    results["systems"] = systems
    results["load_average"] = {}  # 1/5/15-min load as each system's phase began
    if "faiss" in opts.systems:
        log("== faiss in-process (the floor)")
        results["load_average"]["faiss"] = os.getloadavg()
        systems["faiss"] = run_faiss(sets, opts)
    ceiling = null_target() if "ceiling" in opts.systems else None
    try:
        if ceiling is not None:
            log("== do-nothing server (the client-path ceiling)")
            results["load_average"]["ceiling"] = os.getloadavg()
            ceiling.start()
            systems["ceiling"] = ceiling_phases(ceiling, sets[0], opts)
        run_servers(results, sets, opts, ceiling, started)
        if "vectide" in opts.systems:
            try:
                scaling_phases(results, sets[0], opts)
            except Exception as exc:  # the figures measured so far are still written
                log(f"query scaling phase failed: {exc!r}")
                results["skipped"].append(f"query scaling phase failed: {exc!r}")
    finally:
        if ceiling is not None:
            ceiling.stop()
        remove_data()
    results["elapsed_s"] = time.time() - started
    results["targets"] = report.evaluate_targets(results)
    return results


def run_servers(
    results: dict[str, Any],
    sets: list[Dataset],
    opts: Options,
    ceiling: SubprocessTarget | None,
    started: float,
) -> None:
    """milvus-lite, then Vectide, each preceded by a fresh ceiling probe."""
    systems = results["systems"]
    targets: list[tuple[Target, Callable[[], dict] | None]] = []
    if "milvus-lite" in opts.systems:
        targets.append((milvus_lite_target(), None))
    if "vectide" in opts.systems:
        vectide = vectide_target(f"bench-{int(started)}")
        targets.append((vectide, broker_phase(vectide, sets[0], opts)))
        results["vectide_config"] = vectide.config.to_dict()
    for target, before in targets:
        log(f"== {target.name}")
        probe = ceiling_probe(ceiling, sets[0], opts) if ceiling is not None else None
        results["load_average"][target.name] = os.getloadavg()
        systems[target.name] = run_server(target, sets, opts, before, ceiling)
        if probe is not None:
            systems[target.name]["ceiling_probe"] = probe


def scaling_phases(results: dict[str, Any], data: Dataset, opts: Options) -> None:
    """Issue 18: the balancer simulated over 10 nodes and 1,000 segments, and 8 clients
    against a cluster's one, then two query nodes (its own deployment, after the others)."""
    from benchmarks import balance_sim, query_scaling

    log("== query nodes: the balancer simulated, then 1 vs 2 query nodes of a cluster")
    results["balance_sim"] = balance_sim.summary()
    results["load_average"]["query_scaling"] = os.getloadavg()
    rows = min(data.rows, 50_000)
    results["query_scaling"] = query_scaling.run(
        data.vectors[:rows], data.queries, opts.clients, opts.concurrent_s * 2
    )


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["--only", "datanode"]:  # the data node scenario alone (its own args)
        from benchmarks import datanode

        datanode.main(argv[2:])
        return
    opts = parse_args(argv)
    stop_on_sigterm()
    results = run(opts)
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.json").write_text(json.dumps(rounded(results), indent=1) + "\n")
    report.plot(results, out / "latest.png")
    print(report.table(results))
    log(f"results: {out / 'latest.json'}, {out / 'latest.png'} ({results['elapsed_s']:.0f}s)")


if __name__ == "__main__":
    main()
