"""The pure parts of binary, half-float, int8 and sparse vectors and ARRAY fields: conversions,
scores, the channel codec and binlogs, the shard store's search, and the proxy's checks."""

import base64
import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pymilvus.grpc_gen import common_pb2, schema_pb2

from vectide.services.common import binlog, vector_types
from vectide.services.common.errors import MilvusError
from vectide.services.common.index_spec import is_interim
from vectide.services.common.msgstream import codec
from vectide.services.common.msgstream.message import DataType, FieldColumn, InsertMsg
from vectide.services.common.requests import ShardSearchRequest
from vectide.services.common.results import SearchHits
from vectide.services.common.rpc import codec as rpc_codec
from vectide.services.common.rpc import types  # noqa: F401  (registers the RPC dataclasses)
from vectide.services.common.schema import CollectionSchema, FieldSchema, IndexInfo
from vectide.services.proxy import convert, rest_vectors, typed_fields
from vectide.services.proxy.index_kinds import index_kind
from vectide.services.querynode.segment import ShardStore
from vectide.services.querynode.sparse import SparseColumn

SPARSE = vector_types.sparse_row


def test_bfloat16_rounds_to_nearest_even_and_widens_exactly():
    values = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5, 1 + 2**-7], np.float32)
    bits = vector_types.bfloat16_bits(values)
    assert bits.tolist() == [0x3F80, 0x3F80, 0x3F82, 0xC020, 0x3F81]
    wide = vector_types.as_float32(DataType.BFLOAT16_VECTOR, bits)
    assert wide.tolist() == [1.0, 1.0, 1 + 2**-6, -2.5, 1 + 2**-7]
    half = np.array([0.5, -3.25], np.float16)
    assert vector_types.as_float32(DataType.FLOAT16_VECTOR, half).tolist() == [0.5, -3.25]


def test_binary_scores_count_bits_as_milvus():
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2, (50, 24), dtype=np.uint8)
    bits[0] = 0
    queries = np.vstack([bits[3], np.zeros(24, np.uint8)])
    packed, q = np.packbits(bits, axis=1), np.packbits(queries, axis=1)
    hamming = vector_types.binary_scores(q, packed, "HAMMING")
    assert hamming.tolist() == [(bits != x).sum(axis=1).tolist() for x in queries]
    jaccard = vector_types.binary_scores(q, packed, "JACCARD")
    inter, union = (bits & queries[0]).sum(axis=1), (bits | queries[0]).sum(axis=1)
    want = 1 - np.divide(inter, union, out=np.ones(50), where=union > 0)
    assert jaccard[0] == pytest.approx(want)
    assert jaccard[1, 0] == 0.0  # two all-zero vectors are identical


def test_sparse_rows_are_checked():
    row = SPARSE({7: 1.5, 2: -1.0})
    indices, values = vector_types.sparse_entries(row)
    assert indices.tolist() == [2, 7] and values.tolist() == [-1.0, 1.5]
    pairs = np.array([(5, 1.0), (3, 1.0)], dtype=[("i", "<u4"), ("v", "<f4")]).tobytes()
    with pytest.raises(ValueError, match="ascending"):
        vector_types.check_sparse(pairs)
    with pytest.raises(ValueError, match="pairs"):
        vector_types.check_sparse(b"\x00" * 5)
    with pytest.raises(ValueError, match="finite"):
        vector_types.check_sparse(SPARSE({1: float("nan")}))
    with pytest.raises(ValueError, match="drop_ratio_search"):
        vector_types.drop_ratio({"drop_ratio_search": 1})


