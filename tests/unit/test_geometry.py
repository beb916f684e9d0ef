"""GEOMETRY fields (Milvus 2.6.4): WKT normalized at insert, the ST_* operators as GEOS (the
library Milvus evaluates them with) answers them, ST_DWITHIN's meters as Milvus measures
them, nulls, refusals; through the gRPC servicer over the fault harness's cluster."""

from __future__ import annotations

import numpy as np
import pytest
import shapely
from pymilvus import DataType as ClientType
from pymilvus import MilvusClient
from pymilvus.client.prepare import Prepare

from benchmarks.search_path import Context
from vectide.services.common import geometry, metrics
from vectide.services.common.expr import ExprError, parse
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.testing import Harness

SQUARE = "POLYGON ((0 0, 4 0, 4 4, 0 4, 0 0))"
#: rows by key: points, lines, polygons (one a self-intersecting bowtie), a collection, a null
ROWS: dict[int, str | None] = {
    0: "POINT(1 1)",
    1: "point ( 2   2 )",
    2: "POINT (10 10)",
    3: "LINESTRING (0 0, 10 10)",
    4: "LINESTRING (-1 2, 5 2)",
    5: SQUARE,
    6: "POLYGON ((2 2, 6 2, 6 6, 2 6, 2 2))",
    7: "POLYGON ((0 0, 2 2, 2 0, 0 2, 0 0))",
    8: "MULTIPOINT ((1 1), (30 30))",
    9: "GEOMETRYCOLLECTION (POINT (4 4), LINESTRING (4 4, 8 8))",
    10: None,
    11: "POINT (0 4)",
}


def test_wkt_is_stored_as_geos_writes_it_and_bad_wkt_is_named() -> None:
    assert geometry.normalized(["point ( 2   2 )", "POINT(1.123456789 2.5)", SQUARE]) == [
        "POINT (2 2)",
        "POINT (1.123456789 2.5)",
        SQUARE,
    ]
    for bad in ("POINT(1)", "hello", "POLYGON((0 0, 1 1))", ""):
        with pytest.raises(geometry.GeometryError, match="invalid WKT"):
            geometry.normalized(["POINT (0 0)", bad])


def test_st_dwithin_measures_meters_as_milvus_does() -> None:
    rows = geometry.column(["POINT (1 0)", "POINT (0 1)", "POINT (0.5 0)", "LINESTRING (0 1, 1 1)"])
    origin = shapely.Point(0, 0)
    # one degree of a great circle of radius 6,371 km: 111,194.93 m
    assert geometry.dwithin(rows, origin, 111_195).tolist() == [True, True, True, False]
    assert geometry.dwithin(rows, origin, 111_194).tolist() == [False, False, True, False]
    # a line one degree away in the plane, scaled at the equator: 111,320 m per degree
    assert geometry.dwithin(rows, origin, 111_320)[3]
    assert not geometry.dwithin(rows, origin, 111_319)[3]
    far_north = shapely.Point(0, 60)  # degrees scale with the query's latitude
    line = geometry.column(["LINESTRING (0 61, 1 61)"])
    scale = 111_320 * np.sqrt((1 + np.cos(np.radians(60)) ** 2) / 2)  # Milvus's formula
    assert geometry.dwithin(line, far_north, scale + 1)[0]
    assert not geometry.dwithin(line, far_north, scale - 1)[0]


def test_spatial_functions_parse_with_their_rules() -> None:
    templated = parse("st_contains(geo, {w})", {"w": "POINT (1 1)"})
    assert templated == parse("ST_Contains(geo, 'POINT (1 1)')")
    for text, message in (
        ("ST_CONTAINS(geo, 'nonsense')", "st_contains needs a valid WKT geometry"),
        ("ST_DWITHIN(geo, 'LINESTRING (0 0, 1 1)', 5)", "st_dwithin needs a POINT"),
        ("ST_DWITHIN(geo, 'POINT (0 0)', -1)", "0 meters or more"),
        ("ST_DWITHIN(geo, 'POINT (0 0)', 'far')", "0 meters or more"),
        ("ST_CONTAINS('POINT (1 1)', geo)", "expected a field"),
        ("ST_INTERSECTS(geo)", "expected ','"),
    ):
        with pytest.raises(ExprError, match=message):
            parse(text)


