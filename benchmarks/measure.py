"""The measurements: ingest, search sweeps, concurrency, consistency, freshness, memory.

Each function takes a connected client (or an in-process faiss index) and returns plain
dicts for the JSON. All latencies are wall-clock times seen by the caller (``perf_counter``
around the pymilvus call), so they include pymilvus, gRPC and the server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import faiss
import numpy as np
from pymilvus import MilvusClient

from benchmarks.common import latency_summary, log
from benchmarks.datasets import Dataset
from benchmarks.milvus_ops import (
    INDEX_PARAMS,
    SWEEP,
    connect,
    recall,
    search_params,
    timed_searches,
)

RECALL_TARGETS = (0.90, 0.95, 0.99)
#: time one sweep setting may take (at least 50 queries are always answered)
SETTING_BUDGET_S = 6.0
#: a sweep stops once a setting reaches this recall: dearer settings only cost more
SWEEP_STOP_RECALL = 0.995
LEVELS = ("Strong", "Session", "Bounded", "Eventually")


# -- search sweeps ---------------------------------------------------------------------------


def sweep(
    run_one: Callable[[str | None, int], tuple[list[float], list[list[int]]]],
    index_type: str,
    truth: np.ndarray,
    k: int,
    label: str,
) -> list[dict[str, object]]:
    """Latency and recall at each value of the index's search parameter, cheapest first."""
    param, values = SWEEP[index_type]
    points: list[dict[str, object]] = []
    for value in values:
        point: dict[str, object] = {"param": param, "value": value if param else None}
        try:
            latencies, hits = run_one(param, value)
        except Exception as exc:  # a failing server is a result too: record it, go on
            log(f"{label} {index_type} {param}={value}: failed: {exc}")
            points.append({**point, "recall": None, "error": str(exc)[:300]})
            break
        point["recall"] = recall(hits, truth, k)
        point.update(latency_summary(latencies))
        points.append(point)
        log(
            f"{label} {index_type} {param or ''}{'=' + str(value) if param else ''}: "
            f"recall {point['recall']:.3f}, p50 {point['p50_ms']:.2f} ms"
        )
        if float(point["recall"]) >= SWEEP_STOP_RECALL:
            break
    return points


def at_recall(points: list[dict[str, object]]) -> dict[str, dict[str, object] | None]:
    """For each recall target, the cheapest swept setting reaching it (None if none did)."""
    out: dict[str, dict[str, object] | None] = {}
    for target in RECALL_TARGETS:
        reaching = [p for p in points if p["recall"] is not None and float(p["recall"]) >= target]
        out[f"{target:.2f}"] = reaching[0] if reaching else None
    return out


def milvus_sweep(
    client: MilvusClient, name: str, data: Dataset, index_type: str, k: int, label: str
) -> list[dict[str, object]]:
    def run_one(param: str | None, value: int) -> tuple[list[float], list[list[int]]]:
        params = search_params(data.metric, param, value)
        return timed_searches(client, name, data.queries, k, params, budget_s=SETTING_BUDGET_S)

    try:  # warm-up: caches, connections
        run_one(SWEEP[index_type][0], SWEEP[index_type][1][0])
    except Exception as exc:
        log(f"{label} {index_type}: warm-up failed: {exc}")
    return sweep(run_one, index_type, data.ground_truth, k, label)


# -- faiss in-process: the floor ------------------------------------------------------------