def test_sparse_column_scores_inner_products_within_the_mask():
    column = SparseColumn()
    column.append([SPARSE({1: 1.0, 4: 2.0}), SPARSE({4: 3.0}), SPARSE({9: 5.0})])
    column.append([SPARSE({1: 4.0})])
    query = [SPARSE({1: 1.0, 4: 1.0})]
    scores, rows = column.search(query, 10, np.ones(4, bool), {})
    # row 2 shares no index with the query: not a hit; ties keep row order
    assert rows.tolist() == [[3, 0, 1]] and scores.tolist() == [[4.0, 3.0, 3.0]]
    scores, rows = column.search(query, 1, np.array([True, True, True, False]), {})
    assert rows.tolist() == [[0]] and scores.tolist() == [[3.0]]
    # dropping half of the query's values keeps the larger one, {4: 1.0}
    dropped = [SPARSE({1: 0.5, 4: 1.0})]
    scores, rows = column.search(dropped, 10, np.ones(4, bool), {"drop_ratio_search": 0.5})
    assert rows.tolist() == [[1, 0]] and scores.tolist() == [[3.0, 2.0]]


def _schema() -> CollectionSchema:
    return CollectionSchema(
        "c",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "bin", DataType.BINARY_VECTOR, dim=16),
            FieldSchema(102, "half", DataType.FLOAT16_VECTOR, dim=2),
            FieldSchema(103, "bf", DataType.BFLOAT16_VECTOR, dim=2),
            FieldSchema(104, "sp", DataType.SPARSE_FLOAT_VECTOR),
            FieldSchema(105, "arr", DataType.ARRAY, element_type=5, max_capacity=3),
            FieldSchema(106, "i8", DataType.INT8_VECTOR, dim=4),
        ],
    )


def _columns(n: int) -> list[FieldColumn]:
    rng = np.random.default_rng(n)
    return [
        FieldColumn(101, "bin", DataType.BINARY_VECTOR, rng.integers(0, 256, (n, 2), np.uint8), 16),
        FieldColumn(102, "half", DataType.FLOAT16_VECTOR, rng.random((n, 2)).astype(np.float16), 2),
        FieldColumn(
            103, "bf", DataType.BFLOAT16_VECTOR, vector_types.bfloat16_bits(rng.random((n, 2))), 2
        ),
        FieldColumn(104, "sp", DataType.SPARSE_FLOAT_VECTOR, [SPARSE({i: 1.0}) for i in range(n)]),
        FieldColumn(105, "arr", DataType.ARRAY, [json.dumps([i, i + 1]) for i in range(n)]),
        FieldColumn(106, "i8", DataType.INT8_VECTOR, rng.integers(-128, 128, (n, 4), np.int8), 4),
    ]


def _insert(n: int) -> InsertMsg:
    return InsertMsg(
        1, 10, 1, 1, 1, 1, "v0", np.arange(n, dtype=np.int64), np.zeros(n, np.int64),
        np.full(n, 5, np.int64), _columns(n),
    )  # fmt: skip


def test_new_columns_cross_the_channel_and_binlogs_unchanged():
    msg = _insert(4)
    back = codec.decode(codec.encode(msg))
    for sent, got in zip(msg.fields, back.fields, strict=True):
        assert got.data_type == sent.data_type
        if isinstance(sent.data, np.ndarray):
            assert got.data.dtype == sent.data.dtype and np.array_equal(got.data, sent.data)
        else:
            assert list(got.data) == list(sent.data)
        raw = binlog.encode_column(sent.data, sent.data_type, sent.dim)
        values, _ = binlog.read_column(raw, sent.data_type, sent.dim)
        assert np.array_equal(np.asarray(values), np.asarray(sent.data))
        # compaction filters and concatenates binlog columns without knowing their type
        column = binlog.decode_arrow(raw)
        keep = pa.array([True, False, True, True])
        merged = pa.concat_arrays([column.filter(keep), column])
        values, _ = binlog.read_column(binlog.encode_arrow(merged), sent.data_type, sent.dim)
        want = [sent.data[i] for i in (0, 2, 3, 0, 1, 2, 3)]
        assert np.array_equal(np.asarray(values), np.asarray(want))


def _list_binlog(values: np.ndarray) -> bytes:
    """A vector binlog as earlier versions wrote it: a fixed-size list of the elements."""
    flat = pa.array(values.reshape(-1))
    column = pa.FixedSizeListArray.from_arrays(flat, values.shape[1])
    buf = io.BytesIO()
    pq.write_table(pa.table({"v": column}), buf, compression="none", use_dictionary=False)
    return buf.getvalue()