@pytest.fixture
def served():
    h = Harness()
    service = MilvusService(h.proxy)
    schema = MilvusClient.create_schema()
    schema.add_field("id", ClientType.INT64, is_primary=True)
    schema.add_field("vec", ClientType.FLOAT_VECTOR, dim=2)
    schema.add_field("geo", ClientType.GEOMETRY, nullable=True)
    schema.add_field("name", ClientType.VARCHAR, max_length=16)
    assert (
        service.CreateCollection(Prepare.create_collection_request("g", schema), Context()).code
        == 0
    )
    h.proxy.create_index("g", "vec", "v", {"index_type": "FLAT", "metric_type": "L2"})
    h.proxy.load_collection("g")
    h.tick()
    fields = (
        MilvusService(h.proxy)
        .DescribeCollection(Prepare.describe_collection_request("g"), Context())
        .schema
    )
    info = {"fields": [_field_info(f) for f in fields.fields]}

    def insert(rows: dict[int, str | None]) -> object:
        entities = [
            {"id": k, "vec": [float(k), 0.0], "geo": w, "name": f"n{k}"} for k, w in rows.items()
        ]
        request = Prepare.row_insert_param("g", entities, "", info["fields"])
        reply = service.Insert(request, Context())
        h.tick()
        h.pump()
        return reply

    return h, service, insert


def _field_info(f) -> dict:
    return {
        "name": f.name,
        "type": ClientType(f.data_type),
        "is_primary": f.is_primary_key,
        "nullable": f.nullable,
        "params": {kv.key: kv.value for kv in f.type_params},
    }


def _query(service: MilvusService, expr: str, output: tuple[str, ...] = ()) -> object:
    request = Prepare.query_request("g", expr, list(output), [], consistency_level="Strong")
    return service.Query(request, Context())


def _keys(service: MilvusService, expr: str) -> list[int]:
    reply = _query(service, expr)
    assert reply.status.code == 0, reply.status
    return sorted(reply.fields_data[0].scalars.long_data.data)


def _expected(op: str, query: str) -> list[int]:
    """Shapely's (GEOS's) own answer over ROWS, the oracle: Milvus's segcore calls GEOS."""
    q = shapely.from_wkt(query)
    return sorted(
        k
        for k, w in ROWS.items()
        if w is not None and getattr(shapely, op[3:])(shapely.from_wkt(w), q)
    )


@pytest.mark.parametrize(
    ("op", "query"),
    [
        ("st_contains", "POINT (1 1)"),
        ("st_contains", "POINT (2 2)"),
        ("st_within", SQUARE),
        ("st_intersects", "LINESTRING (0 4, 4 0)"),
        ("st_equals", "POLYGON ((4 4, 0 4, 0 0, 4 0, 4 4))"),
        ("st_touches", "POINT (0 0)"),
        ("st_overlaps", "POLYGON ((3 3, 8 3, 8 8, 3 8, 3 3))"),
        ("st_crosses", "LINESTRING (0 10, 10 0)"),
    ],
)
def test_each_operator_answers_as_geos_over_growing_and_sealed_rows(served, op, query):
    h, service, insert = served
    half = dict(list(ROWS.items())[:6])
    assert insert(half).status.code == 0
    h.proxy.flush(["g"])
    for _ in range(3):
        h.step()  # the first rows handed off as a sealed segment, the rest growing
    assert insert({k: w for k, w in ROWS.items() if k not in half}).status.code == 0
    expected = _expected(op, query)
    assert expected, "each case must keep some rows"
    assert _keys(service, f"{op.upper()}(geo, '{query}')") == expected
    assert _keys(service, f"not {op}(geo, '{query}')") == sorted(
        k for k, w in ROWS.items() if w is not None and k not in expected
    )  # a null row is unknown either way


