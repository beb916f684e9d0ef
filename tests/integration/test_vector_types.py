"""Vector types beyond float32, and ARRAY fields, through unmodified pymilvus: each is
inserted, searched and read back, then flushed (Spark data node binlogs on S3), released and
loaded again (sealed segments), and searched the same.

Oracles: milvus-lite for sparse vectors, ARRAY fields, and float16/bfloat16 and int8 (as
float32 vectors holding the same values: lite 3.2 has no half-float type); numpy for binary vectors
(milvus-lite has none): HAMMING counts differing bits, JACCARD is 1 - |a&b| / |a|b|, as
Milvus's knowhere scores them.
"""

from __future__ import annotations

import base64
import time
import uuid

import numpy as np
import pytest
import requests
from pymilvus import AnnSearchRequest, DataType, MilvusClient, MilvusException, RRFRanker
from pymilvus.grpc_gen.common_pb2 import SegmentState

from tests.integration.conftest import free_port, isolated
from tests.integration.test_persistence import Persistent
from vectide.services.common.vector_types import as_float32, bfloat16_bits

ROWS = 300
TOP = 10


@pytest.fixture(scope="module")
def deployment(infra):
    config = isolated(infra, "vt")
    config.data.trigger_s = 1.0
    config.service.rootcoord_port = free_port()
    with Persistent(config).running() as holder:
        yield holder


@pytest.fixture(scope="module")
def lite(tmp_path_factory):
    client = MilvusClient(str(tmp_path_factory.mktemp("lite") / "oracle.db"))
    yield client
    client.close()


def _name(kind: str) -> str:
    return f"vt_{kind}_{uuid.uuid4().hex[:6]}"


def _reload(client: MilvusClient, name: str, indexed: tuple[str, ...] = ()) -> None:
    """Flush to S3 binlogs, wait for the index node's files of the ``indexed`` fields, then
    release and load: reads now come from sealed segments (and those index files)."""
    client.flush(name)
    deadline = time.monotonic() + 120
    for field in indexed:
        while client.describe_index(name, field)["indexed_rows"] < ROWS:
            assert time.monotonic() < deadline, f"no index file for {field}"
            time.sleep(0.5)
    client.release_collection(name)
    client.load_collection(name)
    segments = client.list_loaded_segments(name)
    assert sum(s.num_rows for s in segments if s.state == SegmentState.Flushed) == ROWS


# -- binary vectors ---------------------------------------------------------------------------


def _binary_oracle(bits: np.ndarray, query: np.ndarray, metric: str) -> np.ndarray:
    if metric == "HAMMING":
        return (bits != query).sum(axis=1).astype(np.float64)
    inter = (bits & query).sum(axis=1)
    union = (bits | query).sum(axis=1)
    return 1.0 - np.divide(inter, union, out=np.ones(len(bits)), where=union > 0)


def _check_binary_search(client, name, bits, queries, metric) -> None:
    packed = [np.packbits(q).tobytes() for q in queries]
    results = client.search(name, packed, limit=TOP, search_params={"metric_type": metric})
    for query, hits in zip(queries, results, strict=True):
        truth = _binary_oracle(bits, query, metric)
        got = [h["distance"] for h in hits]
        assert got == pytest.approx(sorted(truth)[:TOP], abs=1e-5)  # best first, exact
        for hit in hits:  # ties may order ids either way; each id's score must be its own
            assert hit["distance"] == pytest.approx(truth[hit["id"]], abs=1e-5)


@pytest.mark.parametrize(
    ("metric", "index_type"), [("HAMMING", "BIN_FLAT"), ("JACCARD", "BIN_IVF_FLAT")]
)
def test_binary_vectors_search_as_milvus_scores_them(deployment, metric, index_type):
    client = deployment.client
    name = _name("bin")
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("bv", DataType.BINARY_VECTOR, dim=64)
    index = client.prepare_index_params()
    index.add_index("bv", index_type=index_type, metric_type=metric, params={"nlist": 8})
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2, (ROWS, 64), dtype=np.uint8)
    client.insert(name, [{"id": i, "bv": np.packbits(bits[i]).tobytes()} for i in range(ROWS)])
    queries = rng.integers(0, 2, (3, 64), dtype=np.uint8)
    _check_binary_search(client, name, bits, queries, metric)
    got = client.query(name, "id in [0, 5]", output_fields=["bv"])
    assert {r["id"]: bytes(r["bv"][0]) for r in got} == {
        i: np.packbits(bits[i]).tobytes() for i in (0, 5)
    }

    _reload(client, name)
    _check_binary_search(client, name, bits, queries, metric)
    got = client.query(name, "id == 7", output_fields=["bv"])
    assert bytes(got[0]["bv"][0]) == np.packbits(bits[7]).tobytes()