@pytest.mark.parametrize("n", [0, 5])
def test_vector_binlogs_written_as_lists_read_and_merge_with_new_ones(n: int):
    """Segments persisted before vectors became fixed-size binary still load and compact."""
    rng = np.random.default_rng(n)
    floats = FieldColumn(106, "f", DataType.FLOAT_VECTOR, rng.random((n, 3), np.float32), 3)
    dense = [*_columns(n)[:3], _columns(n)[5], floats]
    for sent in dense:
        old = _list_binlog(sent.data)
        values, _ = binlog.read_column(old, sent.data_type, sent.dim)
        assert values.dtype == sent.data.dtype and np.array_equal(values, sent.data)
        new = binlog.decode_arrow(binlog.encode_column(sent.data, sent.data_type, sent.dim))
        assert binlog.decode_arrow(old).equals(new)
        # the rows of an old file from its second on (an offset into its buffer), then a new one
        merged = pa.concat_arrays([binlog.decode_arrow(old)[1:], new])
        values, _ = binlog.read_column(binlog.encode_arrow(merged), sent.data_type, sent.dim)
        assert np.array_equal(values, np.concatenate([sent.data[1:], sent.data]))


def test_shard_store_searches_each_vector_type():
    store = ShardStore(_schema())
    msg = _insert(6)
    store.insert(msg)
    mask = np.ones(6, bool)
    binary = msg.fields[0].data
    scores, rows = store.search("bin", binary[2:3], "HAMMING", 1, mask)
    assert rows.tolist() == [[2]] and scores.tolist() == [[0.0]]
    half = msg.fields[1].data.astype(np.float32)
    scores, rows = store.search("half", half[4:5], "L2", 1, mask)
    assert rows.tolist() == [[4]] and scores.tolist() == [[0.0]]
    wide = vector_types.as_float32(DataType.BFLOAT16_VECTOR, msg.fields[2].data)
    assert store.index_input("bf", 0, 6)[0].tolist() == wide.tolist()
    _, rows = store.search("sp", [SPARSE({3: 2.0})], "IP", 5, mask)
    assert rows.tolist() == [[3]]
    int8 = msg.fields[5].data
    assert store.index_input("i8", 0, 6)[0].tolist() == int8.astype(np.float32).tolist()  # exact
    scores, rows = store.search("i8", int8[1:2].astype(np.float32), "L2", 1, mask)
    assert rows.tolist() == [[1]] and scores.tolist() == [[0.0]]
    with pytest.raises(ValueError, match="L2 not supported for BINARY_VECTOR"):
        store.search("bin", binary[:1], "L2", 1, mask)
    assert store.column("arr")[2] == [2, 3]


def test_proxy_refuses_indexes_and_metrics_a_type_cannot_have():
    binary = FieldSchema(101, "bin", DataType.BINARY_VECTOR, dim=16)
    assert index_kind(binary, {"index_type": "BIN_IVF_FLAT", "metric_type": "jaccard"}) == (
        "BIN_IVF_FLAT",
        "JACCARD",
    )
    assert index_kind(binary, {}) == ("AUTOINDEX", "HAMMING")
    half = FieldSchema(102, "half", DataType.FLOAT16_VECTOR, dim=2)
    assert index_kind(half, {"index_type": "HNSW"}) == ("HNSW", "L2")
    sparse = FieldSchema(104, "sp", DataType.SPARSE_FLOAT_VECTOR)
    for field, params, message in [
        (binary, {"index_type": "HNSW"}, "HNSW for BINARY_VECTOR"),
        (half, {"index_type": "BIN_FLAT"}, "BIN_FLAT for FLOAT16_VECTOR"),
        (sparse, {"index_type": "SPARSE_WAND", "metric_type": "BM25"}, "BM25"),
        (sparse, {"index_type": "SPARSE_WAND", "metric_type": "L2"}, "L2 not supported"),
    ]:
        with pytest.raises(MilvusError, match=message):
            index_kind(field, params)


