"""Serial Strong searches for minutes: does their rate hold as the deployment keeps serving?

A Strong read that wrote a TimeTick into every channel added a record per channel per search,
and Tansu finds a fetch's offset more slowly the more records a topic holds: searches/s fell
by 7x within two minutes. Strong reads now carry fences instead (docs/architecture.md). This
loop keeps one client searching a small loaded collection with Strong consistency, nothing
else running, and prints per window the searches/s, p50 and p99 and how many records each
channel holds (its high watermark).

``python -m benchmarks.strong_loop [--minutes 3] [--window 20]``; uses the bench's ports
(``VECTIDE_BENCH_PORT_SHIFT`` moves them).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
from confluent_kafka import Consumer, TopicPartition

from benchmarks.common import log, rounded, stop_on_sigterm
from benchmarks.milvus_ops import connect, create_collection
from benchmarks.targets import vectide_target
from vectide.services.common.msgstream.channels import pchannels

DIM = 16


def window(client: Any, query: list[float], seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    ends = time.perf_counter() + seconds
    while time.perf_counter() < ends:
        started = time.perf_counter()
        client.search("strong", [query], limit=5, consistency_level="Strong")
        latencies.append((time.perf_counter() - started) * 1000)
    p50, p99 = np.percentile(latencies, [50, 99])
    return {"searches_per_s": len(latencies) / seconds, "p50_ms": p50, "p99_ms": p99}


def main(argv: list[str] | None = None) -> None:
    stop_on_sigterm()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=3.0)
    p.add_argument("--window", type=float, default=20.0, help="seconds per measured window")
    a = p.parse_args(argv)
    target = vectide_target(f"strong-{int(time.time())}")
    results: list[dict[str, Any]] = []
    try:
        target.start()
        client = connect(target.uri)
        create_collection(client, "strong", DIM, "L2", "FLAT")
        rng = np.random.default_rng(0)
        client.insert(
            "strong", [{"id": i, "vector": rng.random(DIM).tolist()} for i in range(1000)]
        )
        cluster = target.config.cluster
        channels = pchannels(cluster.name, cluster.dml_channels)
        watermarks = Consumer(
            {"bootstrap.servers": target.config.kafka.bootstrap_servers, "group.id": "strong-loop"}
        )
        query = rng.random(DIM).tolist()
        try:
            for i in range(max(1, int(a.minutes * 60 / a.window))):
                got = window(client, query, a.window)
                got["channel_records"] = [
                    watermarks.get_watermark_offsets(TopicPartition(ch, 0), timeout=5)[1]
                    for ch in channels
                ]
                results.append(got)
                log(
                    f"strong window {i + 1}: {got['searches_per_s']:.0f}/s, "
                    f"p50 {got['p50_ms']:.1f} ms, p99 {got['p99_ms']:.1f} ms, "
                    f"channel records {got['channel_records']}"
                )
        finally:
            watermarks.close()
    finally:
        target.stop()
    print(json.dumps(rounded({"window_s": a.window, "windows": results}), indent=1))


if __name__ == "__main__":
    main()
