"""Query aggregations (``group_by_fields`` and ``count``/``sum``/``min``/``max``/``avg`` output
fields, as pymilvus 3 sends them): the parsing and the partial-row reduction as pure
functions, then queries through the servicer on the fault harness: a two-shard collection
whose rows are partly in sealed segments and partly growing, so every answer combines
partial rows of several stores and shards. Checked against the same rows grouped in Python."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from pymilvus import DataType as ClientType
from pymilvus import MilvusClient
from pymilvus.client.prepare import Prepare
from pymilvus.grpc_gen import common_pb2

from benchmarks.search_path import Context
from tests.unit import served
from vectide.services.common.aggregation import combine, finish, parse_aggregation, partial
from vectide.services.common.errors import MilvusError
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.requests import ShardQueryRequest
from vectide.services.common.rpc import codec
from vectide.services.common.rpc import types as _registered  # noqa: F401 (the wire's types)
from vectide.services.common.schema import CollectionSchema, FieldSchema
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.testing import Harness

ROWS = 300


def _row(k: int) -> dict:
    return {
        "id": k,
        "vec": [float(k % 7), float(k % 5), 0.0, 0.0],
        "color": None if k % 11 == 0 else "rgb"[k % 3],
        "size": k % 4,
        "price": None if k % 10 == 0 else float((k * 37) % 101) / 4,
        "qty": (k * 13) % 17,
        "on": f"2026-11-0{k % 3 + 1}T12:00:00Z",
        "open": k % 5 == 0,
    }


def _schema() -> CollectionSchema:
    return CollectionSchema(
        "c",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "vec", DataType.FLOAT_VECTOR, dim=4),
            FieldSchema(102, "color", DataType.VARCHAR, max_length=8, nullable=True),
            FieldSchema(103, "size", DataType.INT16),
            FieldSchema(104, "price", DataType.DOUBLE, nullable=True),
            FieldSchema(105, "meta", DataType.JSON),
        ],
    )


# -- pure --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outputs", "group_by", "message"),
    [
        (["color", "size"], "color", "output field size is neither a group by field"),
        (["count(size)"], "color", "group by field color must be in output_fields"),
        (
            ["price", "count(size)"],
            "price",
            "group by field price has unsupported data type Double",
        ),
        (["vec"], "vec", "group by field vec has unsupported data type FloatVector"),
        (["meta"], "meta", "group by field meta has unsupported data type JSON"),
        (["nope"], "nope", "group by field nope not exist"),
        (["sum(color)"], "", "aggregation operator sum does not support data type VarChar"),
        (["max(meta)"], "", "aggregation operator max does not support data type JSON"),
        (["median(size)"], "", "unsupported aggregation function median"),
        (["count(size"], "", "invalid aggregation count(size"),
        (["count()"], "", "aggregation count() names no field"),
        (["sum(*)"], "", "sum(*) is not an aggregation"),
        (["avg(nope)"], "", "field nope not exist"),
    ],
)
def test_bad_aggregations_are_refused_naming_what_is_wrong(outputs, group_by, message):
    with pytest.raises(MilvusError) as refused:
        parse_aggregation(outputs, group_by, _schema())
    assert refused.value.code == 1100 and message in refused.value.message


def test_plain_queries_and_the_row_count_are_no_aggregation():
    assert parse_aggregation(["color", "size"], "", _schema()) is None
    assert parse_aggregation(["count(*)"], " ", _schema()) is None  # Milvus's row count
    agg = parse_aggregation(["COUNT(*)", "Avg(price)"], "", _schema())
    assert agg is not None and [a.function for a in agg.aggregates] == ["count", "avg"]


def _grouped(rows: list[dict], keys: list[str]) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        groups[tuple(row[k] for k in keys)].append(row)
    return groups


def _known(rows: list[dict], name: str) -> list:
    return [r[name] for r in rows if r[name] is not None]


def test_partial_rows_of_any_split_reduce_to_the_groups_of_all_rows():
    rows = [_row(k) for k in range(ROWS)]
    outputs = ["size", "color", "count(price)", "sum(price)", "min(color)", "max(qty)"]
    outputs += ["avg(qty)", "count(*)"]
    schema = _schema().with_field(FieldSchema(106, "qty", DataType.INT32))
    agg = parse_aggregation(outputs, "size,color", schema)
    assert agg is not None

    def part(chunk: list[dict]) -> dict:
        columns = {n: [r[n] for r in chunk] for n in agg.inputs()}
        columns["qty"] = np.array(columns["qty"], np.int32)  # as stores hold non-null fields
        return partial(agg, columns, len(chunk))

    rng = np.random.default_rng(3)
    cuts = sorted(rng.choice(ROWS, 5, replace=False).tolist())
    chunks = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, ROWS], strict=True)]
    nodes = [
        combine(agg, [part(c) for c in chunks[:3]]),
        combine(agg, [part(c) for c in chunks[3:]]),
    ]
    got = finish(agg, combine(agg, nodes))
    groups = _grouped(rows, ["size", "color"])
    # groups in key order: size, then color with the null color last
    expected_keys = sorted(groups, key=lambda k: (k[0], k[1] is None, k[1] or ""))
    assert list(zip(got["size"], got["color"], strict=True)) == expected_keys
    for i, key in enumerate(expected_keys):
        members = groups[key]
        prices, qtys = _known(members, "price"), _known(members, "qty")
        assert got["count(price)"][i] == len(prices)
        assert got["sum(price)"][i] == (pytest.approx(sum(prices)) if prices else None)
        assert got["min(color)"][i] == key[1]
        assert got["max(qty)"][i] == max(qtys)
        assert got["avg(qty)"][i] == pytest.approx(sum(qtys) / len(qtys))
        assert got["count(*)"][i] == len(members)


def test_an_aggregation_without_group_fields_answers_one_row_also_over_no_rows():
    agg = parse_aggregation(["count(*)", "sum(size)", "max(color)"], "", _schema())
    empty = finish(agg, combine(agg, [partial(agg, {"size": [], "color": []}, 0)]))
    assert empty == {"count(*)": [0], "sum(size)": [None], "max(color)": [None]}
    nulls = partial(agg, {"size": np.array([1, 2], np.int16), "color": [None, None]}, 2)
    one = finish(agg, combine(agg, [nulls]))
    assert one["count(*)"].tolist() == [2] and one["sum(size)"].tolist() == [3]
    assert one["max(color)"] == [None]  # every value null: no maximum
    grouped = parse_aggregation(["size", "count(*)"], "size", _schema())
    nothing = finish(grouped, combine(grouped, []))
    assert nothing["size"] == [] and len(nothing["count(*)"]) == 0


def test_the_aggregation_travels_to_query_nodes_of_a_cluster():
    agg = parse_aggregation(["color", "avg(price)"], "color", _schema())
    request = ShardQueryRequest(1, ["v0"], 5, 1.0, aggregation=agg)
    assert codec.decode(codec.encode(request)).aggregation == agg


# -- through the servicer --------------------------------------------------------------------


@pytest.fixture(scope="module")
def service() -> MilvusService:
    h = Harness()
    service = MilvusService(h.proxy)
    schema = MilvusClient.create_schema()
    schema.add_field("id", ClientType.INT64, is_primary=True)
    schema.add_field("vec", ClientType.FLOAT_VECTOR, dim=4)
    schema.add_field("color", ClientType.VARCHAR, max_length=8, nullable=True)
    schema.add_field("size", ClientType.INT16)
    schema.add_field("price", ClientType.DOUBLE, nullable=True)
    schema.add_field("qty", ClientType.INT32)
    schema.add_field("on", ClientType.TIMESTAMPTZ)
    schema.add_field("open", ClientType.BOOL)
    served.create_loaded(h, service, schema, shards=2)
    for chunk in (range(0, ROWS // 2), range(ROWS // 2, ROWS)):  # sealed, then growing
        served.insert(h, service, schema, [_row(k) for k in chunk])
        if chunk.start == 0:
            h.proxy.flush(["c"])
            h.step()
            h.coordinators.querycoord.handoff()
            h.pump()
    [node] = [h.nodes.node(n) for n in h.nodes.live_nodes()]
    shards = node._shards.values()
    sealed = sum(s.num_rows for shard in shards for s in shard.sealed.values())
    assert sealed == ROWS // 2 and sum(shard.store.num_rows for shard in shards) == ROWS // 2
    return service


def _aggregate(service, outputs: list[str], group_by: str, expr: str = "", **page):
    request = Prepare.query_request("c", expr, outputs, [], consistency_level="Strong", **page)
    request.query_params.append(common_pb2.KeyValuePair(key="group_by_fields", value=group_by))
    return service.Query(request, Context())


def _columns(reply) -> dict[str, list]:
    """The reply's columns, None at null rows."""
    assert reply.status.code == 0, reply.status
    out = {}
    for fd in reply.fields_data:
        kind = fd.scalars.WhichOneof("data")
        values = list(getattr(fd.scalars, kind).data)
        if fd.valid_data:
            values = [v if ok else None for v, ok in zip(values, fd.valid_data, strict=True)]
        out[fd.field_name] = values
    return out


