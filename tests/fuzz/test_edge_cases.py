"""Hand-written hostile requests, each with the answer Milvus gives: limits (nq, topk, dim,
filter depth and length, request size), NaN and infinite vectors, wrong types, unknown enum
values. Every one must be refused with a clear status while the writer and reader run."""

from __future__ import annotations

import struct

import grpc
import pytest
from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

from tests.fuzz.harness import CrashCatcher
from tests.fuzz.strategies import DIM, VICTIM, WRITER

INVALID = 1100  # PARAMETER_INVALID
ILLEGAL_SCHEMA = 105


def _vectors(rows: list[list[float]]) -> bytes:
    values = [struct.pack(f"<{len(r)}f", *r) for r in rows]
    holder = common_pb2.PlaceholderValue(
        tag="$0", type=common_pb2.PlaceholderType.FloatVector, values=values
    )
    return common_pb2.PlaceholderGroup(placeholders=[holder]).SerializeToString()


def _search(nq: int = 1, topk: int = 10, dsl: str = "", rows=None, **fields):
    params = [
        common_pb2.KeyValuePair(key="topk", value=str(topk)),
        common_pb2.KeyValuePair(key="anns_field", value="vector"),
    ]
    return milvus_pb2.SearchRequest(
        collection_name=fields.pop("collection_name", WRITER),
        dsl=dsl,
        dsl_type=1,
        placeholder_group=_vectors(rows or [[0.5] * DIM] * nq),
        search_params=params,
        nq=nq,
        **fields,
    )


def _insert(fields_data, num_rows: int) -> milvus_pb2.InsertRequest:
    return milvus_pb2.InsertRequest(
        collection_name=VICTIM, fields_data=fields_data, num_rows=num_rows
    )


def _longs(name: str, values) -> schema_pb2.FieldData:
    return schema_pb2.FieldData(
        type=schema_pb2.DataType.Int64,
        field_name=name,
        scalars=schema_pb2.ScalarField(long_data=schema_pb2.LongArray(data=values)),
    )


def _strings(name: str, values) -> schema_pb2.FieldData:
    return schema_pb2.FieldData(
        type=schema_pb2.DataType.VarChar,
        field_name=name,
        scalars=schema_pb2.ScalarField(string_data=schema_pb2.StringArray(data=values)),
    )


def _floats(name: str, values, dim: int = DIM) -> schema_pb2.FieldData:
    return schema_pb2.FieldData(
        type=schema_pb2.DataType.FloatVector,
        field_name=name,
        vectors=schema_pb2.VectorField(dim=dim, float_vector=schema_pb2.FloatArray(data=values)),
    )


def _row(vector=(1.0,) * DIM, title: str = "t", n: int = 1, pk: int = 10_000):
    return [_longs("id", [pk]), _floats("vector", list(vector)), _strings("title", [title]),
            _longs("n", [n])]  # fmt: skip


def _schema(dim: str, data_type: int = schema_pb2.DataType.FloatVector) -> bytes:
    return schema_pb2.CollectionSchema(
        name="edge_big",
        fields=[
            schema_pb2.FieldSchema(name="id", data_type=schema_pb2.DataType.Int64,
                                   is_primary_key=True),
            schema_pb2.FieldSchema(name="v", data_type=data_type,
                                   type_params=[common_pb2.KeyValuePair(key="dim", value=dim)]),
        ],
    ).SerializeToString()  # fmt: skip


