"""ORDER BY (``order_by_fields``): pymilvus 2.6.17 sends it with a search, pymilvus 3 with a
query. The keys' parsing and ordering as pure functions, then queries and searches through
the servicer on the fault harness (a two-shard collection: every page is merged across
shards), checked against the same rows ordered in Python."""

from __future__ import annotations

import numpy as np
import pytest
from pymilvus import DataType as ClientType
from pymilvus import MilvusClient, RRFRanker
from pymilvus.client.prepare import Prepare
from pymilvus.client.search_result import SearchResult
from pymilvus.grpc_gen import common_pb2

from benchmarks.search_path import Context
from tests.unit import served
from vectide.services.common.errors import MilvusError
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.order_by import PRIMARY_KEY, OrderKey, order_of, parse_order_by
from vectide.services.common.requests import ShardQueryRequest
from vectide.services.common.rpc import codec
from vectide.services.common.rpc import types as _registered  # noqa: F401 (the wire's types)
from vectide.services.common.schema import CollectionSchema, FieldSchema
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.testing import Harness

ROWS = 240
VECTOR = [0.0, 0.0, 0.0, 0.0]


def _row(k: int) -> dict:
    row = {
        "id": k,
        "vec": [float(k % 7), float(k % 5), float(k % 3), k / 1000],  # no two alike
        "price": None if k % 10 == 0 else float((k * 37) % 101),
        "name": f"n{(k * 13) % 50:02d}",
        "score": k % 4,
        "rank": k % 6,  # a dynamic key
    }
    if k % 9:  # meta["p"]: numbers, a few strings, missing in every ninth row
        row["meta"] = {"p": "s" if k % 25 == 0 else (k * 7) % 11}
    else:
        row["meta"] = {}
    return row


# -- the keys, pure ------------------------------------------------------------------------


def _schema() -> CollectionSchema:
    return CollectionSchema(
        "c",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "vec", DataType.FLOAT_VECTOR, dim=4),
            FieldSchema(102, "price", DataType.DOUBLE, nullable=True),
            FieldSchema(103, "meta", DataType.JSON),
            FieldSchema(104, "tags", DataType.ARRAY, element_type=int(DataType.INT64)),
        ],
        enable_dynamic_field=True,
    )


def test_keys_are_parsed_as_milvus_writes_them():
    text = 'price:desc, meta["a:b"][0]:ASC,rank,$meta["x"]:descending,id'
    keys = parse_order_by(text, _schema())
    assert keys == (
        OrderKey("price", (), False),
        OrderKey("meta", ("a:b", 0), True),
        OrderKey("$meta", ("rank",), True),
        OrderKey("$meta", ("x",), False),
        OrderKey(PRIMARY_KEY),  # the rows' keys, which travel beside their fields
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("price:up", "invalid order direction 'up' for field 'price'"),
        ("vec", "order_by field 'vec' has unsortable type FLOAT_VECTOR"),
        ("meta", "order_by field 'meta' has unsortable type JSON"),
        ("$meta:desc", "order_by field '$meta' has unsortable type JSON"),
        ("tags", "has unsortable type ARRAY"),
        ('price["a"]', "has brackets but is not a JSON type"),
        (":desc", "empty field name in order_by_fields"),
        ("price +", "invalid order_by field 'price +'"),
    ],
)
def test_bad_keys_are_refused_naming_them(text, message):
    with pytest.raises(MilvusError) as refused:
        parse_order_by(text, _schema())
    assert refused.value.code == 1100 and message in refused.value.message


def test_an_unknown_field_is_refused_without_dynamic_fields():
    schema = CollectionSchema("c", _schema().fields[:3])
    with pytest.raises(MilvusError, match="order_by field 'rank' does not exist"):
        parse_order_by("rank", schema)


def test_nulls_count_as_larger_than_every_value():
    price = [3.0, None, 1.0, None, 2.0]
    asc = order_of({"price": price}, [OrderKey("price")], np.arange(5))
    desc = order_of({"price": price}, [OrderKey("price", (), False)], np.arange(5))
    assert asc.tolist() == [2, 4, 0, 1, 3]  # nulls last, in key order
    assert desc.tolist() == [1, 3, 0, 4, 2]  # nulls first