def test_a_query_groups_the_rows_of_every_shard_and_store(service):
    outputs = ["color", "size", "count(price)", "SUM(qty)", "max(price)", "avg(price)"]
    outputs += ["min(color)", "count(*)"]
    reply = _aggregate(service, outputs, "color,size", "id >= 20", limit=100)
    got = _columns(reply)
    assert list(reply.output_fields) == outputs and list(got) == outputs  # no primary key
    rows = [_row(k) for k in range(20, ROWS)]
    groups = _grouped(rows, ["color", "size"])
    expected_keys = sorted(groups, key=lambda k: (k[0] is None, k[0] or "", k[1]))
    assert list(zip(got["color"], got["size"], strict=True)) == expected_keys
    for i, key in enumerate(expected_keys):
        members = groups[key]
        prices = _known(members, "price")
        assert got["count(price)"][i] == len(prices)
        assert got["SUM(qty)"][i] == sum(r["qty"] for r in members)
        assert got["max(price)"][i] == (max(prices) if prices else None)
        assert got["avg(price)"][i] == (
            pytest.approx(sum(prices) / len(prices)) if prices else None
        )
        assert got["min(color)"][i] == key[0]
        assert got["count(*)"][i] == len(members)
    types = {fd.field_name: fd.type for fd in reply.fields_data}
    assert types["count(price)"] == types["SUM(qty)"] == int(DataType.INT64)
    assert types["avg(price)"] == types["max(price)"] == int(DataType.DOUBLE)
    assert types["min(color)"] == int(DataType.VARCHAR)


