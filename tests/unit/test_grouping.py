"""Grouping search's pure parts (services/common/grouping.py) and a query node's grouped
search over a growing store and a sealed one."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.test_querynode import DIM, VCH, collection, insert, pack
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.grouping import (
    GROUPS_PARAM,
    group_by_field,
    groups_settled,
    merge_groups,
    restrict_to_groups,
    select_groups,
)
from vectide.services.common.msgstream.message import DataType, FieldColumn
from vectide.services.common.requests import ShardSearchRequest
from vectide.services.common.results import SearchHits
from vectide.services.common.rpc import codec
from vectide.services.common.rpc import types as _types  # noqa: F401  (registers the RPC types)
from vectide.services.common.schema import CollectionSchema, FieldSchema
from vectide.services.proxy import convert
from vectide.services.proxy.dql import Outputs
from vectide.services.querynode.core import QueryNode
from vectide.services.querynode.segment import ShardStore


def test_select_groups_orders_groups_by_their_best_hit_and_caps_them():
    values = ["a", "b", "a", "c", "a", "b", "d", "c"]
    assert select_groups(values, limit=2, group_size=2).tolist() == [0, 2, 1, 5]
    assert select_groups(values, limit=3, group_size=1).tolist() == [0, 1, 3]
    # offset skips whole groups, even when their hits come later
    assert select_groups(values, limit=2, group_size=2, offset=1).tolist() == [1, 5, 3, 7]
    assert select_groups(values, limit=9, group_size=5, offset=4).tolist() == []


def test_none_is_a_group_of_its_own():
    assert select_groups([None, 1, None, 1], limit=2, group_size=1).tolist() == [0, 1]


def test_groups_settle_when_the_first_groups_are_full_or_exhausted():
    totals = {"a": 5, "b": 1, "c": 4}
    # b and c are full, but a (first to appear) could still gain hits further down
    assert not groups_settled(["a", "b", "c", "c"], 2, 2, totals)
    assert groups_settled(["a", "b", "a"], 2, 2, totals)  # b has its only row
    assert groups_settled(["a", "a", "c"], 1, 2, totals)
    # fewer groups than limit: settled once every group there is is complete
    assert not groups_settled(["b", "a", "a"], 5, 2, totals)
    assert groups_settled(["b", "a", "a", "c", "c"], 5, 2, totals)


def _hits(pks, scores, groups, counts=None, metric="L2") -> SearchHits:
    return SearchHits(
        metric,
        counts or [len(pks)],
        np.array(pks, dtype=np.int64),
        np.array(scores, dtype=np.float32),
        {"x": np.array(pks) * 10},
        groups,
    )


def test_merge_groups_across_parts_keeps_fields_aligned_per_query():
    a = _hits([1, 2, 3, 4], [0.1, 0.5, 0.2, 0.9], ["g1", "g2", "g3", "g1"], counts=[2, 2])
    b = _hits([5, 6, 7, 8], [0.3, 0.4, 0.05, 0.6], ["g1", "g3", "g3", "g2"], counts=[2, 2])
    merged = merge_groups([a, b], limit=2, group_size=2)
    # query 0: g1 (1: 0.1, 5: 0.3), g3 (6: 0.4); query 1: g3 (7: 0.05, 3: 0.2), g2 (8: 0.6)
    assert merged.counts == [3, 3]
    assert merged.pks.tolist() == [1, 5, 6, 7, 3, 8]
    assert merged.fields["x"].tolist() == [10, 50, 60, 70, 30, 80]
    assert merged.groups == ["g1", "g1", "g3", "g3", "g3", "g2"]


def test_merge_groups_of_similarities_takes_the_largest_first():
    a = _hits([1, 2], [0.9, 0.1], [True, False], metric="IP")
    b = _hits([3], [0.95], [False], metric="IP")
    merged = merge_groups([a, b], limit=1, group_size=2)
    assert merged.pks.tolist() == [3, 2]


def test_restrict_to_groups_keeps_the_filter_and_nulls():
    expr, params = restrict_to_groups("f > 1", {"p": 1}, "g", [3, None, 5])
    assert expr == f"(f > 1) and (g in {{{GROUPS_PARAM}}} or g is null)"
    assert params == {"p": 1, GROUPS_PARAM: [3, 5]}
    assert restrict_to_groups("", {}, "g", ["x"])[0] == f"g in {{{GROUPS_PARAM}}}"


def test_group_by_field_refuses_what_milvus_refuses():
    schema = CollectionSchema(
        "c",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "f", DataType.FLOAT),
            FieldSchema(102, "v", DataType.FLOAT_VECTOR, dim=2),
            FieldSchema(103, "s", DataType.VARCHAR, max_length=4),
        ],
    )
    assert group_by_field(schema, "s").name == "s"
    with pytest.raises(MilvusError) as missing:
        group_by_field(schema, "nope")
    assert missing.value.code == Code.FIELD_NOT_FOUND
    for name, type_name in [("f", "Float"), ("v", "FloatVector")]:
        with pytest.raises(MilvusError, match=f"unsupported data type {type_name} for group by"):
            group_by_field(schema, name)


def _grouped_insert(ids: np.ndarray, vectors: np.ndarray):
    msg = insert(ids, 5, vectors)
    msg.fields[1] = FieldColumn(102, "n", DataType.INT64, ids % 7)  # 7 groups
    return msg


@pytest.mark.parametrize(("group_size", "narrowed"), [(1, False), (3, True)])
def test_a_query_node_groups_over_growing_and_sealed_rows(group_size, narrowed):
    """Groups with rows in two stores. One hit per group is exact as merged; several are
    exact once the search is narrowed to the chosen groups, as the proxy's second search is."""
    node = QueryNode(1, chunk_rows=64)
    info = collection()
    node.watch(info, VCH)
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((400, DIM)).astype(np.float32)
    node.apply(VCH, pack(0, 10, _grouped_insert(np.arange(200), vectors[:200])))
    sealed = ShardStore(info.schema, info.indexes, 64)
    sealed.insert(_grouped_insert(np.arange(200, 400), vectors[200:]))
    node._shards[VCH].sealed[99] = sealed  # as a handoff leaves it
    query = rng.standard_normal((1, DIM)).astype(np.float32)
    distances = ((vectors - query[0]) ** 2).sum(axis=1)
    order = np.argsort(distances)
    groups = list(dict.fromkeys((order % 7).tolist()))[:2]
    expected = [i for g in groups for i in order[order % 7 == g][:group_size].tolist()]
    expr, params = restrict_to_groups("", {}, "n", groups) if narrowed else ("", {})
    hits = node.search(
        ShardSearchRequest(
            7,
            [VCH],
            "vec",
            query,
            "L2",
            2,
            10,
            0.2,
            expr,
            params,
            group_by="n",
            group_size=group_size,
        )
    )
    assert hits.pks.tolist() == expected
    assert hits.groups == [i % 7 for i in expected]
    np.testing.assert_allclose(hits.scores, distances[expected], rtol=1e-5)


def test_the_reply_carries_group_by_field_value_per_hit():
    info = collection()
    hits = _hits([1, 5, 6], [0.1, 0.3, 0.4], [10, 10, 60])
    reply = convert.search_results(info, hits, Outputs([], [], pk=False), 3, group_by="n")
    value = reply.results.group_by_field_value
    assert (value.field_name, value.type) == ("n", DataType.INT64)
    assert list(value.scalars.long_data.data) == [10, 10, 60]
    plain = convert.search_results(info, hits, Outputs([], [], pk=False), 3)
    assert not plain.results.HasField("group_by_field_value")


def test_grouped_requests_and_hits_cross_the_internal_rpc_wire():
    request = ShardSearchRequest(7, [VCH], "vec", np.ones((1, DIM), np.float32), "L2", 2, 1, 0.1)
    request.group_by, request.group_size = "n", 3
    assert (codec.decode(codec.encode(request)).group_by, request.group_size) == ("n", 3)
    hits = _hits([1, 2], [0.1, 0.2], ["x", None])
    assert codec.decode(codec.encode(hits)).groups == ["x", None]