def _array_fd(values: list, member: str) -> schema_pb2.FieldData:
    fd = schema_pb2.FieldData(type=int(DataType.ARRAY), field_name="a")
    for row in values:
        getattr(fd.scalars.array_data.data.add(), member).data.extend(row)
    return fd


def test_array_rows_are_checked_and_returned_as_sent():
    field = FieldSchema(
        105, "a", DataType.ARRAY, element_type=int(DataType.VARCHAR), max_capacity=2, max_length=3
    )
    texts = typed_fields.array_values(_array_fd([["ab", "c"], []], "string_data"), field)
    assert texts == ['["ab", "c"]', "[]"]
    out = schema_pb2.FieldData()
    typed_fields.array_to_proto(out, field, texts)
    assert [list(r.string_data.data) for r in out.scalars.array_data.data] == [["ab", "c"], []]
    for rows, message in [
        ([["a", "b", "c"]], "max_capacity 2"),
        ([["abcd"]], "max_length 3"),
    ]:
        with pytest.raises(MilvusError, match=message):
            typed_fields.array_values(_array_fd(rows, "string_data"), field)
    small = FieldSchema(106, "s", DataType.ARRAY, element_type=int(DataType.INT8), max_capacity=2)
    with pytest.raises(MilvusError, match="out of range for INT8"):
        typed_fields.array_values(_array_fd([[200]], "int_data"), small)
    assert "element type JSON" in typed_fields.check_array_field(
        FieldSchema(107, "j", DataType.ARRAY, element_type=int(DataType.JSON), max_capacity=2)
    )


def test_search_vectors_must_be_of_the_fields_type():
    group = common_pb2.PlaceholderGroup()
    group.placeholders.add(
        tag="$0", type=common_pb2.PlaceholderType.FloatVector, values=[b"\x00" * 8]
    )
    binary = FieldSchema(101, "bin", DataType.BINARY_VECTOR, dim=16)
    with pytest.raises(MilvusError, match="BinaryVector vectors, got FloatVector"):
        typed_fields.read_queries(group, binary)
    group.placeholders[0].type = common_pb2.PlaceholderType.BinaryVector
    with pytest.raises(MilvusError, match="dim"):
        typed_fields.read_queries(group, binary)
    group.placeholders[0].values[0] = b"\x0f\xf0"
    assert typed_fields.read_queries(group, binary).tolist() == [[15, 240]]


def test_index_info_of_binary_fields_never_asks_for_index_files():
    schema = _schema()
    assert not is_interim(IndexInfo(1, "i", "bin", "AUTOINDEX", "HAMMING"), schema)
    assert is_interim(IndexInfo(2, "j", "half", "HNSW", "L2"), schema)
    assert not is_interim(IndexInfo(3, "k", "sp", "AUTOINDEX", "IP"), schema)


def test_search_requests_and_hits_of_the_new_types_cross_internal_rpc():
    request = ShardSearchRequest(1, ["v0"], "sp", [SPARSE({1: 2.0}), b""], "IP", 3, 0, 1.0)
    back = rpc_codec.decode(rpc_codec.encode(request))
    assert back.vectors == request.vectors
    half = np.ones((2, 3), np.float16)
    hits = SearchHits(
        "IP", [2], np.arange(2), np.zeros(2, np.float32), {"h": half, "s": [b"x", b""]}
    )
    back = rpc_codec.decode(rpc_codec.encode(hits))
    assert back.fields["h"].dtype == np.float16 and back.fields["s"] == [b"x", b""]


def _proto_schema(*fields: schema_pb2.FieldSchema) -> bytes:
    schema = schema_pb2.CollectionSchema(name="c")
    schema.fields.add(name="id", data_type=int(DataType.INT64), is_primary_key=True)
    schema.fields.extend(fields)
    return schema.SerializeToString()