def test_binary_vector_errors_name_the_problem(deployment):
    client = deployment.client
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("bv", DataType.BINARY_VECTOR, dim=12)
    with pytest.raises(MilvusException, match="not a multiple of 8"):
        client.create_collection(_name("bad"), schema=schema)
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("bv", DataType.BINARY_VECTOR, dim=16)
    name = _name("bin")
    client.create_collection(name, schema=schema)
    index = client.prepare_index_params()
    index.add_index("bv", index_type="HNSW", metric_type="HAMMING")
    with pytest.raises(MilvusException, match="HNSW for BINARY_VECTOR"):
        client.create_index(name, index)
    index = client.prepare_index_params()
    index.add_index("bv", index_type="BIN_FLAT", metric_type="L2")
    with pytest.raises(MilvusException, match="L2 not supported for BINARY_VECTOR"):
        client.create_index(name, index)


# -- float16 and bfloat16 ---------------------------------------------------------------------

HALF_DIM = 8


def _half_collections(client, lite, index_type: str) -> tuple[str, str]:
    name = _name("half")
    for target, kinds in (
        (client, (DataType.FLOAT16_VECTOR, DataType.BFLOAT16_VECTOR)),
        (lite, (DataType.FLOAT_VECTOR, DataType.FLOAT_VECTOR)),
    ):
        schema = target.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("h", kinds[0], dim=HALF_DIM)
        schema.add_field("b", kinds[1], dim=HALF_DIM)
        index = target.prepare_index_params()
        ours = target is client
        index.add_index("h", index_type=index_type if ours else "FLAT", metric_type="L2")
        index.add_index("b", index_type=index_type if ours else "FLAT", metric_type="IP")
        target.create_collection(
            name, schema=schema, index_params=index, consistency_level="Strong"
        )
    return name, name


def _half_search(client, name, field, queries, metric) -> list[list[tuple[int, float]]]:
    results = client.search(
        name, queries, anns_field=field, limit=TOP, search_params={"metric_type": metric}
    )
    return [[(h["id"], h["distance"]) for h in hits] for hits in results]


def _same_hits(got, want) -> None:
    for g, w in zip(got, want, strict=True):
        assert [i for i, _ in g] == [i for i, _ in w]
        assert [d for _, d in g] == pytest.approx([d for _, d in w], rel=1e-4, abs=1e-4)


@pytest.mark.parametrize("index_type", ["FLAT", "HNSW"])
def test_half_float_vectors_search_as_float32(deployment, lite, index_type):
    client = deployment.client
    name, _ = _half_collections(client, lite, index_type)
    rng = np.random.default_rng(11)
    h = rng.standard_normal((ROWS, HALF_DIM)).astype(np.float16)
    b = bfloat16_bits(rng.standard_normal((ROWS, HALF_DIM)).astype(np.float32))
    b_wide = as_float32(103, b)
    client.insert(name, [{"id": i, "h": h[i], "b": b[i].tobytes()} for i in range(ROWS)])
    lite.insert(
        name,
        [{"id": i, "h": h[i].astype(np.float32), "b": b_wide[i]} for i in range(ROWS)],
    )
    qh = rng.standard_normal((2, HALF_DIM)).astype(np.float16)
    qb = bfloat16_bits(rng.standard_normal((2, HALF_DIM)).astype(np.float32))

    def check() -> None:
        _same_hits(
            _half_search(client, name, "h", list(qh), "L2"),
            _half_search(lite, name, "h", [q.astype(np.float32) for q in qh], "L2"),
        )
        _same_hits(
            _half_search(client, name, "b", [q.tobytes() for q in qb], "IP"),
            _half_search(lite, name, "b", list(as_float32(103, qb)), "IP"),
        )
        got = client.query(name, "id in [3, 4]", output_fields=["h", "b"])
        for row in got:
            assert np.array_equal(np.frombuffer(row["h"][0], np.float16), h[row["id"]])
            assert bytes(row["b"][0]) == b[row["id"]].tobytes()

    check()
    _reload(client, name, () if index_type == "FLAT" else ("h", "b"))
    check()