def test_dwithin_isvalid_nulls_outputs_and_refusals(served):
    _, service, insert = served
    assert insert(ROWS).status.code == 0
    # POINT (1 1) is 157.2 km away on the sphere, POINT (2 2) 314 km; the shapes touching
    # (0 0) are 0 m away; LINESTRING (-1 2, 5 2) is 2 degrees (222.6 km) away in the plane
    assert _keys(service, "ST_DWITHIN(geo, 'POINT (0 0)', 160000)") == [0, 3, 5, 7, 8]
    assert _keys(service, "ST_ISVALID(geo)") == [k for k, w in ROWS.items() if w and k != 7]
    assert _keys(service, "geo is null") == [10]
    assert _keys(service, "geo is not null and id < 3") == [0, 1, 2]
    reply = _query(service, "id in [1, 5, 10]", ("geo",))
    [geo] = [f for f in reply.fields_data if f.field_name == "geo"]
    assert list(geo.scalars.geometry_wkt_data.data) == ["POINT (2 2)", SQUARE, ""]
    assert list(geo.valid_data) == [True, True, False]
    for expr, message in (
        ("geo == 'POINT (1 1)'", "GEOMETRY field geo cannot be used in a filter"),
        ("ST_CONTAINS(name, 'POINT (1 1)')", "st_contains needs a GEOMETRY field"),
        ("ST_ISVALID(nope)", "st_isvalid needs a GEOMETRY field"),
    ):
        refused = _query(service, expr)
        assert refused.status.code == 1100 and message in refused.status.reason, expr
    bad = insert({50: "POINT (1 1)", 51: "POLYGON ((0 0, 1 1))"})
    assert bad.status.code == 1100 and "field geo: invalid WKT" in bad.status.reason
    assert _keys(service, "id >= 50") == []  # nothing of the refused insert


def test_an_rtree_index_answers_every_operator_as_the_scan_does():
    """Random shapes around the globe, one collection scanned, one with RTREE: the same
    rows for every operator, ST_DWITHIN near a pole and across the antimeridian included,
    and the indexed read served by the index (its candidates, not every row)."""
    rng = np.random.default_rng(11)
    shapes: dict[int, str | None] = {}
    for k in range(600):
        x, y = rng.uniform(-179, 179), rng.uniform(-89, 89)
        kind = k % 4
        if kind == 0:
            shapes[k] = f"POINT ({x} {y})"
        elif kind == 1:
            shapes[k] = f"LINESTRING ({x} {y}, {x + rng.uniform(-2, 2)} {y + rng.uniform(-2, 2)})"
        elif kind == 2:
            shapes[k] = shapely.box(x, y, x + rng.uniform(0, 3), y + rng.uniform(0, 3)).wkt
        else:
            shapes[k] = None if k % 8 == 3 else f"POINT ({x:.0f} {y:.0f})"
    plain, indexed = _two_collections(shapes)
    queries = [
        "ST_INTERSECTS(geo, 'POLYGON ((-40 -40, 40 -40, 40 40, -40 40, -40 -40))')",
        "ST_WITHIN(geo, 'POLYGON ((0 0, 90 0, 90 60, 0 60, 0 0))')",
        "ST_CONTAINS(geo, 'POINT (10 10)')",
        "ST_TOUCHES(geo, 'LINESTRING (-180 0, 180 0)')",
        "ST_CROSSES(geo, 'LINESTRING (-180 0, 180 0)')",
        "ST_OVERLAPS(geo, 'POLYGON ((-90 -45, 0 -45, 0 45, -90 45, -90 -45))')",
        f"ST_EQUALS(geo, '{shapes[4]}')",
        "ST_DWITHIN(geo, 'POINT (20 30)', 1500000)",
        "ST_DWITHIN(geo, 'POINT (179.5 10)', 900000)",
        "ST_DWITHIN(geo, 'POINT (0 88.5)', 400000)",
        "ST_DWITHIN(geo, 'POINT (5 5)', 0)",
        "not ST_INTERSECTS(geo, 'POLYGON ((-40 -40, 40 -40, 40 40, -40 40, -40 -40))')",
        "ST_ISVALID(geo) and id < 100",
    ]
    by_index = metrics.FILTERED_READS.labels("index")
    for expr in queries:
        before = by_index._value.get()
        scanned, served = plain(expr), indexed(expr)
        assert scanned == served, expr
        if "ST_ISVALID" not in expr:  # the one operator an R-tree cannot narrow
            assert by_index._value.get() > before, f"not served by the index: {expr}"
    assert plain(queries[0]) and plain(queries[7])  # the cases keep rows


