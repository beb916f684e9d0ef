"""Churn: insert, delete, upsert and flush for minutes, milvus-lite as the oracle.

Issue 16, item 6: with automatic compaction and garbage collection on short intervals, a
collection that churns must stay correct at every step (the same query and search results
as milvus-lite after the same operations) and must not grow: its segment count, its S3
objects and the processes' memory return to what a fresh copy of the same live rows costs.

``python -m benchmarks.churn`` starts its own standalone deployment with the Spark data
node (ports shifted by ``--port-offset``, 250 by default, its own run dir and S3 root),
churns one collection while milvus-lite (in this process, a local ``.db`` file) applies the
same operations, samples every round, and ends with the baseline: a new collection holding
the live rows inserted and flushed once (segments, S3 objects) and the churned collection
loaded into a restarted deployment (RSS). The figures go to ``benchmarks/results/churn.json``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from benchmarks.common import REPO, log, own_tree
from benchmarks.idle import processes, shifted_config
from vectide.services.common.config import Config
from vectide.services.common.objectstore import ObjectStore
from vectide.services.datacoord.garbage import PREFIXES
from vectide.services.infra.deployment import DeploymentManager

RESULT = REPO / "benchmarks" / "results" / "churn.json"
NAME, FRESH = "churn", "churn_fresh"
#: queries compared every round (exact FLAT search: the top-k is deterministic)
QUERIES = 5
TOP_K = 10
#: Milvus's query window: the whole live set must fit in one query
QUERY_LIMIT = 16_384


@dataclass
class Sample:
    """One round's figures."""

    round: int
    seconds: float
    live_rows: int
    segments: int
    loaded_segments: int
    s3_objects: dict[str, int]
    rss_mb: dict[str, float]
    mismatches: int

    @property
    def objects(self) -> int:
        return sum(self.s3_objects.values())


@dataclass
class Churn:
    """The operations both systems receive, and the live rows they must both hold."""

    dim: int
    live_target: int
    batch: int
    upserts: int
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(16))
    live: dict[int, np.ndarray] = field(default_factory=dict)
    next_id: int = 0

    def round(self) -> tuple[list[dict[str, Any]], list[int], list[dict[str, Any]]]:
        """(inserts, deletes, upserts) of one round: new rows, as many deletes as keep the
        live set near its target once it is reached, and new vectors for existing rows."""
        existing = np.array(sorted(self.live), dtype=np.int64)
        excess = len(self.live) + self.batch - self.live_target
        gone = self._pick(existing, max(0, excess))
        kept = np.setdiff1d(existing, gone)
        changed = self._pick(kept, self.upserts)
        new = list(range(self.next_id, self.next_id + self.batch))
        self.next_id += self.batch
        inserts = [self._row(i) for i in new]
        upserts = [self._row(i) for i in changed]
        for pk in gone:
            del self.live[pk]
        return inserts, gone, upserts

    def _pick(self, ids: np.ndarray, count: int) -> list[int]:
        count = min(count, len(ids))
        return [int(i) for i in self.rng.choice(ids, count, replace=False)] if count else []

    def _row(self, pk: int) -> dict[str, Any]:
        vector = self.rng.standard_normal(self.dim).astype(np.float32)
        self.live[pk] = vector
        return {"id": pk, "vec": vector.tolist()}

    def rows(self) -> list[dict[str, Any]]:
        return [{"id": pk, "vec": v.tolist()} for pk, v in sorted(self.live.items())]


def create(client: Any, name: str, dim: int) -> None:
    """One shard, exact FLAT search, Strong reads: both systems must agree exactly."""
    from pymilvus import DataType

    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=dim)
    index = client.prepare_index_params()
    index.add_index("vec", index_type="FLAT", metric_type="L2")
    client.create_collection(
        name, schema=schema, index_params=index, consistency_level="Strong", num_shards=1
    )


def apply(clients: Iterable[Any], name: str, ops: tuple[list, list, list]) -> None:
    inserts, gone, upserts = ops
    for client in clients:
        client.insert(name, inserts)
        if gone:
            client.delete(name, ids=gone)
        if upserts:
            client.upsert(name, upserts)


def results(client: Any, name: str, queries: np.ndarray) -> tuple[list[int], list[list[int]]]:
    rows = client.query(name, filter="id >= 0", output_fields=["id"], limit=QUERY_LIMIT)
    hits = client.search(name, queries.tolist(), limit=TOP_K, output_fields=["id"])
    return sorted(r["id"] for r in rows), [[h["id"] for h in q] for q in hits]


