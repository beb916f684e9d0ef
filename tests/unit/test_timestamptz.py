"""TIMESTAMPTZ fields (Milvus 2.6.6): ISO text read as Milvus's proxy reads it (Go layouts,
offsets in [-12, 14], naive text in the collection's or request's zone), instants written
back as Go's RFC 3339 in the read's zone or as ``time_fields`` components, ``ISO '...'``
comparisons and ``INTERVAL`` arithmetic in segcore's UTC calendar; through the gRPC servicer
over the fault harness's cluster, growing and sealed, scanned and through STL_SORT."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest
from pymilvus import DataType as ClientType
from pymilvus import MilvusClient
from pymilvus.client.prepare import Prepare

from benchmarks.search_path import Context
from vectide.services.common import metrics, timestamptz
from vectide.services.common.expr import ExprError, parse
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.testing import Harness

SHANGHAI = "Asia/Shanghai"


def micros(text: str) -> int:
    """The oracle: Python's own ISO reading (offset given)."""
    return (datetime.fromisoformat(text) - datetime.fromisoformat("1970-01-01T00:00:00+00:00")) // (
        timedelta(microseconds=1)
    )


# -- text in and out ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-05-01T23:59:59+08:00", "2025-05-01T23:59:59+08:00"),
        ("2025-05-01T15:59:59Z", "2025-05-01T15:59:59+00:00"),
        ("2025-05-01 23:59:59+08:00", "2025-05-01T23:59:59+08:00"),
        ("2025-05-01 23:59:59+08", "2025-05-01T23:59:59+08:00"),
        ("2025-05-01 15:59:59Z", "2025-05-01T15:59:59+00:00"),
        ("2025-05-01T23:59:59.123456789-05:30", "2025-05-01T23:59:59.123456-05:30"),
        ("2025-05-01T23:59:59", "2025-05-01T23:59:59+08:00"),  # naive: the zone's
        ("2025-05-01 23:59:59.5", "2025-05-01T23:59:59.5+08:00"),
        ("2025-01-15 12:00:00", "2025-01-15T12:00:00+08:00"),
        ("1969-12-31T23:59:59.25Z", "1969-12-31T23:59:59.25+00:00"),
    ],
)
def test_text_is_read_as_milvus_reads_it(text, expected):
    assert timestamptz.parse(text, SHANGHAI) == micros(expected)


def test_naive_text_follows_the_zones_daylight_saving():
    july, january = "2025-07-01 12:00:00", "2025-01-01 12:00:00"
    assert timestamptz.parse(july, "America/New_York") == micros("2025-07-01T12:00:00-04:00")
    assert timestamptz.parse(january, "America/New_York") == micros("2025-01-01T12:00:00-05:00")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("2025-05-01T23:59:59+08", "Does not match"),  # a short offset needs a space
        ("2025-05-01", "Does not match"),
        ("2025/05/01 00:00:00", "Does not match"),
        ("2025-02-30T00:00:00Z", "day is out of range"),
        ("2025-05-01T24:00:00Z", "hour must be"),
        ("2025-05-01T00:00:00+15:00", "UTC offset hour 15 is out of the valid range"),
        ("2025-05-01T00:00:00-13:00", "UTC offset hour -13"),
        ("", "Does not match"),
    ],
)
def test_text_that_is_no_instant_is_refused_with_the_reason(text, reason):
    with pytest.raises(timestamptz.TimestamptzError, match=reason):
        timestamptz.parse(text)


def test_instants_are_written_as_go_writes_them():
    instant = micros("2025-01-01T00:00:00.120000+08:00")
    assert timestamptz.render(instant) == "2024-12-31T16:00:00.12Z"
    assert timestamptz.render(instant, SHANGHAI) == "2025-01-01T00:00:00.12+08:00"
    assert timestamptz.render(instant, "America/St_Johns") == "2024-12-31T12:30:00.12-03:30"
    assert timestamptz.render(micros("2025-06-01T12:00:00+00:00"), "Europe/London") == (
        "2025-06-01T13:00:00+01:00"
    )
    assert timestamptz.render(micros("2025-01-01T12:00:00+00:00"), "Europe/London") == (
        "2025-01-01T12:00:00Z"  # an offset of zero is Z whatever the zone
    )
    for value in (0, -1, 1, 10**15 + 7, -(10**14) - 3):
        assert timestamptz.parse(timestamptz.render(value, SHANGHAI)) == value


