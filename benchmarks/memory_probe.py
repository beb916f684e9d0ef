"""``python -m benchmarks.memory_probe``: where a standalone deployment's memory goes.

Starts the bench's infrastructure and a standalone Vectide (ports moved by
``VECTIDE_BENCH_PORT_SHIFT``), inserts ``--rows`` random ``--dim``-d vectors into one
collection of ``--index`` type, flushes, waits until the index files are built and handed
off, and samples meanwhile, every ``--every`` seconds, the standalone process's RSS and
what its query node's stores hold by kind (``vectide_querynode_held_bytes``). The timeline
goes to ``benchmarks/results/memory_probe.json``; the last sample is the loaded, indexed
state, reported per 1M vectors against the raw vector bytes.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import urllib.request
from typing import Any

import numpy as np
import psutil

from benchmarks.common import REPO, log, stop_on_sigterm
from benchmarks.milvus_ops import connect, create_collection, ingest, wait_settled
from benchmarks.targets import vectide_target

HELD = "vectide_querynode_held_bytes"


def held_bytes(metrics_port: int) -> dict[str, float]:
    """``store.kind`` -> bytes, scraped from the standalone's /metrics."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(HELD + "{"):
            labels, value = line[len(HELD) + 1 :].rsplit("} ", 1)
            tags = dict(part.split("=", 1) for part in labels.split(","))
            key = f"{tags['store'].strip(chr(34))}.{tags['kind'].strip(chr(34))}"
            out[key] = out.get(key, 0.0) + float(value)
    return out


class Sampler(threading.Thread):
    """RSS and held bytes every ``every`` seconds, with the phase they fell in."""

    def __init__(self, pid: int, metrics_port: int, every: float) -> None:
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.metrics_port = metrics_port
        self.every = every
        self.phase = "start"
        self.samples: list[dict[str, Any]] = []
        self.t0 = time.monotonic()
        self.stopped = threading.Event()

    def sample(self) -> dict[str, Any]:
        try:
            held = held_bytes(self.metrics_port)
        except OSError as exc:
            held = {"error": str(exc)}  # type: ignore[dict-item]
        point = {
            "t_s": round(time.monotonic() - self.t0, 1),
            "phase": self.phase,
            "rss_mib": self.proc.memory_info().rss / 2**20,
            "held_mib": {k: v / 2**20 for k, v in held.items() if isinstance(v, float)},
        }
        self.samples.append(point)
        return point

    def run(self) -> None:
        while not self.stopped.wait(self.every):
            self.sample()


def mappings(pid: int) -> dict[str, float]:
    """Resident MiB of the process's mappings by kind: glibc's main heap, anonymous ones by
    size (thread arenas are 64 MiB reservations; big arrays have mappings of their own),
    and files (code, libraries)."""
    out: dict[str, float] = {}
    kind = "file"
    with open(f"/proc/{pid}/smaps") as smaps:
        for line in smaps:
            head = line.split()
            if "-" in head[0] and len(head) >= 5:
                start, end = (int(x, 16) for x in head[0].split("-"))
                path = head[5] if len(head) > 5 else ""
                size = end - start
                if path == "[heap]":
                    kind = "heap"
                elif path.startswith("/"):
                    kind = "file"
                elif path:
                    kind = path
                else:
                    kind = "anon >= 32 MiB" if size >= 32 * 2**20 else "anon < 32 MiB"
            elif head[0] == "Rss:":
                out[kind] = out.get(kind, 0.0) + int(head[1]) / 1024
    return out


def main(argv: list[str] | None = None) -> None:
    stop_on_sigterm()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--index", default="HNSW", help="FLAT, IVF_FLAT or HNSW")
    p.add_argument("--batch", type=int, default=5000)
    p.add_argument("--every", type=float, default=2.0, help="seconds between samples")
    p.add_argument("--settle-timeout", type=float, default=1200.0)
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "memory_probe.json"))
    a = p.parse_args(argv)
    target = vectide_target("memprobe")
    target.config.infra.startup_timeout_s = 300  # Spark starts slowly on a busy box
    vectors = np.random.default_rng(7).standard_normal((a.rows, a.dim), dtype=np.float32)
    try:
        target.start()
        pid = target.processes()["standalone"]
        sampler = Sampler(pid, target.config.service.metrics_port, a.every)
        start = sampler.sample()
        sampler.start()
        client = connect(target.uri)
        create_collection(client, "probe", a.dim, "L2", a.index)
        sampler.phase = "insert"
        t_load = time.monotonic()
        res = ingest(client, "probe", vectors, a.batch, False, "probe")
        log(f"inserted {a.rows} rows at {res.rows_per_s:,.0f} rows/s; flushing")
        sampler.phase = "flush"
        t_flush = time.monotonic()
        client.flush("probe")
        flush_s = time.monotonic() - t_flush
        log(f"flushed in {flush_s:.1f}s; waiting for the index and the handoff")
        sampler.phase = "settle"
        settle_s = wait_settled(client, ["probe"], [pid], 5.0, "probe", 5.0, a.settle_timeout)
        loaded_s = time.monotonic() - t_load
        sampler.phase = "settled"
        time.sleep(3 * a.every)
        end = sampler.sample()
        sampler.stopped.set()
        raw_mib = a.rows * a.dim * 4 / 2**20
        growth = end["rss_mib"] - start["rss_mib"]
        summary = {
            "rows": a.rows,
            "dim": a.dim,
            "index": a.index,
            "insert_rows_per_s": res.rows_per_s,
            "flush_s": flush_s,
            "settle_s": settle_s,
            "load_and_index_s": loaded_s,
            "rss_start_mib": start["rss_mib"],
            "rss_end_mib": end["rss_mib"],
            "rss_peak_mib": max(s["rss_mib"] for s in sampler.samples),
            "raw_vector_mib": raw_mib,
            "rss_growth_per_1m_mib": growth / a.rows * 1e6,
            "rss_end_over_raw": end["rss_mib"] / raw_mib,
            "held_end_mib": end["held_mib"],
            "held_end_total_mib": sum(end["held_mib"].values()),
            "mappings_end_mib": mappings(pid),
        }
        log(json.dumps(summary, indent=1))
        with open(a.out, "w") as f:
            json.dump({"summary": summary, "samples": sampler.samples}, f, indent=1)
        log(f"timeline in {a.out}")
    finally:
        target.stop()


if __name__ == "__main__":
    main()