def test_keys_apply_in_turn_and_ties_keep_their_order_or_follow_the_primary_keys():
    columns = {"a": np.array([1, 2, 1, 2, 1]), "b": ["x", "y", "y", "x", "x"]}
    keys = [OrderKey("a", (), False), OrderKey("b")]
    pks = np.array([50, 40, 30, 20, 10])
    assert order_of(columns, keys, pks, ties_by_pk=False).tolist() == [3, 1, 0, 4, 2]
    assert order_of(columns, keys, pks).tolist() == [3, 1, 4, 0, 2]
    within = np.array([0, 0, 0, 1, 1])  # two queries' hits: each ordered on its own
    assert order_of(columns, keys, pks, False, within).tolist() == [1, 0, 2, 3, 4]
    by_pk = [OrderKey(PRIMARY_KEY, (), False)]  # the keys themselves, from ``pks``
    assert order_of(columns, by_pk, pks, False).tolist() == [0, 1, 2, 3, 4]


def test_json_values_compare_by_kind_and_otherwise_by_their_text():
    docs = ['{"p": 10}', '{"p": 9.5}', '{"p": "b"}', '{"p": "a"}', "{}", '{"p": null}', ""]
    docs += ['{"p": true}', '{"p": [1]}']
    order = order_of({"m": docs}, [OrderKey("m", ("p",))], np.arange(len(docs)))
    # numbers by value; strings and numbers by text ('"' < digits < '[' < 't'); nulls last
    assert order.tolist() == [3, 2, 1, 0, 8, 7, 4, 5, 6]


def test_keys_travel_to_query_nodes_of_a_cluster():
    request = ShardQueryRequest(
        1, ["v0"], 5, 1.0, order_by=parse_order_by('meta["a"][2]:desc', _schema())
    )
    assert codec.decode(codec.encode(request)).order_by == (OrderKey("meta", ("a", 2), False),)


# -- through the servicer ------------------------------------------------------------------


@pytest.fixture(scope="module")
def service() -> MilvusService:
    h = Harness()
    service = MilvusService(h.proxy)
    schema = MilvusClient.create_schema(enable_dynamic_field=True)
    schema.add_field("id", ClientType.INT64, is_primary=True)
    schema.add_field("vec", ClientType.FLOAT_VECTOR, dim=4)
    schema.add_field("price", ClientType.DOUBLE, nullable=True)
    schema.add_field("name", ClientType.VARCHAR, max_length=16)
    schema.add_field("score", ClientType.INT32)
    schema.add_field("meta", ClientType.JSON)
    served.create_loaded(h, service, schema, shards=2)
    served.insert(h, service, schema, [_row(k) for k in range(ROWS)])
    return service


def _query(service, order_by: str, output: list[str], limit: int | None = None, offset=0):
    kwargs = {"limit": limit, "offset": offset} if limit is not None else {}
    request = Prepare.query_request(
        "c", "id >= 0", output, [], consistency_level="Strong", **kwargs
    )
    request.query_params.append(common_pb2.KeyValuePair(key="order_by_fields", value=order_by))
    return service.Query(request, Context())


def _ids(reply) -> list[int]:
    assert reply.status.code == 0, reply.status
    column = next(fd for fd in reply.fields_data if fd.field_name == "id")
    return list(column.scalars.long_data.data)


def _last(value):
    """An ascending sort key putting None after every value."""
    return (value is None, 0 if value is None else value)


def test_a_query_orders_every_shard_s_rows_then_pages_them(service):
    reply = _query(service, "price:desc,name", ["price", "name"], limit=20, offset=5)
    rows = sorted(
        (_row(k) for k in range(ROWS)),
        key=lambda r: (r["price"] is not None, -(r["price"] or 0), r["name"], r["id"]),
    )
    assert _ids(reply) == [r["id"] for r in rows[5:25]]
    assert {fd.field_name for fd in reply.fields_data} == {"id", "price", "name"}


def test_a_query_orders_by_the_primary_key(service):
    reply = _query(service, "score,id:desc", ["score"], limit=7)
    rows = sorted((_row(k) for k in range(ROWS)), key=lambda r: (r["score"], -r["id"]))
    assert _ids(reply) == [r["id"] for r in rows[:7]]


def test_a_query_without_limit_orders_all_its_rows_by_keys_it_does_not_return(service):
    reply = _query(service, "score:desc,price", ["name"])
    rows = sorted(
        (_row(k) for k in range(ROWS)),
        key=lambda r: (-r["score"], *_last(r["price"]), r["id"]),
    )
    assert _ids(reply) == [r["id"] for r in rows]
    assert {fd.field_name for fd in reply.fields_data} == {"id", "name"}  # keys not asked for


