"""The RESTful API's pure parts: body fields and their Milvus codes, rows to columns and
back, search vectors, and the dispatcher's answers to requests no handler gets to see."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from pymilvus.grpc_gen import common_pb2, schema_pb2

from vectide.services.common.errors import MilvusError
from vectide.services.proxy import rest_body, rest_rows
from vectide.services.proxy.rest_api import RestApi, RestContext

DT = schema_pb2.DataType


def schema(dynamic: bool = True, auto_id: bool = False) -> schema_pb2.CollectionSchema:
    proto = schema_pb2.CollectionSchema(name="c", enable_dynamic_field=dynamic)
    proto.fields.add(name="id", data_type=DT.Int64, is_primary_key=True, autoID=auto_id)
    proto.fields.add(name="n", data_type=DT.Int8)
    proto.fields.add(name="title", data_type=DT.VarChar)
    vec = proto.fields.add(name="vec", data_type=DT.FloatVector)
    vec.type_params.add(key="dim", value="2")
    return proto


def code_of(call, *args, **kwargs) -> int:
    with pytest.raises(MilvusError) as info:
        call(*args, **kwargs)
    return int(info.value.code)


def test_body_fields_missing_or_of_the_wrong_type_get_1802_and_1801() -> None:
    body = {"collectionName": "c", "limit": 3, "flag": True, "ratio": 2}
    assert rest_body.get(body, "collectionName", str) == "c"
    assert rest_body.get(body, "ratio", float) == 2.0
    assert rest_body.get(body, "offset", int, 0) == 0
    assert code_of(rest_body.get, body, "partitionName", str) == 1802
    assert code_of(rest_body.get, body, "limit", str) == 1801
    assert code_of(rest_body.get, body, "flag", int) == 1801  # true is not 1
    assert code_of(rest_body.parse_body, b"{oops") == 1801
    assert code_of(rest_body.parse_body, b"[]") == 1801
    assert code_of(rest_body.parse_body, b"") == 1801


def test_consistency_and_expression_templates() -> None:
    assert rest_body.consistency({}) == (common_pb2.ConsistencyLevel.Bounded, True)
    assert rest_body.consistency({"consistencyLevel": "Strong"}) == (0, False)
    assert code_of(rest_body.consistency, {"consistencyLevel": "strong"}) == 1100
    values = rest_body.template_values(
        {"exprParams": {"a": 1, "b": [1, 2], "c": ["x"], "d": 1.5, "e": [1, 2.5], "f": True}}
    )
    assert values["a"].int64_val == 1 and values["d"].float_val == 1.5 and values["f"].bool_val
    assert list(values["b"].array_val.long_data.data) == [1, 2]
    assert list(values["c"].array_val.string_data.data) == ["x"]
    assert list(values["e"].array_val.double_data.data) == [1.0, 2.5]


def test_primary_key_filters_check_the_key_type() -> None:
    assert rest_body.pk_filter({"id": [1, 2]}, schema()) == "id in [1, 2]"
    assert rest_body.pk_filter({"id": 7}, schema()) == "id in [7]"
    assert code_of(rest_body.pk_filter, {"id": "7"}, schema()) == 1806
    assert code_of(rest_body.pk_filter, {}, schema()) == 1802


def test_full_schema_types_are_case_sensitive_milvus_names() -> None:
    spec = {
        "schema": {
            "autoID": True,
            "fields": [
                {"fieldName": "k", "dataType": "Int64", "isPrimary": True},
                {"fieldName": "v", "dataType": "FloatVector", "elementTypeParams": {"dim": 3}},
            ],
        }
    }
    proto = rest_body.full_schema(spec, "c")
    assert proto.fields[0].autoID and not proto.fields[1].autoID
    assert [(kv.key, kv.value) for kv in proto.fields[1].type_params] == [("dim", "3")]
    spec["schema"]["fields"][0]["dataType"] = "int64"
    assert code_of(rest_body.full_schema, spec, "c") == 1100


def test_quick_schema_defaults_and_index_params() -> None:
    proto = rest_body.quick_schema(
        {"dimension": 5, "idType": "VarChar", "params": {"max_length": 64}}, "c"
    )
    assert [f.name for f in proto.fields] == ["id", "vector"]
    assert proto.fields[0].data_type == DT.VarChar and proto.enable_dynamic_field
    assert code_of(rest_body.quick_schema, {"dimension": 0}, "c") == 1100
    params = rest_body.index_extra_params(
        {"fieldName": "v", "indexType": "HNSW", "params": {"M": 8, "metric_type": "IP"}}
    )
    assert {kv.key: kv.value for kv in params} == {
        "index_type": "HNSW",
        "metric_type": "IP",
        "params": '{"M": 8}',
    }


def test_rows_become_typed_columns_with_the_dynamic_rest() -> None:
    rows = [
        {"id": 1, "n": 2, "title": "a", "vec": [0.5, 1], "extra": {"k": 1}},
        {"id": 2, "n": -3, "title": "b", "vec": [1, 2]},
    ]
    cols = {fd.field_name: fd for fd in rest_rows.columns(rows, schema())}
    assert list(cols["id"].scalars.long_data.data) == [1, 2]
    assert list(cols["n"].scalars.int_data.data) == [2, -3]
    assert list(cols["vec"].vectors.float_vector.data) == [0.5, 1.0, 1.0, 2.0]
    meta = cols["$meta"]
    assert meta.is_dynamic and [json.loads(v) for v in meta.scalars.json_data.data] == [
        {"extra": {"k": 1}},
        {},
    ]


@pytest.mark.parametrize(
    "row",
    [
        {"id": 1, "n": 300, "title": "a", "vec": [0, 0]},  # out of Int8's range
        {"id": 1, "n": True, "title": "a", "vec": [0, 0]},  # a bool is no integer
        {"id": 1, "n": 1, "title": 5, "vec": [0, 0]},
        {"id": 1, "n": 1, "title": "a", "vec": [0, 0, 0]},  # wrong dim
        {"id": 1, "n": 1, "title": "a"},  # vector missing
    ],
)
def test_rows_that_cannot_be_columns_get_1804(row) -> None:
    assert code_of(rest_rows.columns, [row], schema()) == 1804


def test_unknown_keys_without_dynamic_fields_and_auto_ids_are_rejected() -> None:
    row = {"id": 1, "n": 1, "title": "a", "vec": [0, 0], "what": 1}
    assert code_of(rest_rows.columns, [row], schema(dynamic=False)) == 1804
    assert code_of(rest_rows.columns, [row], schema(auto_id=True)) == 1804
    del row["id"]
    names = [fd.field_name for fd in rest_rows.columns([row], schema(auto_id=True))]
    assert "id" not in names
    assert code_of(rest_rows.columns, [], schema()) == 1804


def test_result_columns_become_rows_as_milvus_renders_them() -> None:
    title = schema_pb2.FieldData(type=DT.VarChar, field_name="title")
    title.scalars.string_data.data.extend(["a", "b"])
    score = schema_pb2.FieldData(type=DT.Float, field_name="score")
    score.scalars.float_data.data.extend([0.1, 0.2])
    meta = schema_pb2.FieldData(type=DT.JSON, field_name="$meta", is_dynamic=True)
    meta.scalars.json_data.data.extend([b'{"color": "red", "x": 1}', b'{"x": 2}'])
    ids = schema_pb2.IDs(int_id=schema_pb2.LongArray(data=[2**60, 5]))
    rows = rest_rows.rows([title, score, meta], ["title", "score", "color"], ids, [0.5, 0.25])
    assert rows == [
        {"title": "a", "score": 0.1, "color": "red", "id": 2**60, "distance": 0.5},
        {"title": "b", "score": 0.2, "id": 5, "distance": 0.25},
    ]
    as_text = rest_rows.rows([], [], ids, None, int64_as_number=False)
    assert as_text == [{"id": str(2**60)}, {"id": "5"}]
    everything = rest_rows.rows([meta], ["*"])
    assert everything == [{"color": "red", "x": 1}, {"x": 2}]


def test_search_vectors_become_a_float_placeholder_group() -> None:
    field = schema().fields[3]
    raw = rest_rows.placeholder_group([[1, 2], [3.5, 4]], field)
    (holder,) = common_pb2.PlaceholderGroup.FromString(raw).placeholders
    assert holder.type == common_pb2.PlaceholderType.FloatVector
    assert np.frombuffer(holder.values[1], dtype="<f4").tolist() == [3.5, 4.0]
    assert code_of(rest_rows.placeholder_group, [[1, 2, 3]], field) == 1801
    assert code_of(rest_rows.placeholder_group, [], field) == 1801


def test_the_dispatcher_answers_unknown_paths_and_bad_bodies_with_codes() -> None:
    api = RestApi(service=None)  # neither request reaches the service
    assert api.handle("/v2/vectordb/nothing/here", b"{}", {})["code"] == 10
    reply = api.handle("/v2/vectordb/collections/list", b"{broken", {})
    assert reply["code"] == 1801 and "json" in reply["message"]
    reply = api.handle("/v2/vectordb/collections/describe", b"{}", {})
    assert reply == {
        "code": 1802,
        "message": "missing required parameters, error: collectionName is required",
    }


def test_nullable_fields_may_be_null_or_left_out() -> None:
    proto = schema(dynamic=False)
    proto.fields[2].nullable = True  # title
    rows = [
        {"id": 1, "n": 1, "title": "a", "vec": [0, 0]},
        {"id": 2, "n": 1, "title": None, "vec": [0, 0]},
        {"id": 3, "n": 1, "vec": [0, 0]},
    ]
    title = {fd.field_name: fd for fd in rest_rows.columns(rows, proto)}["title"]
    assert list(title.valid_data) == [True, False, False]
    assert list(title.scalars.string_data.data) == ["a"]
    rows[0]["n"] = None
    assert code_of(rest_rows.columns, rows, proto) == 1804  # n is not nullable


def test_request_timeout_header_bounds_reads() -> None:
    api = RestApi(service=None)
    for bad in ("soon", "0", "-1"):
        reply = api.handle("/v2/vectordb/collections/list", b"{}", {"Request-Timeout": bad})
        assert reply["code"] == 1801, bad
    assert RestContext("db").time_remaining() is None
    assert 4 < RestContext("db", time.monotonic() + 5).time_remaining() <= 5
    assert RestContext("db").invocation_metadata() == (("dbname", "db"),)