def _two_collections(shapes):
    """(scanned, indexed): key lists of a filter over the same rows, without and with RTREE."""
    h = Harness()
    service = MilvusService(h.proxy)
    readers = []
    for name, index in (("plain", None), ("tree", "RTREE")):
        schema = MilvusClient.create_schema()
        schema.add_field("id", ClientType.INT64, is_primary=True)
        schema.add_field("vec", ClientType.FLOAT_VECTOR, dim=2)
        schema.add_field("geo", ClientType.GEOMETRY, nullable=True)
        create = Prepare.create_collection_request(name, schema)
        assert service.CreateCollection(create, Context()).code == 0
        h.proxy.create_index(name, "vec", "v", {"index_type": "FLAT", "metric_type": "L2"})
        if index:
            h.proxy.create_index(name, "geo", "g", {"index_type": index})
        h.proxy.load_collection(name)
        h.tick()
        entities = [{"id": k, "vec": [0.0, 0.0], "geo": w} for k, w in shapes.items()]
        fields = service.DescribeCollection(
            Prepare.describe_collection_request(name), Context()
        ).schema.fields
        request = Prepare.row_insert_param(name, entities, "", [_field_info(f) for f in fields])
        assert service.Insert(request, Context()).status.code == 0
        h.tick()
        h.proxy.flush([name])
        for _ in range(3):
            h.step()  # sealed: the whole segment indexed

        def keys(expr: str, name: str = name) -> list[int]:
            request = Prepare.query_request(name, expr, [], [], consistency_level="Strong")
            reply = service.Query(request, Context())
            assert reply.status.code == 0, (expr, reply.status)
            return sorted(reply.fields_data[0].scalars.long_data.data)

        readers.append(keys)
    return readers


def test_wkb_rows_are_read_too(served):
    """Milvus's FieldData also has ``geometry_data`` (WKB); a client sending it is served."""
    from pymilvus.grpc_gen import milvus_pb2, schema_pb2

    h, service, _ = served
    request = milvus_pb2.InsertRequest(collection_name="g", num_rows=2)
    request.fields_data.add(field_name="id", type=schema_pb2.Int64).scalars.long_data.data.extend(
        [70, 71]
    )
    vec = request.fields_data.add(field_name="vec", type=schema_pb2.FloatVector)
    vec.vectors.dim = 2
    vec.vectors.float_vector.data.extend([0.0] * 4)
    request.fields_data.add(
        field_name="name", type=schema_pb2.VarChar
    ).scalars.string_data.data.extend(["a", "b"])
    geo = request.fields_data.add(field_name="geo", type=schema_pb2.Geometry)
    geo.scalars.geometry_data.data.extend(
        [shapely.to_wkb(shapely.Point(0.125, 3)), shapely.to_wkb(shapely.box(0, 0, 1, 1))]
    )
    geo.valid_data.extend([True, True])
    assert service.Insert(request, Context()).status.code == 0
    h.tick()
    h.pump()
    reply = _query(service, "id >= 70", ("geo",))
    [column] = [f for f in reply.fields_data if f.field_name == "geo"]
    assert list(column.scalars.geometry_wkt_data.data) == [
        "POINT (0.125 3)",
        "POLYGON ((1 0, 1 1, 0 1, 0 0, 1 0))",
    ]