@pytest.mark.parametrize("index_type", ["FLAT", "HNSW"])
def test_int8_vectors_search_as_float32(deployment, lite, index_type):
    """Int8Vector (Milvus 2.6): the oracle is milvus-lite over float32 vectors holding the
    same integers, L2 and COSINE; rows come back as int8, also after flush and reload."""
    client = deployment.client
    name = _name("int8")
    for target in (client, lite):
        ours = target is client
        schema = target.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        kind = DataType.INT8_VECTOR if ours else DataType.FLOAT_VECTOR
        schema.add_field("v", kind, dim=HALF_DIM)
        schema.add_field("c", kind, dim=HALF_DIM)
        index = target.prepare_index_params()
        index.add_index("v", index_type=index_type if ours else "FLAT", metric_type="L2")
        index.add_index("c", index_type=index_type if ours else "FLAT", metric_type="COSINE")
        target.create_collection(
            name, schema=schema, index_params=index, consistency_level="Strong"
        )
    rng = np.random.default_rng(13)
    v = rng.integers(-128, 128, (ROWS, HALF_DIM), dtype=np.int8)
    c = rng.integers(-128, 128, (ROWS, HALF_DIM), dtype=np.int8)
    client.insert(name, [{"id": i, "v": v[i], "c": c[i]} for i in range(ROWS)])
    lite.insert(
        name,
        [
            {"id": i, "v": v[i].astype(np.float32), "c": c[i].astype(np.float32)}
            for i in range(ROWS)
        ],
    )
    queries = rng.integers(-128, 128, (2, HALF_DIM), dtype=np.int8)

    def check() -> None:
        for field, metric in (("v", "L2"), ("c", "COSINE")):
            _same_hits(
                _half_search(client, name, field, list(queries), metric),
                _half_search(lite, name, field, [q.astype(np.float32) for q in queries], metric),
            )
        for row in client.query(name, "id in [3, 4]", output_fields=["v"]):
            got = np.frombuffer(bytes(row["v"][0]), np.int8)
            assert got.tolist() == v[row["id"]].tolist()

    check()
    _reload(client, name, () if index_type == "FLAT" else ("v", "c"))
    check()
    client.drop_collection(name)


# -- sparse vectors ---------------------------------------------------------------------------


def _sparse_rows(rng: np.random.Generator, count: int) -> list[dict[int, float]]:
    """Rows of 1-6 non-zeros over 40 dimensions, values on a 1/8 grid so sums are exact."""
    rows = []
    for _ in range(count):
        keys = rng.choice(40, size=int(rng.integers(1, 7)), replace=False)
        rows.append({int(k): float(rng.integers(1, 17)) / 8 for k in keys})
    return rows


def _sparse_hits(client, name, queries, params) -> list[list[tuple[int, float]]]:
    results = client.search(
        name, queries, anns_field="sv", limit=TOP, output_fields=["sv"],
        search_params={"metric_type": "IP", "params": params},
    )  # fmt: skip
    return [sorted((h["id"], h["distance"]) for h in hits) for hits in results]