def mismatches(ours: Any, lite: Any, name: str, queries: np.ndarray) -> int:
    """Checks that differ (0, 1 or 2: the query of every live id, the searches)."""
    a, b = results(ours, name, queries), results(lite, name, queries)
    return int(a[0] != b[0]) + int(a[1] != b[1])


def s3_objects(store: ObjectStore, collection_id: int, seen: set[int]) -> dict[str, int]:
    """Objects of the collection per kind. Index files are keyed by build and segment, not by
    collection: they count when their segment is one of the collection's (``seen``, which
    grows with every segment id found in a listing or in the segment list)."""
    counts: dict[str, int] = {}
    for prefix in PREFIXES:
        if prefix == "index_files/":
            continue
        keys = list(store.list(f"{prefix}{collection_id}/"))
        if prefix != "delta_log/":
            seen.update(int(k.split("/")[3]) for k in keys)
        counts[prefix.rstrip("/")] = len(keys)
    index = [k for k in store.list("index_files/") if int(k.split("/")[2]) in seen]
    counts["index_files"] = len(index)
    return counts


def rss_mb(pids: dict[str, int]) -> dict[str, float]:
    """Resident memory of each process with its children (the data node's JVM and Python
    workers count with it), in MB."""
    listed = frozenset(pids.values())
    out = {}
    for name, pid in pids.items():
        total = 0
        for proc in own_tree(pid, listed):
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                continue
        out[name] = round(total / 2**20, 1)
    return out


class Sampler:
    """Every figure of one collection, for one round."""

    def __init__(self, ours: Any, lite: Any, store: ObjectStore, config: Config) -> None:
        self.ours, self.lite, self.store, self.config = ours, lite, store, config
        self.seen: dict[str, set[int]] = {}
        self.t0 = time.monotonic()

    def pids(self) -> dict[str, int]:
        found = processes(self.config)
        return {name: found[name] for name in ("standalone", "datanode") if name in found}

    def sample(self, name: str, step: int, live: int, queries: np.ndarray) -> Sample:
        seen = self.seen.setdefault(name, set())
        segments = self.ours.list_persistent_segments(name)
        seen.update(s.segment_id for s in segments)
        collection_id = self.ours.describe_collection(name)["collection_id"]
        return Sample(
            step,
            round(time.monotonic() - self.t0, 1),
            live,
            len(segments),
            len(self.ours.list_loaded_segments(name)),
            s3_objects(self.store, collection_id, seen),
            rss_mb(self.pids()),
            mismatches(self.ours, self.lite, name, queries),
        )


def row(label: str, s: Sample) -> str:
    rss = " | ".join(f"{s.rss_mb.get(n, float('nan')):.0f}" for n in ("standalone", "datanode"))
    return (
        f"| {label} | {s.seconds:.0f} | {s.live_rows} | {s.segments} | {s.loaded_segments} "
        f"| {s.objects} | {rss} | {s.mismatches} |"
    )


def table(samples: list[Sample], every: int, extra: dict[str, Sample]) -> str:
    head = (
        "| round | s | live rows | segments | loaded segments | S3 objects "
        "| RSS MB standalone | RSS MB data node | mismatches |"
    )
    lines = [head, "|" + "---|" * 9]
    shown = [s for i, s in enumerate(samples) if i % every == 0 or i == len(samples) - 1]
    lines += [row(str(s.round), s) for s in shown]
    lines += [row(label, s) for label, s in extra.items()]
    return "\n".join(lines)


def wait(check: Callable[[], bool], seconds: float, step: float = 2.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step)
    return check()


def churn_config(offset: int, a: argparse.Namespace) -> Config:
    config = shifted_config(offset, a.channels, f"churn{int(time.time())}")
    config.infra.run_dir = str(REPO / ".vectide" / f"churn{offset}")
    config.s3.root_path = config.cluster.name
    config.data.trigger_s = 1.0
    config.data.compaction_interval_s = a.compaction_interval
    config.data.gc_interval_s = a.gc_interval
    config.data.gc_delay_s = a.gc_delay
    return config


def settle(sampler: Sampler, name: str, live: int, queries: np.ndarray, a: Any) -> Sample:
    """Sample ``name`` until it is one segment and its figures held still for a whole GC
    delay and two GC rounds (or ``a.settle`` seconds passed): compaction and GC are done."""
    deadline = time.monotonic() + a.settle
    quiet = a.gc_delay + 2 * a.gc_interval
    last = sampler.sample(name, -1, live, queries)
    changed = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(5.0)
        now = sampler.sample(name, -1, live, queries)
        if (now.segments, now.objects) != (last.segments, last.objects):
            changed = time.monotonic()
        elif now.segments <= 1 and time.monotonic() - changed >= quiet:
            return now
        last = now
    return last


