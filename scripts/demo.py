"""A short tour of Vectide through unmodified pymilvus: create, insert 10k rows, search,
query, delete. Run against a deployment started by `vectide up` (make run does both)."""

from __future__ import annotations

import argparse
import time

import numpy as np
from pymilvus import MilvusClient

DIM = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--uri", default="http://127.0.0.1:19530")
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument(
        "--token", default="", help="user:password, when security.authorization_enabled is on"
    )
    parser.add_argument(
        "--verify", action="store_true", help="only count what an earlier run left (after down/up)"
    )
    args = parser.parse_args()

    client = MilvusClient(args.uri, token=args.token)
    print(f"connected to {args.uri} (Milvus API {client.get_server_version()})")
    name = "vectide_demo"
    if args.verify:
        count = client.query(name, filter="", output_fields=["count(*)"])[0]["count(*)"]
        print(f"{name!r} holds {count:,} rows")
        client.close()
        return
    if client.has_collection(name):
        client.drop_collection(name)
    client.create_collection(name, dimension=DIM, metric_type="COSINE", consistency_level="Strong")
    print(f"created collection {name!r}: {DIM}-d vectors, COSINE, Strong consistency")

    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((args.rows, DIM)).astype(np.float32)
    genres = ["jazz", "rock", "folk", "soul"]
    rows = [
        {"id": i, "vector": vectors[i], "genre": genres[i % 4], "year": 1950 + i % 70}
        for i in range(args.rows)
    ]
    start = time.perf_counter()
    for batch in range(0, args.rows, 2_000):
        client.insert(name, rows[batch : batch + 2_000])
    took = time.perf_counter() - start
    print(f"inserted {args.rows:,} rows in {took:.2f}s ({args.rows / took:,.0f} rows/s)")

    query = vectors[42] + 0.05 * rng.standard_normal(DIM).astype(np.float32)
    start = time.perf_counter()
    hits = client.search(
        name,
        [query],
        limit=3,
        filter='genre == "folk" or id == 42',
        output_fields=["genre", "year"],
    )[0]
    print(
        f"search (filter genre == 'folk' or id == 42) in "
        f"{(time.perf_counter() - start) * 1000:.0f} ms:"
    )
    for hit in hits:
        print(f"  id={hit['id']:<6} similarity={hit['distance']:.3f} {hit['entity']}")

    count = client.query(name, filter="year >= 2000", output_fields=["count(*)"])[0]["count(*)"]
    print(f"query: {count:,} rows with year >= 2000")

    client.delete(name, filter="year >= 2000")
    left = client.query(name, filter="", output_fields=["count(*)"])[0]["count(*)"]
    print(
        f"deleted them: {left:,} rows left, "
        f"{client.query(name, filter='year >= 2000', output_fields=['count(*)'])[0]['count(*)']}"
        " with year >= 2000"
    )
    started = time.perf_counter()
    client.flush(name)
    stats = client.describe_index(name, "vector")
    print(
        f"flushed to S3 in {time.perf_counter() - started:.1f}s ({stats['total_rows']:,} rows "
        "in segments): they survive `vectide down` and `vectide up`"
    )
    client.close()


if __name__ == "__main__":
    main()