@pytest.mark.parametrize("index_type", ["SPARSE_INVERTED_INDEX", "SPARSE_WAND"])
def test_sparse_vectors_match_milvus_lite(deployment, lite, index_type):
    client = deployment.client
    name = _name("sparse")
    for target in (client, lite):
        schema = target.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("sv", DataType.SPARSE_FLOAT_VECTOR)
        index = target.prepare_index_params()
        ours = target is client  # milvus-lite has SPARSE_INVERTED_INDEX only
        kind = index_type if ours else "SPARSE_INVERTED_INDEX"
        index.add_index("sv", index_type=kind, metric_type="IP")
        target.create_collection(
            name, schema=schema, index_params=index, consistency_level="Strong"
        )
    rng = np.random.default_rng(5)
    vectors = _sparse_rows(rng, ROWS)
    for target in (client, lite):
        target.insert(name, [{"id": i, "sv": v} for i, v in enumerate(vectors)])
    # queries whose scores have no ties (distinct powers of two), so ids compare exactly
    queries = [{3: 1.0, 17: 2.0, 30: 4.0}, {0: 8.0, 5: 1.0}]

    def check() -> None:
        got = _sparse_hits(client, name, queries, {"drop_ratio_search": 0.0})
        assert got == _sparse_hits(lite, name, queries, {"drop_ratio_search": 0.0})
        row = client.query(name, "id == 9", output_fields=["sv"])[0]["sv"]
        assert row == pytest.approx(vectors[9])

    check()
    _reload(client, name)
    check()
    # drop_ratio_search drops the query's smallest values: int(0.7 * 3) of them, {30: 4.0} stays
    dropped = _sparse_hits(client, name, [queries[0]], {"drop_ratio_search": 0.7})
    assert dropped == _sparse_hits(client, name, [{30: 4.0}], {})
    with pytest.raises(MilvusException, match="drop_ratio_search"):
        _sparse_hits(client, name, queries, {"drop_ratio_search": 1.5})
    index = client.prepare_index_params()
    index.add_index("sv", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    client.release_collection(name)
    client.drop_index(name, "sv")
    with pytest.raises(MilvusException, match="BM25 is the metric of a BM25"):
        client.create_index(name, index)


# -- ARRAY fields -----------------------------------------------------------------------------

ARRAY_FILTERS = [
    "array_contains(ints, 3)",
    "array_contains_all(ints, [1, 2])",
    "array_contains_any(tags, ['red', 'blue'])",
    "array_length(ints) == 2",
    "ints[0] > 3",
    "ints[4] == 1 or tags[2] == 'red'",
    "floats[1] < 0.5",
    "array_contains(flags, true) and id < 100",
    "not array_contains_any(ints, [0, 9])",
    "opt is null",
    "array_contains(opt, 3)",
]


def _array_schema(target):
    schema = target.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=4)
    schema.add_field("ints", DataType.ARRAY, element_type=DataType.INT64, max_capacity=5)
    schema.add_field("small", DataType.ARRAY, element_type=DataType.INT8, max_capacity=3)
    schema.add_field("floats", DataType.ARRAY, element_type=DataType.DOUBLE, max_capacity=4)
    schema.add_field("flags", DataType.ARRAY, element_type=DataType.BOOL, max_capacity=2)
    schema.add_field(
        "tags", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=3, max_length=8
    )
    schema.add_field(
        "opt", DataType.ARRAY, element_type=DataType.INT32, max_capacity=2, nullable=True
    )
    return schema


def _array_rows(rng: np.random.Generator, count: int) -> list[dict]:
    colours = ["red", "green", "blue", "grey"]
    return [
        {
            "id": i,
            "vec": rng.standard_normal(4).round(3).tolist(),
            "ints": rng.integers(0, 10, int(rng.integers(0, 6))).tolist(),
            "small": rng.integers(-100, 100, int(rng.integers(0, 4))).tolist(),
            "floats": (rng.integers(0, 8, int(rng.integers(0, 5))) / 8).tolist(),
            "flags": rng.integers(0, 2, int(rng.integers(0, 3))).astype(bool).tolist(),
            "tags": [colours[c] for c in rng.integers(0, 4, int(rng.integers(0, 4)))],
            "opt": None if i % 3 else [i % 4, 2],
        }
        for i in range(count)
    ]


