"""Query nodes that scale out (issue 18): 8 concurrent clients against a cluster with one query
node, then with a second one that joined and took sealed segments in a balance round.

A `vectide up --mode cluster` deployment (rootcoord, proxy, query node, the Spark data node on
a Spark master and worker) loads the dataset as flushed, HNSW-indexed segments, measures
search throughput, scales to two query nodes (`vectide up --querynodes 2` on the running
deployment), waits until both serve segments, and measures again, reporting each node's
memory use. On one 2-core machine the second node shares the same cores: the figure shows
what the scatter costs or gains there, not what a second machine would add.

    python -m benchmarks.query_scaling [--rows 50000] [--clients 8] [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
from pymilvus import DataType, MilvusClient

from benchmarks import measure
from benchmarks.common import log, stop_on_sigterm
from benchmarks.targets import VectideTarget, bench_config
from vectide.services.infra.query_status import query_status
from vectide.services.infra.spark import master_url

#: the collection is about 40 % of one node's limit, so one node holding it all sets off a round
MEMORY_LIMIT_MB = 64
FLUSHES = 4
HNSW = {"M": 16, "efConstruction": 200}
SEARCH = {"params": {"ef": 64}}


def scaling_target(name: str) -> VectideTarget:
    config = bench_config(name)
    config.query.memory_limit_mb = MEMORY_LIMIT_MB
    config.query.balance_interval_s = 5.0
    config.data.compaction_enabled = False  # it would merge the four segments into one
    config.infra.spark_workers = 1
    config.infra.spark_worker_cores = 1
    config.infra.spark_worker_memory_mb = 1024
    config.data.spark_master = master_url(config)
    return VectideTarget(
        "vectide-cluster", f"http://{config.service.host}:{config.service.proxy_port}", config
    )


def run(
    vectors: np.ndarray, queries: np.ndarray, clients: int = 8, seconds: float = 10.0
) -> dict[str, Any]:
    target = scaling_target(f"scale-{int(time.time())}")
    shape: dict[str, Any] = dict(proxies=1, datanode=True, ingest=0, rootcoords=1)
    out: dict[str, Any] = {"rows": len(vectors), "memory_limit_mb": MEMORY_LIMIT_MB}
    try:
        target.start_infra()
        target.deployment.up("cluster", querynodes=1, **shape)
        client = MilvusClient(target.uri)
        name = load(client, vectors)
        searcher = measure.milvus_searcher(target.uri, name, 10, SEARCH)
        log(f"query scaling: {clients} clients, 1 query node")
        out["one_node"] = measure.concurrent_throughput(searcher, queries, clients, seconds)
        out["one_node"]["nodes"] = nodes(target)
        joined = time.monotonic()
        target.deployment.up("cluster", querynodes=2, **shape)
        out["join_s"] = round(time.monotonic() - joined, 1)
        started = time.monotonic()
        while len(serving(client, name)) < 2 and time.monotonic() - started < 60:
            time.sleep(0.5)
        out["balanced_after_s"] = round(time.monotonic() - started, 1)
        log(f"query scaling: {clients} clients, 2 query nodes")
        out["two_nodes"] = measure.concurrent_throughput(searcher, queries, clients, seconds)
        out["two_nodes"]["nodes"] = nodes(target)
        usage = [n.get("memory_percent", 0.0) for n in out["two_nodes"]["nodes"]]
        out["memory_spread_percent"] = round(max(usage) - min(usage), 1) if usage else None
        out["ratio"] = round(out["two_nodes"]["qps"] / out["one_node"]["qps"], 2)
        client.close()
    finally:
        target.stop()
    return out


def load(client: MilvusClient, vectors: np.ndarray) -> str:
    """The vectors as ``FLUSHES`` flushed segments with HNSW indexes, loaded on one node."""
    name = "scaling"
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=vectors.shape[1])
    index = client.prepare_index_params()
    index.add_index("vec", index_type="HNSW", metric_type="L2", params=HNSW)
    client.create_collection(name, schema=schema, index_params=index)
    step = -(-len(vectors) // FLUSHES)
    for start in range(0, len(vectors), step):
        for b in range(start, min(start + step, len(vectors)), 5_000):
            end = min(b + 5_000, start + step, len(vectors))
            client.insert(name, [{"id": i, "vec": vectors[i]} for i in range(b, end)])
        client.flush(name)
    while True:  # searches measure the index, not exact scans of unindexed segments
        described = client.describe_index(name, "vec")
        if described.get("pending_index_rows", 0) == 0 and described.get("indexed_rows"):
            break
        time.sleep(1)
    client.release_collection(name)
    client.load_collection(name)
    return name


def serving(client: MilvusClient, name: str) -> set[int]:
    infos = client._get_connection().get_query_segment_info(name)
    return {node for info in infos for node in info.nodeIds}


def nodes(target: VectideTarget) -> list[dict[str, Any]]:
    roles = target.deployment.status()
    urls = [r.metrics for r in roles if r.role == "querynode" and r.pid and r.metrics != "-"]
    return list(query_status(urls)["nodes"])


def main(argv: list[str] | None = None) -> None:
    stop_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(7)
    vectors = rng.random((args.rows, args.dim), dtype=np.float32)
    queries = rng.random((200, args.dim), dtype=np.float32)
    print(json.dumps(run(vectors, queries, args.clients, args.seconds), indent=1))


if __name__ == "__main__":
    main()