def run(a: argparse.Namespace) -> dict[str, Any]:
    from pymilvus import MilvusClient

    config = churn_config(a.port_offset, a)
    manager = DeploymentManager(config, progress=lambda line: log(f"vectide: {line}"))
    uri = f"http://127.0.0.1:{config.service.proxy_port}"
    work = Path(tempfile.mkdtemp(prefix="churn-lite-"))
    lite = MilvusClient(str(work / "churn.db"))
    churn = Churn(a.dim, a.live, a.batch, a.upserts)
    queries = np.random.default_rng(99).standard_normal((QUERIES, a.dim)).astype(np.float32)
    out: dict[str, Any] = {"config": vars(a), "rounds": []}
    try:
        manager.up("standalone", datanode=True)
        ours = MilvusClient(uri)
        store = ObjectStore(config.s3)
        sampler = Sampler(ours, lite, store, config)
        out["rss_mb_empty"] = rss_mb(sampler.pids())
        for client in (ours, lite):
            create(client, NAME, a.dim)
        samples: list[Sample] = []
        deadline = time.monotonic() + a.minutes * 60
        step = 0
        while time.monotonic() < deadline:
            started = time.monotonic()
            apply((ours, lite), NAME, churn.round())
            if step % a.flush_every == 0:
                ours.flush(NAME)
            samples.append(sampler.sample(NAME, step, len(churn.live), queries))
            s = samples[-1]
            log(
                f"round {step}: {s.segments} segments, {s.objects} objects, "
                f"RSS {s.rss_mb}, mismatches {s.mismatches}"
            )
            step += 1
            time.sleep(max(0.0, a.interval - (time.monotonic() - started)))
        out["rounds"] = [asdict(s) for s in samples]
        log("churn over: a fresh copy of the live rows, then both settle")
        rows = churn.rows()
        for client in (ours, lite):
            create(client, FRESH, a.dim)
            for i in range(0, len(rows), 2000):
                client.insert(FRESH, rows[i : i + 2000])
        ours.flush(FRESH)
        live = len(rows)
        settled = settle(sampler, NAME, live, queries, a)
        fresh = settle(sampler, FRESH, live, queries, a)
        extra = {"settled": settled, "fresh copy": fresh}
        out["settled"], out["fresh"] = asdict(settled), asdict(fresh)
        log("restart: the churned collection loaded into new processes (RSS baseline)")
        ours.release_collection(FRESH)
        ours.close()
        manager.down(infra=False)
        manager.up("standalone", datanode=True)
        ours = MilvusClient(uri)
        sampler.ours = ours
        ours.load_collection(NAME)
        wait(lambda: ours.get_load_state(NAME)["state"].name == "Loaded", 120)
        reloaded = sampler.sample(NAME, -1, live, queries)
        extra["reloaded"] = reloaded
        out["reloaded"] = asdict(reloaded)
        print(table(samples, a.show_every, extra))
        return out
    finally:
        lite.close()
        manager.down()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=15.0)
    p.add_argument("--port-offset", type=int, default=250)
    p.add_argument("--channels", type=int, default=2, help="DML channels of the deployment")
    p.add_argument("--interval", type=float, default=5.0, help="seconds per round")
    p.add_argument("--flush-every", type=int, default=1, help="flush every this many rounds")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--live", type=int, default=10_000, help="live rows kept once reached")
    p.add_argument("--batch", type=int, default=500, help="rows inserted per round")
    p.add_argument("--upserts", type=int, default=100, help="rows upserted per round")
    p.add_argument("--compaction-interval", type=float, default=10.0)
    p.add_argument("--gc-interval", type=float, default=10.0)
    p.add_argument("--gc-delay", type=float, default=20.0)
    p.add_argument("--settle", type=float, default=180.0, help="max seconds to settle at end")
    p.add_argument("--show-every", type=int, default=10, help="table: every Nth round")
    p.add_argument("--json", default=str(RESULT))
    a = p.parse_args(argv)
    out = run(a)
    Path(a.json).write_text(json.dumps(out, indent=1))
    log(f"wrote {a.json}")


if __name__ == "__main__":
    main()