def test_array_fields_match_milvus_lite(deployment, lite):
    client = deployment.client
    name = _name("array")
    for target in (client, lite):
        index = target.prepare_index_params()
        index.add_index("vec", index_type="FLAT", metric_type="L2")
        target.create_collection(
            name, schema=_array_schema(target), index_params=index, consistency_level="Strong"
        )
        target.insert(name, _array_rows(np.random.default_rng(3), ROWS))
    described = {f["name"]: f for f in client.describe_collection(name)["fields"]}
    assert described["tags"]["element_type"] == DataType.VARCHAR
    assert described["tags"]["params"] == {"max_capacity": 3, "max_length": 8}

    def rows(target, expr: str) -> list[dict]:
        got = target.query(
            name, expr, output_fields=["ints", "small", "floats", "flags", "tags", "opt"]
        )
        return sorted((dict(r) for r in got), key=lambda r: r["id"])

    def check() -> None:
        for expr in ARRAY_FILTERS:
            assert rows(client, expr) == rows(lite, expr), expr
        hits = client.search(name, [[0.1, 0.2, 0.3, 0.4]], limit=5, output_fields=["tags"])
        want = lite.search(name, [[0.1, 0.2, 0.3, 0.4]], limit=5, output_fields=["tags"])
        assert [(h["id"], h["entity"]["tags"]) for h in hits[0]] == [
            (h["id"], h["entity"]["tags"]) for h in want[0]
        ]

    check()
    _reload(client, name)
    check()


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"ints": [1, 2, 3, 4, 5, 6]}, "exceeds max_capacity 5"),
        ({"tags": ["much too long"]}, "exceeds max_length 8"),
        ({"small": [300]}, "out of range for INT8"),
    ],
)
def test_array_values_are_checked(deployment, row, message):
    client = deployment.client
    name = _name("array")
    client.create_collection(name, schema=_array_schema(client))
    base = {"id": 1, "vec": [0.0] * 4, "ints": [], "small": [], "floats": [], "flags": [],
            "tags": [], "opt": None}  # fmt: skip
    with pytest.raises(MilvusException, match=message):
        client.insert(name, [base | row])


def test_iterators_and_ranges_work_on_the_new_types(deployment):
    """search_iterator pages a float16 field (every row once, best first), and a range
    search on a binary field keeps exactly the band's rows (Milvus's iterator v2 and score
    bands, over the new types' scores)."""
    client = deployment.client
    name = _name("iter")
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("h", DataType.FLOAT16_VECTOR, dim=HALF_DIM)
    schema.add_field("bv", DataType.BINARY_VECTOR, dim=32)
    index = client.prepare_index_params()
    index.add_index("h", index_type="FLAT", metric_type="L2")
    index.add_index("bv", index_type="BIN_FLAT", metric_type="HAMMING")
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    rng = np.random.default_rng(2)
    h = rng.standard_normal((ROWS, HALF_DIM)).astype(np.float16)
    bits = rng.integers(0, 2, (ROWS, 32), dtype=np.uint8)
    client.insert(
        name,
        [{"id": i, "h": h[i], "bv": np.packbits(bits[i]).tobytes()} for i in range(ROWS)],
    )
    iterator = client.search_iterator(
        name, [h[0]], anns_field="h", batch_size=70, search_params={"metric_type": "L2"}
    )
    seen: list[tuple[int, float]] = []
    while page := iterator.next():
        seen.extend((hit["id"], hit["distance"]) for hit in page)
    iterator.close()
    truth = ((h.astype(np.float32) - h[0].astype(np.float32)) ** 2).sum(axis=1)
    assert sorted(i for i, _ in seen) == list(range(ROWS))
    assert [d for _, d in seen] == pytest.approx(sorted(truth.tolist()), rel=1e-4, abs=1e-4)

    hamming = (bits != bits[5]).sum(axis=1)
    hits = client.search(
        name, [np.packbits(bits[5]).tobytes()], anns_field="bv", limit=ROWS,
        search_params={"metric_type": "HAMMING", "params": {"radius": 14, "range_filter": 10}},
    )[0]  # fmt: skip
    assert (
        sorted(h["id"] for h in hits) == np.flatnonzero((hamming >= 10) & (hamming < 14)).tolist()
    )


