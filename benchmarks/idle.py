"""Idle CPU of every process of a deployment: what Vectide costs when no client talks to it.

An idle deployment should cost (almost) nothing: issue 15 asks for <= 10 % of one core in
total, broker included, and a broker whose CPU stays flat over time. Timeticks through every
channel and consumers polling the broker are what an idle deployment can burn, so this
samples each process (children included: the data node's JVM and Python workers count)
over a window, split into slices so growth over the window shows.

``make bench`` measures the bench's own Vectide deployment at its start and at its end;
``python -m benchmarks.idle`` starts a deployment of its own (16 channels, the default,
on ports shifted by ``--port-offset``), optionally with a loaded collection, measures it
and stops it.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import psutil

from benchmarks.common import REPO, apply_set, log, own_tree
from vectide.services.common.config import Config
from vectide.services.infra.deployment import DeploymentManager
from vectide.services.infra.manager import InfraManager

#: measured before the adaptive timeticks and the shared query-node consumer (INFRA.md,
#: "What an idle standalone deployment costs"): 16 channels, ticks every 50 ms, 20 s sample
BEFORE_PERCENT = {
    "infra:kafka": 115.0,
    "datanode": 39.0,
    "standalone": 11.0,
    "standalone+ingest": 11.0,
    "infra:seaweedfs": 5.0,
    "total": 171.0,
}
#: issue 15, item 5: the whole idle deployment, in percent of one core
TARGET_TOTAL_PERCENT = 10.0


@dataclass
class IdleCpu:
    """CPU use per process over a window, in percent of one core, and per slice of it."""

    seconds: float
    percent: dict[str, float]
    #: the broker's use in each consecutive slice: a rising series means growth over time
    broker_slices: list[float] = field(default_factory=list)

    @property
    def total(self) -> float:
        return sum(self.percent.values())

    def to_dict(self) -> dict[str, object]:
        return {
            "seconds": self.seconds,
            "percent": {**self.percent, "total": self.total},
            "broker_slices_percent": self.broker_slices,
            "before_percent": BEFORE_PERCENT,
            "target_total_percent": TARGET_TOTAL_PERCENT,
        }


def cpu_seconds(pid: int, listed: frozenset[int] = frozenset()) -> float:
    """User + system seconds of ``pid`` and its children (0 once it is gone), except children
    listed on their own (the supervisor's roles are its children). Children that exited and
    were reaped count through their parent's ``children_*`` times: Spark forks short-lived
    Python workers, whose time would otherwise vanish from the window."""
    total = 0.0
    try:
        for proc in own_tree(pid, listed):
            try:
                total += sum(proc.cpu_times()[:4])
            except psutil.Error:
                continue
    except psutil.Error:
        return 0.0
    return total


def distinct(pids: Mapping[str, int]) -> dict[str, int]:
    """One name per process: roles sharing a process (standalone runs the ingest role in its
    own) are counted once, under their names joined."""
    names: dict[int, list[str]] = {}
    for name, pid in pids.items():
        names.setdefault(pid, []).append(name)
    return {"+".join(group): pid for pid, group in names.items()}


def measure(pids: Mapping[str, int], seconds: float = 20.0, slices: int = 4) -> IdleCpu:
    """Sample every process in ``pids`` over ``seconds`` (in ``slices`` equal parts)."""
    pids = distinct(pids)
    step = seconds / max(slices, 1)

    def own(pid: int) -> float:
        return cpu_seconds(pid, frozenset(pids.values()))

    start = {name: own(pid) for name, pid in pids.items()}
    broker = pids.get("infra:kafka")
    slice_start = own(broker) if broker else 0.0
    broker_slices: list[float] = []
    t0 = time.monotonic()
    for i in range(max(slices, 1)):
        time.sleep(max(0.0, t0 + step * (i + 1) - time.monotonic()))
        if broker:
            now = own(broker)
            broker_slices.append((now - slice_start) / step * 100)
            slice_start = now
    elapsed = time.monotonic() - t0
    percent = {name: (own(pid) - start[name]) / elapsed * 100 for name, pid in pids.items()}
    return IdleCpu(elapsed, percent, broker_slices)


def table(results: Mapping[str, IdleCpu]) -> str:
    """Markdown: a row per process, a column per measurement, the old figures beside."""
    if not results:
        return ""
    names = sorted({n for r in results.values() for n in r.percent})
    head = ["process", *results, "before (INFRA.md, 16 channels)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in [*names, "total"]:
        cells = [
            f"{r.total if name == 'total' else r.percent.get(name, float('nan')):.1f}"
            for r in results.values()
        ]
        old = BEFORE_PERCENT.get(name)
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {'' if old is None else old} |")
    for label, r in results.items():
        if r.broker_slices:
            series = ", ".join(f"{s:.1f}" for s in r.broker_slices)
            lines.append(
                f"\nbroker per {r.seconds / len(r.broker_slices):.0f} s slice, {label}: {series} %"
            )
    return "\n".join(lines)


# -- inside `make bench` -----------------------------------------------------------------------


def bench_phase(
    pids: Mapping[str, int], out: dict[str, Any], phase: str, seconds: float = 20.0
) -> None:
    """Idle CPU of every process of the bench's deployment (infra included), under
    ``out["idle_cpu"][phase]``: at its start and at its end (loaded collections, after the
    run's load), which also shows whether the broker's idle cost grew while it ran."""
    result = measure(pids, seconds)
    out.setdefault("idle_cpu", {})[phase] = result.to_dict()
    shown = ", ".join(f"{name} {pct:.1f}" for name, pct in sorted(result.percent.items()))
    log(f"idle CPU {phase} ({seconds:.0f} s, % of one core): {shown}; total {result.total:.1f}")


def report_table(results: Mapping[str, Any]) -> str:
    """The bench's idle figures per process beside the ones measured before the change."""
    phases = results.get("systems", {}).get("vectide", {}).get("idle_cpu", {})
    return table(
        {
            f"Vectide {phase}": IdleCpu(
                p["seconds"],
                {k: v for k, v in p["percent"].items() if k != "total"},
                p.get("broker_slices_percent", []),
            )
            for phase, p in phases.items()
        }
    )


# -- a deployment of its own -------------------------------------------------------------------


def shifted_config(offset: int, channels: int, name: str) -> Config:
    """The default configuration with every port shifted by ``offset`` and a private run dir,
    so it runs beside a developer deployment, the tests and the bench."""
    config = Config()
    config.infra.run_dir = str(REPO / ".vectide" / f"idle{offset}")
    config.zookeeper.hosts = f"127.0.0.1:{2181 + offset}"
    config.kafka.bootstrap_servers = f"127.0.0.1:{9092 + offset}"
    config.s3.endpoint = f"http://127.0.0.1:{8333 + offset}"
    config.infra.seaweed_master_port = 9333 + offset
    config.infra.seaweed_volume_port = 8380 + offset
    config.infra.seaweed_filer_port = 8888 + offset
    config.service.proxy_port = 19530 + offset
    config.service.rootcoord_port = 19600 + offset
    config.service.querynode_port = 19610 + offset
    config.service.http_port = 19121 + offset
    config.service.metrics_port = 9091 + offset  # each role adds its own offset to it
    config.cluster.name = name
    config.cluster.dml_channels = channels
    return config


def processes(config: Config) -> dict[str, int]:
    """Every process of the deployment by name: roles, the supervisor, infra."""
    manager = DeploymentManager(config)
    found = {s.name: s.pid for s in manager.status() if s.pid}
    supervisor = manager.supervisor_status()["pid"]
    if supervisor:
        found["supervisor"] = int(supervisor)
    found.update({f"infra:{s.name}": s.pid for s in InfraManager(config).status() if s.pid})
    return found


def load_collection(uri: str, shards: int) -> None:
    """A small loaded collection: its shards' consumers are what a real idle node runs."""
    import numpy as np
    from pymilvus import DataType, MilvusClient

    client = MilvusClient(uri)
    schema = MilvusClient.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=8)
    index = client.prepare_index_params()
    index.add_index("vector", index_type="FLAT", metric_type="L2")
    client.create_collection("idle", schema=schema, index_params=index, num_shards=shards)
    vectors = np.random.default_rng(0).random((1000, 8), dtype=np.float32)
    client.insert("idle", [{"id": i, "vector": v} for i, v in enumerate(vectors)])
    client.query("idle", filter="", output_fields=["count(*)"], consistency_level="Strong")


def _connect(uri: str) -> Any:
    """A client; pymilvus reuses a cached connection that an idle server may have closed
    ("too many pings" after minutes without calls), and recovers it on a second try."""
    from pymilvus import MilvusClient

    for attempt in range(3):
        try:
            return MilvusClient(uri)
        except Exception:
            if attempt == 2:
                raise
            time.sleep(1.0)
    raise AssertionError("unreachable")


def latencies(uri: str, trials: int, gap_s: float) -> dict[str, dict[str, float]]:
    """Insert one row, then time until a Strong search (even trials) or back-to-back
    Eventually queries (odd trials) return it; plus a Strong search with no write before it.
    ``gap_s`` of silence before each trial: with a gap longer than the pacing hold (2 s) every
    trial starts from the idle state (slow ticks, slow fetches), the worst case of pacing."""
    import numpy as np

    from benchmarks.common import latency_summary
    from benchmarks.measure import _poll_eventually, _strong_sees

    client = _connect(uri)
    rng = np.random.default_rng(int(time.time()))
    found: dict[str, list[float]] = {"strong_fresh": [], "eventually_fresh": [], "strong": []}
    for trial in range(trials):
        time.sleep(gap_s)
        vector = rng.normal(0.0, 1.0, 8).astype(np.float32)
        pk = int(rng.integers(10**9, 2 * 10**9))
        client.insert("idle", [{"id": pk, "vector": vector}])
        acked = time.perf_counter()
        if trial % 2 == 0:
            if _strong_sees(client, "idle", vector, pk):
                found["strong_fresh"].append(time.perf_counter() - acked)
        elif _poll_eventually(client, "idle", pk, acked, 5.0):
            found["eventually_fresh"].append(time.perf_counter() - acked)
        time.sleep(gap_s)
        t0 = time.perf_counter()
        client.search("idle", [vector], limit=1, consistency_level="Strong")
        found["strong"].append(time.perf_counter() - t0)
    return {name: latency_summary(samples) for name, samples in found.items()}


def strong_under_ingest(uri: str, seconds: float, rate: float) -> dict[str, float]:
    """Strong searches back to back while another client inserts ``rate`` rows/s in
    500-row batches: the pacing must not slow reads that wait for a busy channel."""
    import threading

    import numpy as np

    from benchmarks.common import latency_summary

    stop = threading.Event()
    rng = np.random.default_rng(1)

    def writer() -> None:
        client, next_id, own = _connect(uri), 10**10, np.random.default_rng(2)
        while not stop.is_set():
            t0 = time.perf_counter()
            vectors = own.random((500, 8), dtype=np.float32)
            client.insert("idle", [{"id": next_id + i, "vector": v} for i, v in enumerate(vectors)])
            next_id += 500
            stop.wait(max(0.0, 500 / rate - (time.perf_counter() - t0)))

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    client, samples = _connect(uri), []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        t0 = time.perf_counter()
        client.search(
            "idle", [rng.random(8, dtype=np.float32)], limit=1, consistency_level="Strong"
        )
        samples.append(time.perf_counter() - t0)
    stop.set()
    thread.join()
    return latency_summary(samples)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--channels", type=int, default=16)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--warmup", type=float, default=10.0, help="after start, before measuring")
    p.add_argument("--port-offset", type=int, default=350)
    p.add_argument("--shards", type=int, default=2, help="shards of the loaded collection")
    p.add_argument("--no-collection", action="store_true", help="measure an empty deployment")
    p.add_argument("--rounds", type=int, default=1, help="measure this many windows in a row")
    p.add_argument("--no-datanode", action="store_true", help="standalone process only")
    p.add_argument("--set", action="append", default=[], help="section.key=value (repeatable)")
    p.add_argument("--latency", type=int, default=0, help="freshness/Strong trials after idle")
    p.add_argument("--gap", type=float, default=3.0, help="silence before each latency trial")
    p.add_argument("--ingest", type=float, default=0.0, help="seconds of Strong under ingest")
    p.add_argument("--json", help="write the figures here")
    a = p.parse_args(argv)
    config = shifted_config(a.port_offset, a.channels, f"idle{int(time.time())}")
    apply_set(config, a.set)
    manager = DeploymentManager(config, progress=lambda line: log(f"vectide: {line}"))
    results: dict[str, IdleCpu] = {}
    try:
        manager.up("standalone", datanode=not a.no_datanode)
        if not a.no_collection:
            load_collection(f"http://127.0.0.1:{config.service.proxy_port}", a.shards)
        time.sleep(a.warmup)
        for i in range(a.rounds):
            label = f"idle {i + 1}" if a.rounds > 1 else "idle"
            results[label] = measure(processes(config), a.seconds)
            log(f"{label}: total {results[label].total:.1f} % of one core")
        if a.latency:
            uri = f"http://127.0.0.1:{config.service.proxy_port}"
            for gap in (a.gap, 0.0):
                figures = latencies(uri, a.latency, gap)
                for name, s in figures.items():
                    log(f"gap {gap:.1f}s {name}: p50 {s['p50_ms']:.1f} ms p99 {s['p99_ms']:.1f} ms")
        if a.ingest:
            s = strong_under_ingest(f"http://127.0.0.1:{config.service.proxy_port}", a.ingest, 5000)
            log(f"Strong under 5,000 rows/s ingest: p50 {s['p50_ms']:.1f} ms p99 {s['p99_ms']:.1f}")
    finally:
        manager.down()
    print(table(results))
    if a.json:
        with open(a.json, "w") as out:
            json.dump({k: v.to_dict() for k, v in results.items()}, out, indent=1)


if __name__ == "__main__":
    main()
