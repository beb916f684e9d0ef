"""Filter-only queries on one store of 1,000,000 rows: scan vs scalar index, side by side
(fields, JSON paths, NGRAM, RTREE).

Runs the query node's read kernel (``services/querynode/reads.query_store``: visibility,
filter, primary keys out) in this process on one in-memory store, three ways: without scalar
indexes (every row scanned), indexed as a sealed segment (one chunk of every row) and indexed
as growing rows (16,384-row chunks). No server, no client: the cost of the filter itself.

    .venv/bin/python -m benchmarks.scalar_filter [--rows 1000000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from vectide.services.common.msgstream.message import DataType, FieldColumn, InsertMsg
from vectide.services.common.requests import ShardQueryRequest
from vectide.services.common.schema import CollectionSchema, FieldSchema
from vectide.services.querynode.chunk_index import DEFAULT_CHUNK_ROWS
from vectide.services.querynode.reads import parse_filter, query_store
from vectide.services.querynode.scalar_index import ScalarIndexes
from vectide.services.querynode.segment import ShardStore

BATCH = 100_000
#: what ``ScalarIndexes.add`` takes (``IndexInfo.scalar_entry``): fields and JSON paths
INDEXES = {
    "id": "STL_SORT",
    "age": "STL_SORT",
    "name": "TRIE",
    "city": "BITMAP",
    'meta["zip"]': "VARCHAR",  # a JSON path index
    'meta["n"]': "DOUBLE",
    "note": "NGRAM:3:3",
    "place": "RTREE",
}
CITIES = ["paris", "rome", "oslo", "lima", "kyiv", "nara", "bern", "lund"]


def _schema() -> CollectionSchema:
    return CollectionSchema(
        "bench",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "age", DataType.INT64),
            FieldSchema(102, "name", DataType.VARCHAR, max_length=16),
            FieldSchema(103, "city", DataType.VARCHAR, max_length=8),
            FieldSchema(104, "meta", DataType.JSON),
            FieldSchema(105, "note", DataType.VARCHAR, max_length=32),
            FieldSchema(106, "place", DataType.GEOMETRY),
        ],
    )


def build_store(rows: int, seed: int = 1) -> ShardStore:
    rng = np.random.default_rng(seed)
    store = ShardStore(_schema(), [], chunk_rows=rows)
    for start in range(0, rows, BATCH):
        n = min(BATCH, rows - start)
        ids = np.arange(start, start + n, dtype=np.int64)
        columns = [
            FieldColumn(101, "age", DataType.INT64, rng.integers(0, 1_000_000, n)),
            FieldColumn(102, "name", DataType.VARCHAR, [f"u{i:07d}" for i in ids.tolist()]),
            FieldColumn(103, "city", DataType.VARCHAR, cities := rng.choice(CITIES, n).tolist()),
            FieldColumn(
                104,
                "meta",
                DataType.JSON,
                [json.dumps({"zip": f"z{i % 50_000:05d}", "n": i % 1000}) for i in ids.tolist()],
            ),
            FieldColumn(
                105,
                "note",
                DataType.VARCHAR,
                [f"{c}{i % 100_003}" for c, i in zip(cities, ids.tolist(), strict=True)],
            ),
            FieldColumn(
                106,
                "place",
                DataType.GEOMETRY,
                [f"POINT ({x:.5f} {y:.5f})" for x, y in rng.uniform(-60, 60, (n, 2)).tolist()],
            ),
        ]
        stamps = np.full(n, 10, np.int64)
        msg = InsertMsg(0, 10, 0, 1, 1, 1, "ch", ids, np.zeros(n, np.int64), stamps, columns)
        store.insert(msg)
    return store


def use_indexes(store: ShardStore, chunk_rows: int | None) -> float:
    """Give the store fresh indexes over ``chunk_rows``-row chunks (None: none); returns the
    seconds the build took."""
    store.scalar = ScalarIndexes(store.schema, chunk_rows or store.num_rows)
    if chunk_rows is None:
        return 0.0
    for name, index_type in INDEXES.items():
        store.scalar.add(name, index_type)
    started = time.perf_counter()
    store.build_scalar_indexes()
    return time.perf_counter() - started


def time_query(store: ShardStore, expr: str, repeat: int) -> tuple[float, int]:
    """(median milliseconds, rows) of a filter-only query at a snapshot seeing every row."""
    request = ShardQueryRequest(1, ["ch"], 0, 1.0, expr=expr)
    tree = parse_filter(expr, {})
    times, rows = [], 0
    for _ in range(repeat):
        started = time.perf_counter()
        rows = len(query_store(store, request, tree, 100).pks)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, rows


def filters(rows: int) -> list[str]:
    x = rows // 3
    return [
        f"id == {x}",
        f"id in [{x}, {x + 7}, {x + 99}]",
        f"id >= {x} and id < {x + rows // 1000}",
        "age < 1000",
        f'name == "u{x:07d}"',
        f'name like "u{x // 100:05d}%"',
        f'city == "rome" and id < {rows // 100}',
        "age > 500000",
        'meta["zip"] == "z01234"',
        'meta["n"] == 7 and age < 100000',
        'note like "%ome4321%"',
        'note like "%s%2%"',
        "ST_WITHIN(place, 'POLYGON ((10 10, 11 10, 11 11, 10 11, 10 10))')",
        "ST_DWITHIN(place, 'POINT (2.35 48.85)', 50000)",
        "ST_INTERSECTS(place, 'POLYGON ((-30 -30, 30 -30, 30 30, -30 30, -30 -30))')",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    started = time.perf_counter()
    store = build_store(args.rows)
    print(f"{args.rows:,} rows loaded in {time.perf_counter() - started:.1f} s")
    setups = {"scan": None, "sealed index": args.rows, "growing index": DEFAULT_CHUNK_ROWS}
    results: dict[str, list[tuple[float, int]]] = {}
    for label, chunk_rows in setups.items():
        built = use_indexes(store, chunk_rows)
        if chunk_rows is not None:
            print(f"{label}: {len(INDEXES)} indexes built in {built:.2f} s")
        results[label] = [time_query(store, expr, args.repeat) for expr in filters(args.rows)]
    print()
    print("| filter | rows | " + " | ".join(f"{label} ms" for label in setups) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in setups) + " |")
    for i, expr in enumerate(filters(args.rows)):
        cells = " | ".join(f"{results[label][i][0]:.3f}" for label in setups)
        print(f"| `{expr}` | {results['scan'][i][1]:,} | {cells} |")
        counts = {results[label][i][1] for label in setups}
        assert len(counts) == 1, f"{expr}: the setups disagree ({counts})"


if __name__ == "__main__":
    main()