def test_limit_and_offset_page_the_groups_in_key_order(service):
    whole = _columns(_aggregate(service, ["size", "count(*)"], "size", limit=100))
    assert whole == {"size": [0, 1, 2, 3], "count(*)": [ROWS // 4] * 4}
    page = _columns(_aggregate(service, ["size", "count(*)"], "size", limit=2, offset=1))
    assert page == {"size": [1, 2], "count(*)": [ROWS // 4] * 2}
    # a group for every primary key: the rows' keys are a column too
    ids = _columns(_aggregate(service, ["id", "count(*)"], "id", "id < 5"))
    assert ids == {"id": [0, 1, 2, 3, 4], "count(*)": [1] * 5}


def test_timestamps_and_booleans_group_and_compare(service):
    got = _columns(_aggregate(service, ["open", "on", "count(*)", "max(on)"], "open,on", "id < 30"))
    rows = [_row(k) for k in range(30)]
    keys = sorted(_grouped(rows, ["open", "on"]))
    assert list(zip(got["open"], got["on"], strict=True)) == keys  # ISO text, as stored
    assert got["max(on)"] == got["on"]
    assert sum(got["count(*)"]) == 30


def test_an_aggregation_without_group_fields_answers_one_row(service):
    got = _columns(_aggregate(service, ["count(price)", "sum(size)", "max(color)"], ""))
    rows = [_row(k) for k in range(ROWS)]
    assert got == {
        "count(price)": [len(_known(rows, "price"))],
        "sum(size)": [sum(r["size"] for r in rows)],
        "max(color)": ["r"],
    }
    none = _columns(_aggregate(service, ["count(*)", "avg(price)"], "", "id < 0"))
    assert none == {"count(*)": [0], "avg(price)": [None]}
    assert _columns(_aggregate(service, ["size", "count(*)"], "size", "id < 0")) == {
        "size": [],
        "count(*)": [],
    }


def test_bad_aggregations_are_refused_with_milvus_status(service):
    mixed = _aggregate(service, ["color", "qty", "count(*)"], "color", limit=10)
    assert mixed.status.code == 1100 and "output field qty" in mixed.status.reason
    ordered = Prepare.query_request("c", "", ["color", "count(*)"], [], limit=10)
    ordered.query_params.extend(
        [
            common_pb2.KeyValuePair(key="group_by_fields", value="color"),
            common_pb2.KeyValuePair(key="order_by_fields", value="color"),
        ]
    )
    refused = service.Query(ordered, Context())
    assert refused.status.code == 1100 and "order_by" in refused.status.reason