def test_zones_components_and_durations():
    assert timestamptz.zone_of({"timezone": SHANGHAI}) == SHANGHAI
    assert timestamptz.zone_of({}) == "UTC"
    with pytest.raises(timestamptz.TimestamptzError, match="unknown or invalid IANA"):
        timestamptz.check_zone("Mars/Olympus")
    assert timestamptz.components("year, month day") == ["year", "month", "day"]
    with pytest.raises(timestamptz.TimestamptzError, match="unsupported field"):
        timestamptz.components("year, week")
    instant = micros("2025-01-01T00:30:05.000123+08:00")
    assert timestamptz.extract([instant], SHANGHAI, timestamptz.COMPONENTS) == [
        [2025, 1, 1, 0, 30, 5, 123]
    ]
    assert timestamptz.extract([instant], "UTC", ["year", "day", "hour"]) == [[2024, 31, 16]]
    assert timestamptz.Interval.parse("P1Y2M3DT4H5M6S") == timestamptz.Interval(1, 2, 3, 4, 5, 6)
    assert timestamptz.Interval.parse("PT2M") == timestamptz.Interval(minutes=2)
    assert timestamptz.Interval.parse("P2M") == timestamptz.Interval(months=2)
    for bad in ("P", "PT", "1D", "P1H", "P1.5D", "P1W"):
        with pytest.raises(timestamptz.TimestamptzError, match="invalid ISO 8601 duration"):
            timestamptz.Interval.parse(bad)


def test_intervals_move_instants_in_utcs_calendar_as_timegm_normalizes():
    """Calendar fields are added to the UTC date and normalized: January 31 plus a month is
    March 3 (2 in a leap year), as segcore's gmtime/timegm arithmetic gives."""
    start = np.array(
        [
            micros("2025-01-31T10:00:00+00:00"),
            micros("2024-01-31T10:00:00.5+00:00"),
            micros("2024-02-29T23:00:00+00:00"),
            micros("1969-12-31T23:59:59.75+00:00"),
        ]
    )
    month = timestamptz.Interval(months=1)
    assert [timestamptz.render(v) for v in month.shift(start, 1)] == [
        "2025-03-03T10:00:00Z",
        "2024-03-02T10:00:00.5Z",
        "2024-03-29T23:00:00Z",
        "1970-01-31T23:59:59.75Z",
    ]
    year_and_hours = timestamptz.Interval(years=1, hours=2)
    assert [timestamptz.render(v) for v in year_and_hours.shift(start, -1)] == [
        "2024-01-31T08:00:00Z",
        "2023-01-31T08:00:00.5Z",
        "2023-03-01T21:00:00Z",  # 2023-02-29 is March 1
        "1968-12-31T21:59:59.75Z",
    ]


def test_iso_and_interval_parse_into_their_nodes():
    tree = parse("tsz + INTERVAL 'P1D' > ISO '2025-01-01 00:00:00'", zone=SHANGHAI)
    assert (tree.op, tree.sign, tree.interval.days) == (">", 1, 1)
    assert tree.instant == micros("2025-01-01T00:00:00+08:00")
    reverse = parse("iso '2025-01-01T00:00:00Z' >= tsz - interval 'PT2H'")
    assert (reverse.op, reverse.sign, reverse.interval.hours) == ("<=", -1, 2)
    named_iso = parse("iso > ISO '2025-01-01T00:00:00Z'")  # a field may be named iso
    assert named_iso.left.name == "iso"
    for bad, reason in [
        ("tsz > INTERVAL 'P1D'", "INTERVAL can only follow"),
        ("tsz + INTERVAL 'P1D' > 5", "INTERVAL can only follow"),
        ("tsz > ISO 'tomorrow'", "invalid timestamp string"),
        ("tsz + INTERVAL 'P1X' > ISO '2025-01-01T00:00:00Z'", "invalid ISO 8601 duration"),
    ]:
        with pytest.raises(ExprError, match=reason):
            parse(bad)


# -- through the servicer -------------------------------------------------------------------