def test_a_query_orders_by_a_dynamic_key_and_a_json_path(service):
    reply = _query(service, 'rank:desc,meta["p"]', ["id"], limit=30)

    def p(r):  # the string "s" (its text '"s"' sorts before numbers'), numbers, then nulls
        value = r["meta"].get("p")
        return (value is None, not isinstance(value, str), 0 if isinstance(value, str) else value)

    rows = sorted((_row(k) for k in range(ROWS)), key=lambda r: (-r["rank"], *p(r), r["id"]))
    assert _ids(reply) == [r["id"] for r in rows[:30]]


def _search(service, order_by: list[dict] | None, limit: int, offset: int = 0, **kw):
    request = Prepare.search_requests_with_expr(
        "c",
        "vec",
        {"metric_type": "L2", "params": {}},
        limit,
        data=[VECTOR, [6.0, 4.0, 2.0, 1.0]],
        output_fields=["score"],
        consistency_level="Strong",
        offset=offset,
        order_by_fields=order_by,
        **kw,
    )
    return service.Search(request, Context())


def _nearest(query: list[float], count: int) -> list[dict]:
    rows = [_row(k) for k in range(ROWS)]
    dist = [sum((a - b) ** 2 for a, b in zip(r["vec"], query, strict=True)) for r in rows]
    order = sorted(range(ROWS), key=lambda i: dist[i])
    return [rows[i] for i in order[:count]]


def test_a_search_orders_its_best_hits_by_the_keys_then_pages_them(service):
    reply = _search(service, [{"field": "price", "order": "asc"}], limit=6, offset=3)
    assert reply.status.code == 0, reply.status
    got = [[hit["id"] for hit in hits] for hits in SearchResult(reply.results)]
    for query, ids in zip((VECTOR, [6.0, 4.0, 2.0, 1.0]), got, strict=True):
        best = sorted(
            _nearest(query, 9), key=lambda r: _last(r["price"])
        )  # stable: ties by distance
        assert ids == [r["id"] for r in best[3:9]]
    assert reply.results.output_fields == ["score"]
    assert {fd.field_name for fd in reply.results.fields_data} == {"score"}


def test_a_grouping_search_orders_its_groups_by_their_best_hit(service):
    reply = _search(
        service,
        [{"field": "name", "order": "desc"}],
        limit=3,
        group_by_field="score",
        group_size=2,
    )
    assert reply.status.code == 0, reply.status
    hits = next(iter(SearchResult(reply.results)))
    groups = [hit["entity"]["score"] for hit in hits]
    nearest = _nearest(VECTOR, ROWS)
    best = {}  # each score's two nearest rows, groups in order of their nearest row
    for row in nearest:
        best.setdefault(row["score"], []).append(row)
    chosen = list(best)[:3]
    chosen.sort(key=lambda g: best[g][0]["name"], reverse=True)
    assert groups == [g for g in chosen for _ in range(2)]
    assert [hit["id"] for hit in hits] == [r["id"] for g in chosen for r in best[g][:2]]


def test_order_by_is_refused_where_milvus_refuses_it(service):
    iterator = _search(service, [{"field": "price"}], limit=5, iterator="True")
    assert iterator.status.code == 1100 and "iterator" in iterator.status.reason
    hybrid = Prepare.hybrid_search_request_with_ranker(
        "c", [Prepare.search_requests_with_expr("c", "vec", {}, 3, data=[VECTOR])], RRFRanker(), 3
    )
    hybrid.rank_params.append(common_pb2.KeyValuePair(key="order_by_fields", value="price"))
    assert service.HybridSearch(hybrid, Context()).status.code == 1100
    bad = _query(service, "vec:desc", ["id"], limit=3)
    assert bad.status.code == 1100 and "unsortable type FLOAT_VECTOR" in bad.status.reason


def test_a_count_ignores_order_by(service):
    request = Prepare.query_request("c", "", ["count(*)"], [], consistency_level="Strong")
    request.query_params.append(common_pb2.KeyValuePair(key="order_by_fields", value="price"))
    reply = service.Query(request, Context())
    assert reply.status.code == 0
    assert list(reply.fields_data[0].scalars.long_data.data) == [ROWS]
