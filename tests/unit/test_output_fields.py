"""Output fields: which columns a read fetches and what its reply lists and carries (Milvus's
translateOutputFields and the proxy's reply building), with no server."""

from __future__ import annotations

import numpy as np
import pytest
from pymilvus.client.search_result import SearchResult
from pymilvus.grpc_gen import schema_pb2

from vectide.services.common.errors import MilvusError
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.results import QueryRows, SearchHits
from vectide.services.common.schema import (
    DYNAMIC_FIELD,
    CollectionInfo,
    CollectionSchema,
    ConsistencyLevel,
    FieldSchema,
)
from vectide.services.proxy import convert
from vectide.services.proxy.dql import Outputs, resolve_outputs


def schema(pk_type: DataType = DataType.INT64, dynamic: bool = True) -> CollectionSchema:
    fields = [
        FieldSchema(100, "id", pk_type, is_primary=True, max_length=16),
        FieldSchema(101, "vec", DataType.FLOAT_VECTOR, dim=2),
        FieldSchema(102, "title", DataType.VARCHAR, max_length=16),
        FieldSchema(103, "n", DataType.INT32),
    ]
    if dynamic:
        fields.append(FieldSchema(104, DYNAMIC_FIELD, DataType.JSON, is_dynamic=True))
    return CollectionSchema("c", fields, enable_dynamic_field=dynamic)


def info(s: CollectionSchema) -> CollectionInfo:
    return CollectionInfo(1, "c", s, 1, ["v"], ["p"], ConsistencyLevel.STRONG, 1)


def test_the_primary_key_is_listed_when_asked_for_but_never_fetched():
    out = resolve_outputs(schema(), ["title", "id"])
    assert out == Outputs(fetch=["title"], names=["title", "id"], pk=True)
    assert resolve_outputs(schema(), ["title"]).pk is False


def test_star_means_every_field_vectors_and_dynamic_ones_included():
    out = resolve_outputs(schema(), ["*"])
    assert out.names == ["id", "vec", "title", "n", DYNAMIC_FIELD]
    assert out.fetch == ["vec", "title", "n", DYNAMIC_FIELD] and out.pk
    assert resolve_outputs(schema(dynamic=False), ["*", "title"]).names == [
        "id",
        "vec",
        "title",
        "n",
    ]


def test_unknown_names_are_dynamic_keys_or_errors():
    out = resolve_outputs(schema(), ["color", "size", " n "])
    assert out.fetch == [DYNAMIC_FIELD, "n"] and out.names == ["color", "size", "n"]
    with pytest.raises(MilvusError, match="field color not exist"):
        resolve_outputs(schema(dynamic=False), ["color"])


def hits(pks) -> SearchHits:
    return SearchHits(
        "L2",
        [2, 1],
        pks,
        np.array([0.5, 1.5, 0.25], np.float32),
        {"title": ["a", "b", "c"], "vec": np.arange(6, dtype=np.float32).reshape(3, 2)},
    )


@pytest.mark.parametrize(
    ("pk_type", "pks"),
    [(DataType.INT64, np.array([7, 8, 9])), (DataType.VARCHAR, ["k7", "k8", "k9"])],
)
def test_search_reply_carries_every_listed_field_the_pk_included(pk_type, pks):
    s = schema(pk_type)
    reply = convert.search_results(
        info(s), hits(pks), resolve_outputs(s, ["id", "title", "vec"]), 2
    )
    data = reply.results
    listed = list(data.output_fields)
    carried = [f.field_name for f in data.fields_data]
    assert sorted(listed) == sorted(carried) == ["id", "title", "vec"]  # what the Node SDK needs
    # pymilvus, as an application sees it
    rows = [dict(hit) for hits_ in SearchResult(data) for hit in hits_]
    assert [r["entity"]["id"] for r in rows] == list(pks)
    assert [r["entity"]["title"] for r in rows] == ["a", "b", "c"]
    assert rows[2]["entity"]["vec"] == [4.0, 5.0]


def test_search_reply_without_the_pk_asked_carries_no_pk_column():
    s = schema()
    reply = convert.search_results(
        info(s), hits(np.array([1, 2, 3])), resolve_outputs(s, ["title"]), 2
    )
    assert [f.field_name for f in reply.results.fields_data] == ["title"]
    assert list(reply.results.ids.int_id.data) == [1, 2, 3]


def test_query_reply_always_carries_the_pk_and_lists_it_only_when_asked():
    s = schema(DataType.VARCHAR)
    rows = QueryRows(
        ["a", "b"], {"n": np.array([1, 2], np.int64), DYNAMIC_FIELD: ['{"c": 1}', "{}"]}
    )
    reply = convert.query_results(info(s), rows, resolve_outputs(s, ["n", "color"]))
    assert [f.field_name for f in reply.fields_data] == ["id", "n", DYNAMIC_FIELD]
    assert list(reply.output_fields) == ["n", "color"]
    assert list(reply.fields_data[0].scalars.string_data.data) == ["a", "b"]
    assert reply.fields_data[0].type == schema_pb2.DataType.VarChar


def test_a_column_the_nodes_did_not_send_is_an_error_not_a_gap():
    s = schema()
    bad = SearchHits("L2", [1], np.array([1]), np.array([0.0], np.float32), {})
    with pytest.raises(MilvusError, match="title"):
        convert.search_results(info(s), bad, resolve_outputs(s, ["title"]), 1)