#: rows by key: instants with offsets, naive ones (the collection's zone: Shanghai), a null
ROWS: dict[int, str | None] = {
    0: "2025-01-01T00:00:00+08:00",
    1: "2025-01-31T10:00:00Z",
    2: "2025-01-02 00:00:00",
    3: "2024-12-31T23:59:59.5-05:00",
    4: None,
    5: "2025-02-28 12:00:00",
    6: "2025-03-01T00:00:00.000001+08:00",
}


def _instant(key: int) -> int:
    return timestamptz.parse(ROWS[key], SHANGHAI)  # type: ignore[arg-type]


@pytest.fixture
def served():
    h = Harness()
    service = MilvusService(h.proxy)
    schema = MilvusClient.create_schema(enable_dynamic_field=True)
    schema.add_field("id", ClientType.INT64, is_primary=True)
    schema.add_field("vec", ClientType.FLOAT_VECTOR, dim=2)
    schema.add_field("tsz", ClientType.TIMESTAMPTZ, nullable=True)
    schema.add_field(
        "made", ClientType.TIMESTAMPTZ, nullable=True, default_value="2020-01-01 08:00:00"
    )
    create = Prepare.create_collection_request("t", schema, properties={"timezone": SHANGHAI})
    assert service.CreateCollection(create, Context()).code == 0
    h.proxy.create_index("t", "vec", "v", {"index_type": "FLAT", "metric_type": "L2"})
    h.proxy.load_collection("t")
    h.tick()
    described = service.DescribeCollection(Prepare.describe_collection_request("t"), Context())
    fields = [
        {
            "name": f.name,
            "type": ClientType(f.data_type),
            "is_primary": f.is_primary_key,
            "nullable": f.nullable,
            "default_value": f.default_value if f.HasField("default_value") else None,
            "params": {kv.key: kv.value for kv in f.type_params},
        }
        for f in described.schema.fields
    ]

    def insert(rows: dict[int, str | None], **extra: object) -> object:
        entities = [
            {"id": k, "vec": [float(k), 0.0], "tsz": text, **extra} for k, text in rows.items()
        ]
        reply = service.Insert(Prepare.row_insert_param("t", entities, "", fields), Context())
        h.tick()
        h.pump()
        return reply

    return h, service, insert, described


def _query(service, expr: str, output=("tsz",), **kwargs) -> object:
    request = Prepare.query_request(
        "t", expr, list(output), [], consistency_level="Strong", **kwargs
    )
    return service.Query(request, Context())


def _keys(service, expr: str) -> list[int]:
    reply = _query(service, expr, output=())
    assert reply.status.code == 0, reply.status
    return sorted(reply.fields_data[0].scalars.long_data.data)


def _column(reply, name: str):
    return next(fd for fd in reply.fields_data if fd.field_name == name)


def _expected(predicate) -> list[int]:
    return sorted(k for k, text in ROWS.items() if text is not None and predicate(_instant(k)))


FILTERS = {
    "tsz > ISO '2025-01-02T00:00:00+08:00'": lambda t: t > _instant(2),
    "tsz >= ISO '2025-01-02 00:00:00'": lambda t: t >= _instant(2),  # naive: Shanghai
    "tsz == ISO '2024-12-31T16:00:00Z'": lambda t: t == _instant(0),
    "tsz != ISO '2024-12-31T16:00:00Z'": lambda t: t != _instant(0),
    "ISO '2025-01-31T10:00:00Z' > tsz": lambda t: t < _instant(1),
    "tsz + INTERVAL 'P1M' >= ISO '2025-03-03T10:00:00Z'": lambda t: t >= _instant(1),
    "tsz - INTERVAL 'PT12H' < ISO '2025-01-01 00:00:00'": lambda t: (
        t < micros("2025-01-01T12:00:00+08:00")
    ),
    "ISO '2025-03-29T16:00:00Z' <= tsz + interval 'P1M1D'": lambda t: t >= _instant(6),
    "tsz < ISO '2025-02-01T00:00:00Z' and id > 0": lambda t: (
        t < micros("2025-02-01T00:00:00+00:00")
    ),
}