def faiss_index(data: Dataset, index_type: str) -> faiss.Index:
    """One index over the whole base with the servers' parameters (COSINE = IP here:
    the text vectors are unit length)."""
    metric = faiss.METRIC_L2 if data.metric == "L2" else faiss.METRIC_INNER_PRODUCT
    params = INDEX_PARAMS[index_type]
    if index_type == "FLAT":
        index = faiss.IndexFlat(data.dim, metric)
    elif index_type == "IVF_FLAT":
        nlist = min(params["nlist"], max(1, data.rows // 39))
        index = faiss.IndexIVFFlat(faiss.IndexFlat(data.dim, metric), data.dim, nlist, metric)
        index.train(data.vectors)
    else:
        index = faiss.IndexHNSWFlat(data.dim, params["M"], metric)
        index.hnsw.efConstruction = params["efConstruction"]
    index.add(data.vectors)
    return index


def faiss_params(index_type: str, param: str | None, value: int) -> faiss.SearchParameters | None:
    if param == "nprobe":
        return faiss.SearchParametersIVF(nprobe=value)
    if param == "ef":
        return faiss.SearchParametersHNSW(efSearch=value)
    return None


def faiss_sweep(
    index: faiss.Index, data: Dataset, index_type: str, k: int
) -> list[dict[str, object]]:
    def run_one(param: str | None, value: int) -> tuple[list[float], list[list[int]]]:
        params = faiss_params(index_type, param, value)
        latencies, hits = [], []
        for q in data.queries:
            t0 = time.perf_counter()
            _, ids = index.search(q[None, :], k, params=params)
            latencies.append(time.perf_counter() - t0)
            hits.append(ids[0].tolist())
        return latencies, hits

    return sweep(run_one, index_type, data.ground_truth, k, "faiss")


# -- concurrency -----------------------------------------------------------------------------


def concurrent_throughput(
    make_search: Callable[[], Callable[[np.ndarray], object]],
    queries: np.ndarray,
    clients: int,
    duration_s: float,
) -> dict[str, object]:
    """Searches/s with ``clients`` threads searching back to back for ``duration_s``.

    Each thread owns its client (its own gRPC channel), as separate application workers do.
    """
    searchers = [make_search() for _ in range(clients)]
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    start = threading.Barrier(clients + 1)
    stop_at: list[float] = [0.0]

    def worker(i: int) -> None:
        search = searchers[i]
        start.wait()
        n = i
        while time.perf_counter() < stop_at[0]:
            t0 = time.perf_counter()
            try:
                search(queries[n % len(queries)])
                latencies[i].append(time.perf_counter() - t0)
            except Exception:
                errors[i] += 1
            n += clients

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    stop_at[0] = time.perf_counter() + duration_s
    t0 = time.perf_counter()
    start.wait()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    flat = [x for per in latencies for x in per]
    summary = latency_summary(flat)
    summary["qps"] = len(flat) / elapsed
    summary["clients"] = clients
    summary["duration_s"] = elapsed
    summary["errors"] = sum(errors)
    return summary


def milvus_searcher(
    uri: str, name: str, k: int, params: dict[str, object]
) -> Callable[[], Callable[[np.ndarray], object]]:
    def make() -> Callable[[np.ndarray], object]:
        client = connect(uri)

        def search(q: np.ndarray) -> object:
            return client.search(
                name,
                [q],
                limit=k,
                output_fields=["id"],
                search_params=params,
                consistency_level="Bounded",
            )

        return search

    return make


# -- consistency cost while ingesting ---------------------------------------------------------


@dataclass
class BackgroundIngest:
    """Another client inserting ``rate`` rows/s in ``batch``-row calls until stopped."""

    uri: str
    name: str
    vectors: np.ndarray
    first_id: int
    rate: float
    batch: int = 500

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self.rows = 0
        self.errors = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> BackgroundIngest:
        self._started = time.perf_counter()
        self._thread.start()
        return self

    def _run(self) -> None:
        client = connect(self.uri)
        period = self.batch / self.rate
        next_at = time.perf_counter()
        n = 0
        while not self._stop.is_set():
            rows = [
                {"id": self.first_id + n + i, "vector": self.vectors[(n + i) % len(self.vectors)]}
                for i in range(self.batch)
            ]
            try:
                client.insert(self.name, rows)
                self.rows += self.batch
            except Exception:  # the measurement goes on; the count says it
                self.errors += 1
            n += self.batch
            next_at += period
            self._stop.wait(max(0.0, next_at - time.perf_counter()))

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        elapsed = time.perf_counter() - self._started
        return {
            "rows": self.rows,
            "rows_per_s": self.rows / elapsed,
            "target_rows_per_s": self.rate,
            "errors": self.errors,
        }


def consistency_latencies(
    client: MilvusClient,
    name: str,
    data: Dataset,
    k: int,
    params: dict[str, object],
    per_level: int,
    budget_s: float,
) -> dict[str, dict[str, object]]:
    """Search latency per consistency level, the levels interleaved round-robin so that each
    sees the same background load; each level stops after ``per_level`` searches or when the
    phase's ``budget_s`` is spent."""
    samples: dict[str, list[float]] = {level: [] for level in LEVELS}
    failures = dict.fromkeys(LEVELS, 0)
    deadline = time.perf_counter() + budget_s
    i = 0
    while i < per_level and time.perf_counter() < deadline:
        for level in LEVELS:
            q = data.queries[i % len(data.queries)]
            t0 = time.perf_counter()
            try:
                client.search(
                    name,
                    [q],
                    limit=k,
                    output_fields=["id"],
                    search_params=params,
                    consistency_level=level,
                )
            except Exception:
                failures[level] += 1
                continue
            samples[level].append(time.perf_counter() - t0)
        i += 1
    out: dict[str, dict[str, object]] = {}
    for level in LEVELS:
        out[level] = {**latency_summary(samples[level]), "failures": failures[level]}
    return out


# -- freshness --------------------------------------------------------------------------------


def freshness(
    client: MilvusClient, name: str, dim: int, trials: int, timeout_s: float = 5.0
) -> dict[str, dict[str, object]]:
    """Insert one row; time from its acknowledgement until a read returns it.

    Alternate trials use a Strong search (one call: Strong must wait for the write) and a
    poll of Eventually queries (``id == X``, back to back). Separate trials, so one read never
    warms the other.
    """
    rng = np.random.default_rng(7)
    strong: list[float] = []
    eventual: list[float] = []
    polls: list[int] = []
    misses = {"Strong": 0, "Eventually": 0}
    for trial in range(trials):
        vector = rng.normal(0.0, 1.0, dim).astype(np.float32)
        pk = 10_000_000 + trial
        try:
            client.insert(name, [{"id": pk, "vector": vector}])
            acked = time.perf_counter()
            if trial % 2 == 0:
                if _strong_sees(client, name, vector, pk):
                    strong.append(time.perf_counter() - acked)
                else:
                    misses["Strong"] += 1
                continue
            n = _poll_eventually(client, name, pk, acked, timeout_s)
        except Exception:  # counted as not visible; the next trial goes on
            misses["Strong" if trial % 2 == 0 else "Eventually"] += 1
            continue
        if n:
            eventual.append(time.perf_counter() - acked)
            polls.append(n)
        else:
            misses["Eventually"] += 1
    return {
        "strong_search": {**latency_summary(strong), "not_visible": misses["Strong"]},
        "eventually_query": {
            **latency_summary(eventual),
            "not_visible": misses["Eventually"],
            "mean_polls": float(np.mean(polls)) if polls else None,
        },
    }


def _strong_sees(client: MilvusClient, name: str, vector: np.ndarray, pk: int) -> bool:
    res = client.search(
        name,
        [vector],
        limit=1,
        filter=f"id == {pk}",
        output_fields=["id"],
        consistency_level="Strong",
    )
    return bool(res[0]) and int(res[0][0]["id"]) == pk


def _poll_eventually(
    client: MilvusClient, name: str, pk: int, since: float, timeout_s: float
) -> int:
    """Eventually queries back to back until the row shows; how many it took (0: never)."""
    n = 0
    while time.perf_counter() - since < timeout_s:
        n += 1
        rows = client.query(
            name, filter=f"id == {pk}", output_fields=["id"], consistency_level="Eventually"
        )
        if rows:
            return n
    return 0


# -- the raw broker ---------------------------------------------------------------------------


def raw_broker(bootstrap: str, topic: str, data: Dataset, batch: int) -> dict[str, object]:
    """The log's own ceiling: the synthetic rows' bytes (ids + vectors, one record per batch
    like Vectide's Insert messages) produced with Vectide's producer settings.

    ``pipelined``: every record queued, then one flush (what the broker can absorb);
    ``acked_per_batch``: each record flushed before the next (one synchronous writer, as
    one pymilvus client that waits for each insert's acknowledgement).
    """
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=-1)])[topic].result(
        30
    )
    records = [
        np.arange(s, min(s + batch, data.rows), dtype=np.int64).tobytes()
        + data.vectors[s : s + batch].tobytes()
        for s in range(0, data.rows, batch)
    ]
    total = sum(len(r) for r in records)
    conf = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 1,
        "message.max.bytes": 64 * 1024 * 1024,
    }
    out: dict[str, object] = {"bytes": total, "records": len(records), "rows": data.rows}
    for mode in ("pipelined", "acked_per_batch"):
        producer = Producer(conf)
        t0 = time.perf_counter()
        for record in records:
            _produce(producer, topic, record)
            if mode == "acked_per_batch":
                producer.flush(30)
        producer.flush(60)
        elapsed = time.perf_counter() - t0
        out[mode] = {
            "seconds": elapsed,
            "rows_per_s": data.rows / elapsed,
            "mb_per_s": total / elapsed / 1e6,
        }
        log(f"broker {mode}: {data.rows / elapsed:,.0f} rows/s, {total / elapsed / 1e6:.0f} MB/s")
    admin.delete_topics([topic])[topic].result(30)  # the broker keeps its log in memory
    return out


def _produce(producer: object, topic: str, value: bytes) -> None:
    while True:
        try:
            producer.produce(topic, value=value)  # type: ignore[attr-defined]
            return
        except BufferError:
            producer.poll(0.05)  # type: ignore[attr-defined]
