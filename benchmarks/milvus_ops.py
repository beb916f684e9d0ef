"""What the bench does through pymilvus, the same calls for every server.

Collections are created, indexed and loaded before any row arrives (what
``MilvusClient.create_collection(..., index_params=...)`` does), then filled in batches. Every
server gets the same schema (``id`` INT64 primary key, ``vector`` FLOAT_VECTOR), the same
index parameters and the same batches.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import psutil
from pymilvus import DataType, MilvusClient

from benchmarks.common import log

INDEX_PARAMS: dict[str, dict[str, int]] = {
    "FLAT": {},
    "IVF_FLAT": {"nlist": 128},
    "HNSW": {"M": 16, "efConstruction": 128},
}
#: search parameter swept per index type (the cheapest value reaching a recall is reported)
SWEEP: dict[str, tuple[str | None, list[int]]] = {
    "FLAT": (None, [0]),
    "IVF_FLAT": ("nprobe", [1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128]),
    "HNSW": ("ef", [10, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512]),
}


def connect(uri: str) -> MilvusClient:
    return MilvusClient(uri, timeout=120)


def create_collection(
    client: MilvusClient, name: str, dim: int, metric: str, index_type: str
) -> None:
    """Drop-and-create ``name`` with its index, and load it (rows come after)."""
    if client.has_collection(name):
        client.drop_collection(name)
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
    index = client.prepare_index_params()
    index.add_index(
        "vector", index_type=index_type, metric_type=metric, params=INDEX_PARAMS[index_type]
    )
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Bounded")


RowBatch = list[dict[str, object]]


def row_batches(
    vectors: np.ndarray, batch: int, as_lists: bool, first_id: int = 0
) -> Iterator[RowBatch]:
    """Row dicts, built lazily per batch (outside the timed insert call).

    ``as_lists``: vectors as Python lists (what most applications pass); otherwise numpy
    rows, which pymilvus converts with less work.
    """
    for start in range(0, len(vectors), batch):
        block = vectors[start : start + batch]
        values = block.tolist() if as_lists else list(block)
        yield [{"id": first_id + start + i, "vector": v} for i, v in enumerate(values)]


@dataclass
class IngestResult:
    rows: int
    insert_s: float  # time inside client.insert calls
    wall_s: float  # including building the row dicts
    batch_latencies_s: list[float] = field(default_factory=list)

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.insert_s if self.insert_s else float("nan")

    def to_dict(self) -> dict[str, object]:
        lat = np.asarray(self.batch_latencies_s) * 1000
        return {
            "rows": self.rows,
            "insert_s": self.insert_s,
            "wall_s": self.wall_s,
            "rows_per_s": self.rows_per_s,
            "batch_p50_ms": float(np.percentile(lat, 50)) if len(lat) else None,
            "batch_p99_ms": float(np.percentile(lat, 99)) if len(lat) else None,
        }


def ingest(
    client: MilvusClient,
    name: str,
    vectors: np.ndarray,
    batch: int,
    as_lists: bool,
    label: str,
    first_id: int = 0,
) -> IngestResult:
    """Insert every row in ``batch``-row calls; progress lines about every 10 seconds."""
    latencies: list[float] = []
    start = time.perf_counter()
    next_report = start + 10
    done = 0
    for rows in row_batches(vectors, batch, as_lists, first_id):
        t0 = time.perf_counter()
        client.insert(name, rows)
        latencies.append(time.perf_counter() - t0)
        done += len(rows)
        if time.perf_counter() > next_report:
            log(f"{label}: inserted {done}/{len(vectors)}")
            next_report = time.perf_counter() + 10
    return IngestResult(done, float(np.sum(latencies)), time.perf_counter() - start, latencies)


def cpu_percent(pids: list[int], seconds: float) -> float:
    """CPU use of ``pids`` (children included) over ``seconds``, in percent of one core."""
    procs = [psutil.Process(p) for p in pids if psutil.pid_exists(p)]
    before = _cpu_seconds(procs)
    time.sleep(seconds)
    return (_cpu_seconds(procs) - before) / seconds * 100


def pending_index_rows(client: MilvusClient, names: list[str]) -> int:
    """Rows DescribeIndex reports as not yet indexed (unfinished indexes count one row)."""
    pending = 0
    for name in names:
        info = client.describe_index(name, "vector") or {}
        pending += int(info.get("pending_index_rows") or 0)
        pending += 0 if str(info.get("state", "Finished")) == "Finished" else 1
    return pending


def wait_settled(
    client: MilvusClient,
    names: list[str],
    pids: list[int],
    idle_cpu: float,
    label: str,
    quiet_s: float = 3.0,
    timeout_s: float = 900.0,
) -> float:
    """Wait until background index builds are over; returns the seconds waited.

    Two signals, both required: DescribeIndex reports nothing pending (Vectide reports its
    index builds of flushed segments; milvus-lite answers Finished at once), and the server
    processes' CPU use stays within 15 points of their idle use (measured after start) for
    ``quiet_s``: query nodes also build interim and handed-off indexes without reporting
    them, and milvus-lite builds segment indexes after flush in a background thread.
    """
    start = time.monotonic()
    quiet_since: float | None = None
    next_report = start + 10
    while time.monotonic() - start < timeout_s:
        pending = pending_index_rows(client, names)
        busy = cpu_percent(pids, 0.5)
        now = time.monotonic()
        if pending == 0 and busy < idle_cpu + 15:
            quiet_since = quiet_since or now
            if now - quiet_since >= quiet_s:
                return now - start - quiet_s
        else:
            quiet_since = None
        if now > next_report:
            log(f"{label}: waiting for index builds ({pending} rows pending, {busy:.0f}% CPU)")
            next_report = now + 10
    log(f"{label}: still busy after {timeout_s:.0f}s; measuring anyway")
    return timeout_s


def _cpu_seconds(procs: list[psutil.Process]) -> float:
    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
            for child in proc.children(recursive=True):
                ct = child.cpu_times()
                total += ct.user + ct.system
        except psutil.Error:
            continue
    return total


def search_params(metric: str, param: str | None, value: int) -> dict[str, object]:
    return {"metric_type": metric, "params": {param: value} if param else {}}


def timed_searches(
    client: MilvusClient,
    name: str,
    queries: np.ndarray,
    k: int,
    params: dict[str, object],
    consistency: str = "Bounded",
    budget_s: float | None = None,
    min_queries: int = 50,
) -> tuple[list[float], list[list[int]]]:
    """One query per call, serially: (latencies in s, hit ids) for the first queries.

    With ``budget_s``, stops once that much time is spent and ``min_queries`` were answered:
    a server at 150 ms a search would otherwise take most of the run's time on one sweep.
    """
    latencies: list[float] = []
    hits: list[list[int]] = []
    started = time.perf_counter()
    for q in queries:
        if budget_s and len(hits) >= min_queries and time.perf_counter() - started > budget_s:
            break
        t0 = time.perf_counter()
        res = client.search(
            name,
            [q],
            limit=k,
            output_fields=["id"],
            search_params=params,
            consistency_level=consistency,
        )
        latencies.append(time.perf_counter() - t0)
        hits.append([int(h["id"]) for h in res[0]])
    return latencies, hits


def recall(hits: list[list[int]], truth: np.ndarray, k: int) -> float:
    """Mean recall@k against the exact neighbours of the first ``len(hits)`` queries."""
    pairs = zip(hits, truth[: len(hits)], strict=True)
    found = [len(set(h[:k]) & set(t[:k].tolist())) / k for h, t in pairs]
    return float(np.mean(found))


Searcher = Callable[[np.ndarray], list[int]]