@pytest.mark.parametrize("expr", list(FILTERS))
def test_filters_compare_instants_over_growing_sealed_and_indexed_rows(served, expr):
    h, service, insert, _ = served
    assert insert(ROWS).status.code == 0
    keys = [k for k in _expected(FILTERS[expr]) if "id > 0" not in expr or k > 0]
    assert _keys(service, expr) == keys
    h.proxy.flush(["t"])
    for _ in range(3):
        h.step()  # handed off: the rows are a sealed segment read from its binlogs
    assert _keys(service, expr) == keys
    h.proxy.create_index("t", "tsz", "tsz_sort", {"index_type": "STL_SORT"})
    h.tick()
    assert _keys(service, expr) == keys


def test_an_stl_sort_index_answers_iso_comparisons_as_the_scan_does(served):
    h, service, insert, _ = served
    rng = np.random.default_rng(5)
    start = datetime.fromisoformat("2025-01-01T00:00:00+00:00")
    rows = {
        k: (start + timedelta(seconds=int(s))).isoformat()
        for k, s in enumerate(rng.integers(0, 86400 * 30, 400))
    }
    assert insert(rows).status.code == 0
    h.proxy.flush(["t"])
    for _ in range(3):
        h.step()  # sealed: the whole segment indexed
    filters = [
        "tsz >= ISO '2025-01-10 00:00:00' and tsz < ISO '2025-01-11 00:00:00'",
        "tsz == ISO '" + rows[7] + "'",
        "ISO '2025-01-02T00:00:00Z' > tsz",
    ]
    scanned = {expr: _keys(service, expr) for expr in filters}
    assert all(scanned.values())
    h.proxy.create_index("t", "tsz", "tsz_sort", {"index_type": "STL_SORT"})
    h.tick()
    for expr in filters:
        before = metrics.FILTERED_READS.labels("index")._value.get()
        assert _keys(service, expr) == scanned[expr], expr
        assert metrics.FILTERED_READS.labels("index")._value.get() > before, expr


def test_output_text_zones_components_nulls_and_defaults(served):
    _, service, insert, described = served
    assert insert(ROWS).status.code == 0
    made = next(f for f in described.schema.fields if f.name == "made")
    assert made.default_value.string_data == "2020-01-01T08:00:00+08:00"  # collection's zone
    reply = _query(service, "id in [0, 3, 4]", ("tsz", "made"))
    assert reply.status.code == 0, reply.status
    assert list(_column(reply, "tsz").scalars.string_data.data)[:2] == [
        "2025-01-01T00:00:00+08:00",
        "2025-01-01T12:59:59.5+08:00",
    ]
    assert list(_column(reply, "tsz").valid_data) == [True, True, False]
    assert set(_column(reply, "made").scalars.string_data.data) == {"2020-01-01T08:00:00+08:00"}
    in_utc = _query(service, "id == 0", timezone="UTC")
    assert list(_column(in_utc, "tsz").scalars.string_data.data) == ["2024-12-31T16:00:00Z"]
    naive_in_utc = _query(service, "tsz == ISO '2024-12-31 16:00:00'", timezone="UTC")
    assert list(naive_in_utc.fields_data[0].scalars.long_data.data) == [0]
    parts = _query(service, "id in [0, 6]", time_fields="year, month, day, microsecond")
    column = _column(parts, "tsz")
    assert column.type == ClientType.ARRAY
    assert [list(row.long_data.data) for row in column.scalars.array_data.data] == [
        [2025, 1, 1, 0],
        [2025, 3, 1, 1],
    ]
    hits = service.Search(
        Prepare.search_requests_with_expr(
            "t",
            "vec",
            {"metric_type": "L2", "params": {}},
            2,
            data=[[0.0, 0.0]],
            expr="tsz < ISO '2025-01-02T00:00:00+08:00'",
            output_fields=["tsz"],
            timezone="America/New_York",
        ),
        Context(),
    )
    assert hits.status.code == 0, hits.status
    assert list(hits.results.ids.int_id.data) == [0, 3]
    assert list(_column(hits.results, "tsz").scalars.string_data.data) == [
        "2024-12-31T11:00:00-05:00",
        "2024-12-31T23:59:59.5-05:00",
    ]