def test_every_type_crosses_the_internal_rpc_of_a_cluster(cluster):
    """Query nodes in their own processes: query vectors, hits and outputs of each type
    travel the proxy <-> query node RPC."""
    client = MilvusClient(cluster.uris[0])
    name = _name("cluster")
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("bv", DataType.BINARY_VECTOR, dim=16)
    schema.add_field("h", DataType.BFLOAT16_VECTOR, dim=2)
    schema.add_field("sv", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("arr", DataType.ARRAY, element_type=DataType.INT64, max_capacity=2)
    index = client.prepare_index_params()
    index.add_index("bv", index_type="BIN_FLAT", metric_type="HAMMING")
    index.add_index("h", index_type="FLAT", metric_type="IP")
    index.add_index("sv", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    rows = [
        {
            "id": i,
            "bv": np.packbits(np.array([i >> k & 1 for k in range(16)], np.uint8)).tobytes(),
            "h": bfloat16_bits(np.array([i, 1.0], np.float32)).tobytes(),
            "sv": {i % 7: float(i)},
            "arr": [i, i % 3],
        }
        for i in range(1, 41)
    ]
    client.insert(name, rows)
    try:
        fields = ["bv", "h", "sv", "arr"]
        hits = client.search(name, [rows[4]["bv"]], anns_field="bv", limit=1, output_fields=fields)[
            0
        ]
        assert hits[0]["id"] == 5 and hits[0]["distance"] == 0.0
        assert hits[0]["entity"]["sv"] == {5: 5.0} and hits[0]["entity"]["arr"] == [5, 2]
        assert hits[0]["entity"]["h"] == rows[4]["h"]  # search hits carry the bytes bare
        hits = client.search(name, [{3: 1.0}], anns_field="sv", limit=3)[0]
        assert [(h["id"], h["distance"]) for h in hits] == [(38, 38.0), (31, 31.0), (24, 24.0)]
        query = bfloat16_bits(np.array([1.0, 0.0], np.float32)).tobytes()
        hits = client.search(name, [query], anns_field="h", limit=2)[0]
        assert [(h["id"], h["distance"]) for h in hits] == [(40, 40.0), (39, 39.0)]
        got = client.query(name, "array_contains(arr, 7)", output_fields=["arr"])
        assert sorted((r["id"], r["arr"]) for r in got) == [(7, [7, 1])]
    finally:
        client.drop_collection(name)
        client.close()


def test_hybrid_search_fuses_dense_and_sparse_as_milvus_lite(deployment, lite):
    """The common dense + sparse hybrid: RRF over a float and a sparse search."""
    client = deployment.client
    name = _name("hybrid")
    rng = np.random.default_rng(13)
    dense = rng.standard_normal((ROWS, 4)).round(3)
    sparse = _sparse_rows(rng, ROWS)
    for target in (client, lite):
        schema = target.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("vec", DataType.FLOAT_VECTOR, dim=4)
        schema.add_field("sv", DataType.SPARSE_FLOAT_VECTOR)
        index = target.prepare_index_params()
        index.add_index("vec", index_type="FLAT", metric_type="L2")
        index.add_index("sv", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
        target.create_collection(
            name, schema=schema, index_params=index, consistency_level="Strong"
        )
        target.insert(
            name, [{"id": i, "vec": dense[i].tolist(), "sv": sparse[i]} for i in range(ROWS)]
        )
    requests = [
        AnnSearchRequest([[0.3, -0.1, 0.8, 0.2]], "vec", {"metric_type": "L2"}, limit=20),
        AnnSearchRequest([{3: 1.0, 17: 2.0, 30: 4.0}], "sv", {"metric_type": "IP"}, limit=20),
    ]

    def fused(target) -> list[int]:
        hits = target.hybrid_search(name, requests, RRFRanker(60), limit=TOP)[0]
        return [h["id"] for h in hits]

    assert fused(client) == fused(lite)


def test_rest_carries_every_vector_type_and_array_fields(deployment):
    """REST v2 as Milvus's: an Array, a sparse, a binary, a bfloat16 and an int8 field in
    ``create``;
    rows with lists, ``{"index": value}`` objects, byte arrays and float arrays (or base64);
    searches of each vector type; vectors returned as base64, sparse ones as objects."""
    base = f"http://127.0.0.1:{deployment.config.service.http_port}/v2/vectordb"

    def post(path: str, body: dict, code: int = 0) -> dict:
        reply = requests.post(f"{base}/{path}", json=body, timeout=60).json()
        assert reply["code"] == code, reply
        return reply

    name = _name("rest")
    fields = [
        {"fieldName": "id", "dataType": "Int64", "isPrimary": True},
        {"fieldName": "sv", "dataType": "SparseFloatVector"},
        {"fieldName": "tags", "dataType": "Array", "elementDataType": "VarChar",
         "elementTypeParams": {"max_capacity": 3, "max_length": 8}},
        {"fieldName": "bv", "dataType": "BinaryVector", "elementTypeParams": {"dim": 16}},
        {"fieldName": "h", "dataType": "BFloat16Vector", "elementTypeParams": {"dim": 2}},
        {"fieldName": "i8", "dataType": "Int8Vector", "elementTypeParams": {"dim": 2}},
    ]  # fmt: skip
    index = [
        {"fieldName": "sv", "metricType": "IP", "indexType": "SPARSE_INVERTED_INDEX"},
        {"fieldName": "bv", "metricType": "HAMMING", "indexType": "BIN_FLAT"},
        {"fieldName": "h", "metricType": "L2", "indexType": "FLAT"},
        {"fieldName": "i8", "metricType": "L2", "indexType": "HNSW"},
    ]
    post("collections/create", {"collectionName": name, "schema": {"fields": fields},
                                "indexParams": index})  # fmt: skip
    two = base64.b64encode(bfloat16_bits(np.array([2.0, 0.5], np.float32)).tobytes()).decode()
    rows = [
        {"id": 1, "sv": {"2": 0.5, "9": 1.0}, "tags": ["red"], "bv": [1, 0], "h": [1.0, 0.5],
         "i8": [-3, 4]},
        {"id": 2, "sv": {"9": 3.0}, "tags": ["blue", "red"], "bv": "/wE=", "h": two,
         "i8": [127, -128]},
    ]  # fmt: skip
    post("entities/insert", {"collectionName": name, "data": rows})
    bad = rows[0] | {"bv": [1, 2, 3]}
    refused = post("entities/insert", {"collectionName": name, "data": [bad]}, code=1804)
    assert "expected 2" in refused["message"]

    def search(field: str, data: list, outputs: list[str]) -> list[dict]:
        return post("entities/search", {
            "collectionName": name, "annsField": field, "data": data, "limit": 5,
            "outputFields": outputs, "consistencyLevel": "Strong",
        })["data"]  # fmt: skip

    hits = search("sv", [{"9": 1.0}], ["tags", "sv"])
    assert [(h["id"], h["distance"], h["tags"]) for h in hits] == [
        (2, 3.0, ["blue", "red"]),
        (1, 1.0, ["red"]),
    ]
    assert hits[1]["sv"] == {"2": 0.5, "9": 1.0}
    hits = search("bv", [[255, 1]], ["bv", "h"])
    assert [(h["id"], h["distance"]) for h in hits] == [(2, 0.0), (1, 8.0)]
    assert hits[0]["bv"] == "/wE=" and hits[0]["h"] == two
    hits = search("h", [[2.0, 0.5]], [])
    assert [(h["id"], h["distance"]) for h in hits] == [(2, 0.0), (1, 1.0)]
    hits = search("i8", [[-2, 4]], ["i8"])
    assert [(h["id"], h["distance"], h["i8"]) for h in hits] == [
        (1, 1.0, [-3, 4]),
        (2, 129.0**2 + 132.0**2, [127, -128]),
    ]
    got = post("entities/query", {
        "collectionName": name, "filter": 'array_contains(tags, "blue")',
        "outputFields": ["tags"], "consistencyLevel": "Strong",
    })["data"]  # fmt: skip
    assert got == [{"id": 2, "tags": ["blue", "red"]}]


def test_full_text_search_crosses_the_internal_rpc_of_a_cluster(cluster):
    """A BM25 function's schema reaches every role over RPC; the proxy analyzes, the query
    node in its own process scores: the formula's scores, and text_match's rows."""
    from tests.integration.test_full_text_search import QUERIES, TEXTS, bm25, check, create, search

    client = MilvusClient(cluster.uris[0])
    name = _name("fts")
    create(client, name)
    try:
        client.insert(
            name, [{"id": i, "text": t, "dense": [0.0, 1.0]} for i, t in enumerate(TEXTS)]
        )
        for query, hits in zip(QUERIES, search(client, name, QUERIES), strict=True):
            check(hits, bm25(query, dict(enumerate(TEXTS))), 3)
        matched = client.query(name, filter="text_match(text, 'kafka')", consistency_level="Strong")
        assert [r["id"] for r in matched] == [3]
        assert client.describe_collection(name)["functions"][0]["name"] == "text_bm25"
    finally:
        client.drop_collection(name)
