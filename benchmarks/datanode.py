"""``python -m benchmarks.datanode`` (or ``benchmarks.run --only datanode``): does the Spark
data node keep up with the proxy?

For 1 and then 2 Spark workers (a standalone master and workers from pyspark's jars, as
``vectide up --mode cluster`` runs them; the data node submits to it), on a standalone
Vectide: writers insert 128-d rows at full speed for ``--seconds``, a sampler reads the rows
on S3 (GetPersistentSegmentInfo, every segment state) twice a second, and the report gives

- rows/s acknowledged by the proxy and rows/s persisted by the data node;
- the flush lag: at each sample, how long ago the proxy had acknowledged as many rows as are
  persisted now (p50/p99 over the run);
- how long ``flush()`` of 100,000 fresh rows takes (pymilvus waits for GetFlushState);
- the persisted-rate ratio of 2 workers to 1.

Results go to ``benchmarks/results/datanode-{workers}.json``.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import signal
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from pymilvus import DataType, MilvusClient

from benchmarks.common import REPO, apply_set, log, rounded
from benchmarks.idle import processes
from benchmarks.targets import HOST, bench_config
from vectide.services.infra.deployment import DeploymentManager
from vectide.services.infra.manager import InfraManager
from vectide.services.infra.spark import master_url, spark_components

DIM = 128


@dataclass
class Run:
    workers: int
    seconds: float = 0.0
    acked_rows: int = 0
    persisted_rows: int = 0
    acked_rows_per_s: float = 0.0
    persisted_rows_per_s: float = 0.0
    lag_p50_s: float = 0.0
    lag_p99_s: float = 0.0
    lag_max_s: float = 0.0
    flush_100k_s: float = 0.0
    #: after the writers stopped, until every acknowledged row was on S3
    caught_up_after_s: float = 0.0
    #: a backlog written while the data node's driver was stopped, persisted from its resume:
    #: the data node's own rate, not bounded by the proxy's (the sustained run's is)
    backlog_rows: int = 0
    backlog_drain_s: float = 0.0
    backlog_rows_per_s: float = 0.0
    samples: list[tuple[float, int, int]] = field(default_factory=list)


def configure(workers: int, trigger_s: float, sets: list[str] | None = None) -> Any:
    config = bench_config("bdn")
    apply_set(config, sets or [])
    # below Linux's ephemeral range (32768-60999), where a client socket can hold a port
    config.infra.spark_master_port = 24077
    config.infra.spark_master_webui_port = 24080
    config.infra.spark_worker_port = 24078 - 10  # 24068, 24069
    config.infra.spark_worker_webui_port = 24081
    config.infra.spark_workers = workers
    config.infra.spark_worker_cores = 1
    config.infra.spark_worker_memory_mb = 1536
    config.data.spark_master = master_url(config)
    config.data.spark_ui_port = 24040
    config.data.trigger_s = trigger_s
    config.data.segment_max_rows = 200_000
    return config


def make_collection(client: MilvusClient, name: str) -> None:
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    index = client.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    client.create_collection(name, schema=schema, index_params=index)


def persisted(client: MilvusClient, name: str) -> int:
    return sum(s.num_rows for s in client.list_persistent_segments(name))


def writer(uri: str, name: str, first: int, stop: threading.Event, acked: list, lock) -> None:
    client = MilvusClient(uri)
    rng = np.random.default_rng(first)
    vectors = rng.standard_normal((2000, DIM)).astype(np.float32)
    next_id = first
    while not stop.is_set():
        client.insert(name, [{"id": next_id + i, "vec": vectors[i]} for i in range(2000)])
        next_id += 2000
        with lock:
            acked.append((time.monotonic(), acked[-1][1] + 2000))


def lag_seconds(acked: list[tuple[float, int]], t: float, rows: int) -> float:
    """How long before ``t`` the proxy had acknowledged ``rows`` rows."""
    counts = [c for _, c in acked]
    i = bisect.bisect_left(counts, rows)
    return 0.0 if i >= len(acked) else max(0.0, t - acked[i][0])


def warm_up(uri: str) -> None:
    """One small insert and flush: the executors' Python workers, their imports, consumers
    and S3 clients start here (~20 s on 2 busy cores), not inside the measurement."""
    client = MilvusClient(uri)
    make_collection(client, "warm_up")
    rows = np.zeros((1000, DIM), np.float32)
    client.insert("warm_up", [{"id": i, "vec": rows[i]} for i in range(1000)])
    client.flush("warm_up")
    client.drop_collection("warm_up")


def sustained(uri: str, run: Run, seconds: float, writers: int) -> None:
    warm_up(uri)
    client = MilvusClient(uri)
    name = f"sustained_{run.workers}"
    make_collection(client, name)
    acked: list[tuple[float, int]] = [(time.monotonic(), 0)]
    lock = threading.Lock()
    stop = threading.Event()
    threads = [
        threading.Thread(target=writer, args=(uri, name, i * 10**9, stop, acked, lock))
        for i in range(writers)
    ]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    lags = []
    while time.monotonic() - start < seconds:
        time.sleep(0.5)
        rows, now = persisted(client, name), time.monotonic()
        with lock:
            snapshot = list(acked)
        lags.append(lag_seconds(snapshot, now, rows))
        run.samples.append((round(now - start, 2), snapshot[-1][1], rows))
    stop.set()
    for thread in threads:
        thread.join()
    run.seconds = time.monotonic() - start
    run.acked_rows = acked[-1][1]
    deadline = time.monotonic() + 300
    while persisted(client, name) < run.acked_rows and time.monotonic() < deadline:
        time.sleep(0.2)
    run.persisted_rows = persisted(client, name)
    run.caught_up_after_s = time.monotonic() - start - run.seconds
    run.acked_rows_per_s = run.acked_rows / run.seconds
    # the data node's rate: every acknowledged row persisted, from the first write on
    run.persisted_rows_per_s = run.persisted_rows / (run.seconds + run.caught_up_after_s)
    steady = lags[len(lags) // 5 :] or lags  # skip the first fifth (warm-up)
    run.lag_p50_s = float(np.percentile(steady, 50))
    run.lag_p99_s = float(np.percentile(steady, 99))
    run.lag_max_s = float(max(steady))
    client.drop_collection(name)


def flush_100k(uri: str, run: Run) -> None:
    client = MilvusClient(uri)
    name = f"flush_{run.workers}"
    make_collection(client, name)
    vectors = np.random.default_rng(7).standard_normal((100_000, DIM)).astype(np.float32)
    for b in range(0, 100_000, 5000):
        client.insert(name, [{"id": b + i, "vec": vectors[b + i]} for i in range(5000)])
    started = time.monotonic()
    client.flush(name)
    run.flush_100k_s = time.monotonic() - started
    client.drop_collection(name)


def backlog(uri: str, run: Run, driver_pid: int, rows: int = 300_000) -> None:
    """Rows written while the driver is stopped (SIGSTOP; a few seconds, well inside its
    ZooKeeper session), then timed from SIGCONT until all are persisted: how fast the data
    node persists with this many workers when the proxy is not the limit."""
    client = MilvusClient(uri)
    name = f"backlog_{run.workers}"
    make_collection(client, name)
    vectors = np.random.default_rng(11).standard_normal((5000, DIM)).astype(np.float32)
    os.kill(driver_pid, signal.SIGSTOP)
    try:
        for b in range(0, rows, 5000):
            client.insert(name, [{"id": b + i, "vec": vectors[i]} for i in range(5000)])
    finally:
        os.kill(driver_pid, signal.SIGCONT)
    started = time.monotonic()
    deadline = started + 300
    while persisted(client, name) < rows and time.monotonic() < deadline:
        time.sleep(0.1)
    run.backlog_rows = persisted(client, name)
    run.backlog_drain_s = time.monotonic() - started
    run.backlog_rows_per_s = run.backlog_rows / run.backlog_drain_s
    client.drop_collection(name)


def measure(workers: int, args: argparse.Namespace) -> Run:
    config = configure(workers, args.trigger, args.set)
    progress = lambda line: log(f"datanode bench: {line}")  # noqa: E731
    infra = InfraManager(config, progress)
    spark = InfraManager(config, progress, spark_components(config))
    deployment = DeploymentManager(config, progress)
    run = Run(workers)
    try:
        deployment.down()
        infra.up()
        spark.up()
        deployment.up("standalone")
        uri = f"http://{HOST}:{config.service.proxy_port}"
        log(f"datanode bench: {workers} worker(s), sustained ingest for {args.seconds:.0f}s")
        sustained(uri, run, args.seconds, args.writers)
        log(f"datanode bench: flush of 100k rows ({workers} worker(s))")
        flush_100k(uri, run)
        log("datanode bench: a backlog of 300k rows, persisted from the driver's resume")
        backlog(uri, run, processes(config)["datanode"])
    finally:
        deployment.down(infra=False)
        spark.down()
        infra.down()
    return run


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0, help="sustained ingest per run")
    p.add_argument("--writers", type=int, default=2, help="client threads inserting")
    p.add_argument("--trigger", type=float, default=1.0, help="data.trigger_s")
    p.add_argument("--workers", default="1,2", help="Spark worker counts to compare")
    p.add_argument("--set", action="append", default=[], help="section.key=value (repeatable)")
    args = p.parse_args(argv)
    runs = [measure(int(w), args) for w in args.workers.split(",")]
    result: dict[str, Any] = {"trigger_s": args.trigger, "runs": [asdict(r) for r in runs]}
    if len(runs) >= 2 and runs[0].persisted_rows_per_s:
        result["workers_ratio"] = runs[-1].persisted_rows_per_s / runs[0].persisted_rows_per_s
    if len(runs) >= 2 and runs[0].backlog_rows_per_s:
        result["backlog_workers_ratio"] = runs[-1].backlog_rows_per_s / runs[0].backlog_rows_per_s
    out = REPO / "benchmarks" / "results" / f"datanode-{args.workers.replace(',', '-')}.json"
    out.write_text(json.dumps(rounded(result), indent=2))
    print(
        "| workers | acked rows/s | persisted rows/s | lag p50 | lag p99 | caught up | flush 100k "
        "| backlog of 300k persisted, rows/s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in runs:
        print(
            f"| {r.workers} | {r.acked_rows_per_s:,.0f} | {r.persisted_rows_per_s:,.0f} | "
            f"{r.lag_p50_s:.1f} s | {r.lag_p99_s:.1f} s | {r.caught_up_after_s:.1f} s | "
            f"{r.flush_100k_s:.1f} s | {r.backlog_rows_per_s:,.0f} ({r.backlog_drain_s:.1f} s) |"
        )
    if "workers_ratio" in result:
        print(
            f"persisted rate, {runs[-1].workers} workers / {runs[0].workers}: "
            f"{result['workers_ratio']:.2f}"
        )
    print(f"written to {out}")
    return result


if __name__ == "__main__":
    main()