def test_bad_text_zones_and_comparisons_are_refused_and_lose_nothing(served):
    _, service, insert, _ = served
    refused = insert({10: "2025-01-01T00:00:00Z", 11: "yesterday"})
    assert refused.status.code != 0
    assert "tsz" in refused.status.reason and "yesterday" in refused.status.reason
    assert _keys(service, "id >= 10") == []
    assert insert({12: "2025-01-01T00:00:00+14:00"}).status.code == 0
    for expr, reason in [
        ("tsz > 5", "cannot compare"),
        ("id > ISO '2025-01-01T00:00:00Z'", "cannot compare"),
        ("tsz in [1, 2]", "compares with ISO"),
        ("$meta['t'] > ISO '2025-01-01T00:00:00Z'", "cannot compare"),
        ("id == ISO '2025-01-01T00:00:00Z'", "cannot compare"),
        ("id + INTERVAL 'P1D' > ISO '2025-01-01T00:00:00Z'", "not a timestamptz"),
    ]:
        reply = _query(service, expr, output=())
        assert reply.status.code != 0 and reason in reply.status.reason, (expr, reply.status)
    delete = service.Delete(
        Prepare.delete_request("t", "id == ISO '1970-01-01T00:00:00.000012Z'", None, 0),
        Context(),
    )
    assert delete.status.code != 0 and "cannot compare" in delete.status.reason  # not key 12
    assert _keys(service, "id == 12") == [12]
    unknown_zone = _query(service, "id > 0", timezone="Mars/Olympus")
    assert "unknown or invalid IANA Time Zone ID" in unknown_zone.status.reason
    assert _keys(service, "tsz is null") == []
    assert _keys(service, "tsz is not null") == [12]


def test_a_hybrid_search_renders_instants_in_the_collections_zone(served):
    """pymilvus's hybrid_search carries no ``timezone``: its hits' instants are text in the
    collection's zone, and its sub-requests' ISO filters read naive text there too."""
    from pymilvus import RRFRanker

    _, service, insert, _ = served
    assert insert(ROWS).status.code == 0
    subs = [
        Prepare.search_requests_with_expr(
            "t",
            "vec",
            {"metric_type": "L2", "params": {}},
            3,
            data=[[float(k), 0.0]],
            expr="tsz < ISO '2025-01-02 00:00:00'",
        )
        for k in (0, 3)
    ]
    request = Prepare.hybrid_search_request_with_ranker(
        "t", subs, RRFRanker(), 2, output_fields=["tsz"]
    )
    reply = service.HybridSearch(request, Context())
    assert reply.status.code == 0, reply.status
    assert sorted(reply.results.ids.int_id.data) == [0, 3]
    instants = _column(reply.results, "tsz").scalars.string_data.data
    texts = dict(zip(reply.results.ids.int_id.data, instants, strict=True))
    assert texts == {0: "2025-01-01T00:00:00+08:00", 3: "2025-01-01T12:59:59.5+08:00"}


def test_a_naive_default_is_read_in_the_zone_the_database_gives_the_collection():
    """A collection created without a ``timezone`` in a database with one inherits that
    zone, and its naive TIMESTAMPTZ default is read there, not in UTC."""
    from pymilvus.grpc_gen import milvus_pb2

    h = Harness()
    service = MilvusService(h.proxy)
    tokyo = milvus_pb2.CreateDatabaseRequest(db_name="tokyo")
    tokyo.properties.add(key="timezone", value="Asia/Tokyo")
    assert service.CreateDatabase(tokyo, Context()).code == 0
    schema = MilvusClient.create_schema()
    schema.add_field("id", ClientType.INT64, is_primary=True)
    schema.add_field("vec", ClientType.FLOAT_VECTOR, dim=2)
    schema.add_field("made", ClientType.TIMESTAMPTZ, default_value="2020-01-01 09:00:00")
    create = Prepare.create_collection_request("t", schema)
    create.db_name = "tokyo"
    assert service.CreateCollection(create, Context()).code == 0
    described = service.DescribeCollection(
        milvus_pb2.DescribeCollectionRequest(db_name="tokyo", collection_name="t"), Context()
    )
    assert {kv.key: kv.value for kv in described.properties}["timezone"] == "Asia/Tokyo"
    made = next(f for f in described.schema.fields if f.name == "made")
    assert made.default_value.string_data == "2020-01-01T09:00:00+09:00"
