"""Full-text search (BM25) in one process: the analyzer's cost per inserted row, and a
search's cost through the query node's sparse postings against a scan of every non-zero.

A fault harness (services/testing.py: the real proxy and query node cores on an in-memory
broker) gets ``--rows`` generated texts (``--words`` words each, drawn from a Zipf
vocabulary, as natural text is) in a collection with a BM25 function, inserted through the
proxy (which analyzes each text) and flushed into a sealed segment. Then ``--queries`` texts
of 2-4 words are searched through the Milvus service (BM25, top 10), first as the query node
runs them (sorted postings: only the query's terms are read), then, as the baseline, with
every non-zero of the segment scanned per query (the layout before postings). Both must
return the same rows.

    .venv/bin/python -m benchmarks.text_search [--rows 100000] [--words 40] [--queries 200]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from pymilvus import DataType as ClientType
from pymilvus import Function, FunctionType, MilvusClient
from pymilvus.client.prepare import Prepare

from benchmarks.search_path import Context
from vectide.services.common.msgstream.message import DataType, FieldColumn
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.querynode import sparse
from vectide.services.testing import Harness

NAME = "text_search"
BATCH = 5_000


def vocabulary(size: int, rng: np.random.Generator) -> np.ndarray:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return np.array(["".join(rng.choice(letters, rng.integers(3, 10))) for _ in range(size)])


def texts(n: int, words: int, vocab: np.ndarray, rng: np.random.Generator) -> list[str]:
    ranks = (rng.zipf(1.2, (n, words)) - 1) % len(vocab)
    return [" ".join(vocab[r]) for r in ranks]


def create(service: MilvusService) -> None:
    schema = MilvusClient.create_schema()
    schema.add_field("id", ClientType.INT64, is_primary=True)
    schema.add_field("text", ClientType.VARCHAR, max_length=65_535, enable_analyzer=True)
    schema.add_field("sparse", ClientType.SPARSE_FLOAT_VECTOR)
    schema.add_function(
        Function(
            "bm25", FunctionType.BM25, input_field_names=["text"], output_field_names=["sparse"]
        )
    )
    request = Prepare.create_collection_request(NAME, schema)
    assert service.CreateCollection(request, Context()).code == 0


def search_request(text: str) -> bytes:
    return Prepare.search_requests_with_expr(
        collection_name=NAME,
        anns_field="sparse",
        param={"metric_type": "BM25"},
        limit=10,
        data=[text],
        expr=None,
        output_fields=[],
        expr_params={},
    )


def run_searches(service: MilvusService, requests: list) -> tuple[float, list[list[int]]]:
    """Median milliseconds a search, and each search's rows."""
    times, found = [], []
    for request in requests:
        start = time.perf_counter()
        reply = service.Search(request, Context())
        times.append(time.perf_counter() - start)
        assert reply.status.code == 0, reply.status.reason
        found.append(list(reply.results.ids.int_id.data))
    return statistics.median(times) * 1e3, found


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--words", type=int, default=40)
    p.add_argument("--queries", type=int, default=200)
    opts = p.parse_args(argv)
    rng = np.random.default_rng(0)
    vocab = vocabulary(50_000, rng)
    h = Harness()
    service = MilvusService(h.proxy)
    create(service)
    h.proxy.create_index(NAME, "sparse", "sparse", {"index_type": "SPARSE_INVERTED_INDEX"})
    h.proxy.load_collection(NAME)
    h.tick()
    analyzing = 0.0
    for start in range(0, opts.rows, BATCH):
        block = texts(min(BATCH, opts.rows - start), opts.words, vocab, rng)
        keys = np.arange(start, start + len(block), dtype=np.int64)
        columns = {
            "id": FieldColumn(100, "id", DataType.INT64, keys),
            "text": FieldColumn(101, "text", DataType.VARCHAR, block),
        }
        began = time.perf_counter()
        h.proxy.insert(NAME, "", columns, len(block))
        analyzing += time.perf_counter() - began
        h.tick()
        h.pump()
    h.proxy.flush([NAME])
    for _ in range(3):
        h.step()
    h.advance(3_600_000)  # Bounded reads at once
    print(
        f"{opts.rows:,} texts of {opts.words} words inserted: {analyzing / opts.rows * 1e6:.1f} us "
        "a row in the proxy's insert (analysis, hashing, the channel message)"
    )
    queries = [
        " ".join(vocab[rng.integers(0, 2000, rng.integers(2, 5))]) for _ in range(opts.queries)
    ]
    requests = [search_request(q) for q in queries]
    run_searches(service, requests[:10])
    postings_ms, postings_rows = run_searches(service, requests)
    scanned = sparse._SCANNED_TAIL
    for column in _sparse_columns(h):
        column._tail = [sparse._joined([column._sorted, *column._tail])]  # every non-zero
        column._sorted = sparse._empty()
    sparse._SCANNED_TAIL = 1 << 62  # never sorted again: the baseline scans them all
    try:
        scan_ms, scan_rows = run_searches(service, requests)
    finally:
        sparse._SCANNED_TAIL = scanned
    same = sum(a == b for a, b in zip(postings_rows, scan_rows, strict=True))
    print(f"BM25 search, top 10 (median of {opts.queries}):")
    print(f"  postings (as served)     {postings_ms:8.2f} ms  {1e3 / postings_ms:8,.0f}/s")
    print(f"  every non-zero scanned   {scan_ms:8.2f} ms  {1e3 / scan_ms:8,.0f}/s  (baseline)")
    print(
        f"  speed-up x{scan_ms / postings_ms:.1f}; same rows in {same} of {len(requests)} searches"
    )


def _sparse_columns(h: Harness) -> list[sparse.SparseColumn]:
    columns = []
    for node_id in h.nodes.live_nodes():
        for shard in h.nodes.node(node_id)._shards.values():
            for store in shard.stores():
                column = store._columns.get("sparse")
                if isinstance(column, sparse.SparseColumn):
                    columns.append(column)
    return columns


if __name__ == "__main__":
    main()