NAN, INF = float("nan"), float("inf")
BIG_FILTER = " or ".join(f"id == {i}" for i in range(20_000))  # ~260 KB
CASES = {
    "nq over quota.max_nq": ("Search", _search(nq=16_385), INVALID, "max_nq"),
    "topk over quota.max_topk": ("Search", _search(topk=100_000), INVALID, "max_topk"),
    "negative topk": ("Search", _search(topk=-1), INVALID, "limit"),
    "NaN query vector": ("Search", _search(rows=[[NAN] * DIM]), INVALID, "NaN"),
    "infinite query vector": ("Search", _search(rows=[[INF, 0, 0, 0]]), INVALID, "NaN"),
    "query vector of the wrong size": ("Search", _search(rows=[[1.0] * 3]), INVALID, "dim"),
    "unknown placeholder type": (
        "Search",
        milvus_pb2.SearchRequest(
            collection_name=WRITER,
            placeholder_group=common_pb2.PlaceholderGroup(
                placeholders=[common_pb2.PlaceholderValue(tag="$0", type=999, values=[b"x"])]
            ).SerializeToString(),
        ),
        INVALID,
        "999",
    ),
    "garbage placeholder group": (
        "Search",
        milvus_pb2.SearchRequest(collection_name=WRITER, placeholder_group=b"\xff\xff\xff"),
        INVALID,
        "placeholder_group",
    ),
    "filter nested 10,000 deep": (
        "Search",
        _search(dsl="(" * 10_000 + "id > 1" + ")" * 10_000),
        INVALID,
        "max_expr_depth",
    ),
    "filter of 260 KB": (
        "Query",
        milvus_pb2.QueryRequest(collection_name=WRITER, expr=BIG_FILTER),
        INVALID,
        "max_expr_length",
    ),
    "unknown consistency level": (
        "Query",
        milvus_pb2.QueryRequest(collection_name=WRITER, expr="id > 0", consistency_level=77),
        INVALID,
        "consistency",
    ),
    "limit that is not a number": (
        "Query",
        milvus_pb2.QueryRequest(
            collection_name=WRITER,
            expr="id > 0",
            query_params=[common_pb2.KeyValuePair(key="limit", value="ten")],
        ),
        INVALID,
        "limit",
    ),
    "NaN vector inserted": ("Insert", _insert(_row(vector=[NAN] * DIM), 1), INVALID, "NaN"),
    "infinite vector inserted": ("Insert", _insert(_row(vector=[INF] * DIM), 1), INVALID, "NaN"),
    "numbers into a varchar field": (
        "Insert",
        _insert([*_row()[:2], _longs("title", [1]), _longs("n", [1])], 1),
        INVALID,
        "title",
    ),
    "strings into an int64 field": (
        "Insert",
        _insert([*_row()[:3], _strings("n", ["x"])], 1),
        INVALID,
        "n",
    ),
    "unknown data type": (
        "Insert",
        _insert([*_row()[:3], schema_pb2.FieldData(type=999, field_name="n")], 1),
        INVALID,
        "999",
    ),
    "dynamic field JSON that is not UTF-8": (
        "Insert",
        _insert(
            [
                *_row(),
                schema_pb2.FieldData(
                    type=schema_pb2.DataType.JSON,
                    field_name="$meta",
                    is_dynamic=True,
                    scalars=schema_pb2.ScalarField(
                        json_data=schema_pb2.JSONArray(data=[b"\xbc\xff"])
                    ),
                ),
            ],
            1,
        ),
        INVALID,
        "JSON",
    ),
    "num_rows far over the data": ("Insert", _insert(_row(), 2**32 - 1), INVALID, "rows"),
    "vector dim 100,000": (
        "CreateCollection",
        milvus_pb2.CreateCollectionRequest(collection_name="edge_big", schema=_schema("100000")),
        ILLEGAL_SCHEMA,
        "max_dim",
    ),
    "dim that is not a number": (
        "CreateCollection",
        milvus_pb2.CreateCollectionRequest(collection_name="edge_big", schema=_schema("x")),
        INVALID,
        "dim",
    ),
    "unknown field type": (
        "CreateCollection",
        milvus_pb2.CreateCollectionRequest(collection_name="edge_big", schema=_schema("4", 999)),
        ILLEGAL_SCHEMA,
        "999",
    ),
    "unknown metric": (
        "CreateIndex",
        milvus_pb2.CreateIndexRequest(
            collection_name=VICTIM,
            field_name="vector",
            extra_params=[
                common_pb2.KeyValuePair(key="index_type", value="HNSW"),
                common_pb2.KeyValuePair(key="metric_type", value="FOO"),
            ],
        ),
        None,  # any refusal with a reason
        "",
    ),
    "index params that are not JSON": (
        "CreateIndex",
        milvus_pb2.CreateIndexRequest(
            collection_name=VICTIM,
            field_name="vector",
            extra_params=[common_pb2.KeyValuePair(key="params", value="{")],
        ),
        INVALID,
        "JSON",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_request_is_refused_clearly(target, case):
    rpc, request, code, words = CASES[case]
    with CrashCatcher() as catcher:
        reply = target.caller.call(rpc, request)
    assert not catcher.crashes, catcher.kinds()
    status = reply if reply.DESCRIPTOR.name == "Status" else reply.status
    assert status.code != 0, f"{case}: accepted"
    if code is not None:
        assert status.code == code, f"{case}: {status}"
    assert words.lower() in status.reason.lower(), f"{case}: {status.reason}"


def test_request_over_64_mb_is_resource_exhausted(target):
    vectors = [0.5] * (17 * 1024 * 1024)  # 68 MB of floats
    request = _insert([_floats("vector", vectors)], len(vectors) // DIM)
    with pytest.raises(grpc.RpcError) as caught:
        target.caller._stub("Insert")(request.SerializeToString(), timeout=60)
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_writer_rows_survive_the_edge_cases(target):
    assert not target.traffic.problems, target.traffic.problems[:10]
    assert target.traffic.written and not target.traffic.missing()