def test_types_still_unsupported_are_refused_by_name():
    text = schema_pb2.FieldSchema(name="t", data_type=schema_pb2.DataType.Text)
    with pytest.raises(MilvusError, match="Text is not supported"):
        convert.schema_from_proto(_proto_schema(text), "c")
    nested = schema_pb2.FieldSchema(
        name="a", data_type=int(DataType.ARRAY), element_type=int(DataType.JSON)
    )
    nested.type_params.add(key="max_capacity", value="4")
    vector = schema_pb2.FieldSchema(name="v", data_type=int(DataType.SPARSE_FLOAT_VECTOR))
    with pytest.raises(MilvusError, match="element type JSON is not supported"):
        convert.schema_from_proto(_proto_schema(vector, nested), "c")
    binary = schema_pb2.FieldSchema(name="b", data_type=int(DataType.BINARY_VECTOR))
    binary.type_params.add(key="dim", value="12")
    with pytest.raises(MilvusError, match="not a multiple of 8"):
        convert.schema_from_proto(_proto_schema(binary), "c")


def test_rest_forms_of_the_vector_types():
    binary = schema_pb2.FieldSchema(name="b", data_type=schema_pb2.DataType.BinaryVector)
    binary.type_params.add(key="dim", value="16")
    assert rest_vectors.row_bytes(binary, [255, 1]) == rest_vectors.row_bytes(binary, "/wE=")
    for bad, message in [([1], "expected 2"), ([256, 0], "byte values"), ("***", "base64")]:
        with pytest.raises(ValueError, match=message):
            rest_vectors.row_bytes(binary, bad)
    half = schema_pb2.FieldSchema(name="h", data_type=schema_pb2.DataType.Float16Vector)
    half.type_params.add(key="dim", value="2")
    raw = rest_vectors.row_bytes(half, [0.5, -2])
    assert np.frombuffer(raw, "<f2").tolist() == [0.5, -2.0]
    fd = schema_pb2.FieldData(type=schema_pb2.DataType.Float16Vector)
    rest_vectors.write_column(fd, half, [[0.5, -2], [1, 1]])
    assert len(rest_vectors.render_column(fd)) == 2
    assert base64.b64decode(rest_vectors.render_column(fd)[0]) == raw
    sparse = schema_pb2.FieldSchema(name="s", data_type=schema_pb2.DataType.SparseFloatVector)
    with pytest.raises(ValueError, match="indices"):
        rest_vectors.row_bytes(sparse, {"x": 1.0})
    int8 = schema_pb2.FieldSchema(name="i", data_type=schema_pb2.DataType.Int8Vector)
    int8.type_params.add(key="dim", value="3")
    fd = schema_pb2.FieldData(type=schema_pb2.DataType.Int8Vector)
    rest_vectors.write_column(fd, int8, [[1, -2, 127], [-128, 0, 5]])
    assert rest_vectors.render_column(fd) == [[1, -2, 127], [-128, 0, 5]]  # numbers, as Go's
    for bad, message in [
        ([1, 2], "expected 3"),
        ([128, 0, 0], r"\[-128, 127\]"),
        ([1.5, 0, 0], "integers"),
    ]:
        with pytest.raises(ValueError, match=message):
            rest_vectors.row_bytes(int8, bad)