def test_indexed_chunks_and_the_unindexed_tail_answer_as_the_scan():
    """A growing store: R-trees over its full chunks, the newest rows (a partial chunk)
    scanned; the rows equal a scan of every row, nulls and wide queries included."""
    from vectide.services.common.msgstream.message import DataType, FieldColumn, InsertMsg
    from vectide.services.common.requests import ShardQueryRequest
    from vectide.services.common.schema import CollectionSchema, FieldSchema
    from vectide.services.querynode.reads import parse_filter, query_store
    from vectide.services.querynode.scalar_index import ScalarIndexes
    from vectide.services.querynode.segment import ShardStore

    schema = CollectionSchema(
        "s",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "geo", DataType.GEOMETRY, nullable=True),
        ],
    )
    store = ShardStore(schema, [], chunk_rows=64)
    rng = np.random.default_rng(5)
    n = 150  # two full chunks and a tail of 22 rows
    texts = [f"POINT ({x} {y})" for x, y in rng.uniform(-20, 20, (n, 2)).tolist()]
    valid = np.array([i % 9 != 4 for i in range(n)])
    texts = [t if ok else "" for t, ok in zip(texts, valid.tolist(), strict=True)]
    ids = np.arange(n, dtype=np.int64)
    column = FieldColumn(101, "geo", DataType.GEOMETRY, texts, valid=valid)
    stamps = np.full(n, 10, np.int64)
    store.insert(InsertMsg(0, 10, 0, 1, 1, 1, "ch", ids, np.zeros(n, np.int64), stamps, [column]))

    def keys(expr: str) -> list[int]:
        request = ShardQueryRequest(1, ["ch"], 0, 1.0, expr=expr)
        return sorted(query_store(store, request, parse_filter(expr, {}), 100).pks.tolist())

    filters = [
        "ST_WITHIN(geo, 'POLYGON ((-5 -5, 5 -5, 5 5, -5 5, -5 -5))')",
        "ST_DWITHIN(geo, 'POINT (0 0)', 600000)",
        "ST_INTERSECTS(geo, 'POLYGON ((-30 -30, 30 -30, 30 30, -30 30, -30 -30))')",  # wide
        "not ST_WITHIN(geo, 'POLYGON ((-5 -5, 5 -5, 5 5, -5 5, -5 -5))')",
        "geo is null",
    ]
    scanned = [keys(f) for f in filters]
    store.scalar = ScalarIndexes(schema, 64)
    store.scalar.add("geo", "RTREE")
    assert store.build_scalar_indexes() == 2  # the full chunks; the tail waits
    by_index = metrics.FILTERED_READS.labels("index")
    before = by_index._value.get()
    assert [keys(f) for f in filters] == scanned
    assert by_index._value.get() >= before + 4
    assert all(scanned[:3]) and 0 < len(scanned[3]) < n


def test_a_wkt_default_value_fills_missing_rows_and_bad_wkt_refuses_the_schema():
    h = Harness()
    service = MilvusService(h.proxy)

    def create(name: str, default: str) -> object:
        schema = MilvusClient.create_schema()
        schema.add_field("id", ClientType.INT64, is_primary=True)
        schema.add_field("vec", ClientType.FLOAT_VECTOR, dim=2)
        schema.add_field("geo", ClientType.GEOMETRY, nullable=True, default_value=default)
        return service.CreateCollection(Prepare.create_collection_request(name, schema), Context())

    refused = create("bad", "POINT (1)")
    assert refused.code == 105, refused
    assert "field geo: default value: invalid WKT" in refused.reason
    assert create("g", "point(5  6)").code == 0
    described = service.DescribeCollection(Prepare.describe_collection_request("g"), Context())
    [geo] = [f for f in described.schema.fields if f.name == "geo"]
    assert geo.default_value.string_data == "POINT (5 6)"
    h.proxy.create_index("g", "vec", "v", {"index_type": "FLAT", "metric_type": "L2"})
    h.proxy.load_collection("g")
    h.tick()
    info = [_field_info(f) for f in described.schema.fields]
    rows = [{"id": 1, "vec": [0.0, 0.0], "geo": None}, {"id": 2, "vec": [0.0, 0.0]}]
    request = Prepare.row_insert_param("g", rows, "", info)
    assert service.Insert(request, Context()).status.code == 0
    h.tick()
    h.pump()
    assert _keys(service, "ST_EQUALS(geo, 'POINT (5 6)')") == [1, 2]