@pytest.mark.parametrize("scanned_tail", [50, 400, 10**6])
def test_sparse_search_through_the_inverted_index_equals_a_dense_scan(monkeypatch, scanned_tail):
    """Sorted postings, a scanned tail beside them, the tail folded in (every search, some,
    never), a head dropped: the same best rows and scores as the dense inner products,
    under a mask."""
    from vectide.services.querynode import sparse

    monkeypatch.setattr(sparse, "_SCANNED_TAIL", scanned_tail)
    rng = np.random.default_rng(7)
    dense = np.zeros((0, 40), np.float32)
    column = sparse.SparseColumn()

    def check(queries: np.ndarray, mask: np.ndarray) -> None:
        rows = [
            vector_types.sparse_row({int(i): float(q[i]) for i in np.flatnonzero(q)})
            for q in queries
        ]
        scores, found = column.search(rows, 5, mask, {})
        exact = queries @ dense.T
        for q in range(len(queries)):
            hits = [r for r in np.argsort(-exact[q], kind="stable") if mask[r] and exact[q, r] != 0]
            assert sorted(found[q][found[q] >= 0].tolist()) == sorted(hits[: len(hits[:5])])
            assert np.allclose(scores[q][: len(hits[:5])], exact[q, hits[:5]], rtol=1e-5)

    for _ in range(6):
        block = (rng.random((30, 40)) < 0.15) * rng.integers(1, 5, (30, 40)).astype(np.float32)
        column.append(
            [
                vector_types.sparse_row({int(i): float(r[i]) for i in np.flatnonzero(r)})
                for r in block
            ]
        )
        dense = np.vstack([dense, block])
        queries = (rng.random((3, 40)) < 0.2) * rng.random((3, 40)).astype(np.float32)
        check(queries, rng.random(len(dense)) < 0.8)
    column.drop_head(50)
    dense = dense[50:]
    check(
        (rng.random((3, 40)) < 0.2) * rng.random((3, 40)).astype(np.float32),
        np.ones(len(dense), bool),
    )


def test_int8_vectors_through_the_grpc_service_insert_index_search_and_come_back():
    """Int8Vector (Milvus 2.6) as pymilvus sends it: int8 rows in, an HNSW index, an int8
    query, the exact nearest rows and their vectors back as int8."""
    from pymilvus import DataType as ClientType
    from pymilvus import MilvusClient
    from pymilvus.client.prepare import Prepare

    from benchmarks.search_path import Context
    from vectide.services.proxy.grpc_service import MilvusService
    from vectide.services.testing import Harness

    h = Harness()
    service = MilvusService(h.proxy)
    schema = MilvusClient.create_schema()
    schema.add_field("id", ClientType.INT64, is_primary=True)
    schema.add_field("v", ClientType.INT8_VECTOR, dim=8)
    create = Prepare.create_collection_request("i8", schema, consistency_level="Strong")
    assert service.CreateCollection(create, Context()).code == 0
    h.proxy.create_index("i8", "v", "v", {"index_type": "HNSW", "metric_type": "L2"})
    h.proxy.load_collection("i8")
    h.tick()
    rng = np.random.default_rng(8)
    rows = rng.integers(-128, 128, (300, 8), dtype=np.int8)
    fields = [
        {"name": "id", "type": ClientType.INT64, "is_primary": True, "params": {}},
        {"name": "v", "type": ClientType.INT8_VECTOR, "params": {"dim": 8}},
    ]
    entities = [{"id": i, "v": row} for i, row in enumerate(rows)]
    request = Prepare.row_insert_param("i8", entities, "", fields)
    assert service.Insert(request, Context()).status.code == 0
    h.tick()
    h.pump()
    query = rows[17].astype(np.int16)
    query[0] = min(127, query[0] + 1)  # near row 17, not on it
    search = Prepare.search_requests_with_expr(
        collection_name="i8",
        anns_field="v",
        param={"metric_type": "L2", "params": {"ef": 300}},
        limit=3,
        data=[query.astype(np.int8)],
        output_fields=["v"],
        expr_params={},
        consistency_level="Strong",
    )
    reply = service.Search(search, Context())
    assert reply.status.code == 0, reply.status.reason
    wide = rows.astype(np.float32)
    exact = np.argsort(((wide - query.astype(np.float32)) ** 2).sum(axis=1), kind="stable")[:3]
    assert list(reply.results.ids.int_id.data) == exact.tolist()
    [vectors] = reply.results.fields_data
    got = np.frombuffer(vectors.vectors.int8_vector, dtype=np.int8).reshape(-1, 8)
    assert got.tolist() == rows[exact].tolist()
    float_query = Prepare.search_requests_with_expr(
        collection_name="i8",
        anns_field="v",
        param={"metric_type": "L2"},
        limit=3,
        data=[[0.5] * 8],
        expr_params={},
        consistency_level="Strong",
    )
    refused = service.Search(float_query, Context())
    assert refused.status.code == 1100 and "search it with Int8Vector" in refused.status.reason
