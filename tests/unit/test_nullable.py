"""Nullable fields and default values, layer by layer: schema rules, the proxy's protobuf
edge, the channel codec, the query node's columns, filters, and binlogs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from pymilvus.grpc_gen import schema_pb2

from tests.unit.test_expr import FakeSource
from vectide.services.common import binlog, nullable
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.expr import evaluate, parse
from vectide.services.common.msgstream import codec
from vectide.services.common.msgstream.message import DataType, FieldColumn, InsertMsg
from vectide.services.common.rpc import codec as rpc
from vectide.services.common.rpc import types as _types  # noqa: F401  (registers the RPC types)
from vectide.services.common.schema import CollectionSchema, FieldSchema
from vectide.services.proxy import convert
from vectide.services.proxy.rest_body import full_schema
from vectide.services.querynode.segment import ShardStore

# -- schema rules -------------------------------------------------------------------------


def field(data_type: DataType = DataType.INT64, **kw) -> FieldSchema:
    return FieldSchema(field_id=102, name="x", data_type=data_type, **kw)


@pytest.mark.parametrize(
    "bad,why",
    [
        (field(is_primary=True, nullable=True), "primary key cannot be nullable"),
        (
            field(DataType.SPARSE_FLOAT_VECTOR, nullable=True),
            "sparse vector fields cannot be nullable",
        ),
        (field(DataType.FLOAT_VECTOR, dim=4, default_value=1), "FLOAT_VECTOR fields cannot have"),
        (field(is_primary=True, default_value=1), "primary key cannot have a default"),
        (field(DataType.JSON, default_value="{}"), "JSON fields cannot have a default"),
        (field(default_value="a"), "does not match the type INT64"),
        (field(DataType.INT8, default_value=300), "out of range for INT8"),
        (field(DataType.BOOL, default_value=1), "does not match the type BOOL"),
        (field(DataType.INT32, default_value=True), "does not match the type INT32"),
        (field(DataType.VARCHAR, max_length=2, default_value="abc"), "longer than max_length"),
    ],
)
def test_schema_rules_refuse_what_milvus_refuses(bad, why):
    with pytest.raises(MilvusError, match=why) as err:
        nullable.check_field(bad)
    assert err.value.code == Code.COLLECTION_ILLEGAL_SCHEMA


def test_nulls_take_the_default_or_stay_null_or_are_refused():
    valid = np.array([True, False, True])
    col = FieldColumn(102, "x", DataType.INT64, np.array([1, 0, 3]), 0, valid.copy())
    assert nullable.settle(field(default_value=9), col).data.tolist() == [1, 9, 3]
    assert col.valid is None
    kept = nullable.settle(
        field(nullable=True), FieldColumn(102, "x", DataType.INT64, np.zeros(3), 0, valid)
    )
    assert kept.valid.tolist() == [True, False, True]
    with pytest.raises(MilvusError, match="not nullable"):
        nullable.settle(field(), FieldColumn(102, "x", DataType.INT64, np.zeros(3), 0, valid))


def test_a_missing_column_is_all_nulls_all_defaults_or_required():
    assert nullable.absent(field(), 2) is None
    nulls = nullable.absent(field(DataType.VARCHAR, max_length=4, nullable=True), 2)
    assert nulls.data == ["", ""] and nulls.valid.tolist() == [False, False]
    defaults = nullable.absent(field(DataType.VARCHAR, max_length=4, default_value="d"), 2)
    assert defaults.data == ["d", "d"] and defaults.valid is None


# -- proxy protobuf edge ------------------------------------------------------------------


def proto_with(*extra: schema_pb2.FieldSchema) -> bytes:
    schema = schema_pb2.CollectionSchema(name="c")
    schema.fields.add(name="id", data_type=DataType.INT64, is_primary_key=True)
    vec = schema.fields.add(name="v", data_type=DataType.FLOAT_VECTOR)
    vec.type_params.add(key="dim", value="2")
    schema.fields.extend(extra)
    return schema.SerializeToString()


def test_nullable_and_default_value_round_trip_through_describe():
    n = schema_pb2.FieldSchema(name="n", data_type=DataType.INT32, nullable=True)
    d = schema_pb2.FieldSchema(name="d", data_type=DataType.DOUBLE)
    d.default_value.double_data = 1.5
    schema = convert.schema_from_proto(proto_with(n, d), "c")
    assert schema.field("n").nullable and schema.field("d").default_value == 1.5
    back = {f.name: f for f in convert.schema_to_proto(schema).fields}
    assert back["n"].nullable and not back["d"].nullable
    assert back["d"].default_value.double_data == 1.5 and not back["n"].HasField("default_value")


def test_a_default_of_the_wrong_member_is_refused():
    d = schema_pb2.FieldSchema(name="d", data_type=DataType.INT32)
    d.default_value.string_data = "seven"
    with pytest.raises(MilvusError, match="does not match"):
        convert.schema_from_proto(proto_with(d), "c")


def nullable_schema() -> CollectionSchema:
    return CollectionSchema(
        "c",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "v", DataType.FLOAT_VECTOR, dim=2),
            FieldSchema(102, "n", DataType.INT32, nullable=True),
            FieldSchema(103, "s", DataType.VARCHAR, max_length=8, nullable=True),
            FieldSchema(104, "d", DataType.DOUBLE, default_value=1.5),
        ],
    )


def test_pymilvus_compact_valid_data_becomes_full_columns_with_defaults_applied():
    n = schema_pb2.FieldData(field_name="n", type=DataType.INT32, valid_data=[False, True, False])
    n.scalars.int_data.data.append(7)  # pymilvus sends only the valid rows' values
    s = schema_pb2.FieldData(field_name="s", type=DataType.VARCHAR, valid_data=[True] * 3)
    s.scalars.string_data.data.extend(["a", "b", "c"])
    d = schema_pb2.FieldData(field_name="d", type=DataType.DOUBLE, valid_data=[True, False, False])
    d.scalars.double_data.data.append(4.0)
    cols = convert.columns_from_fields_data(nullable_schema(), [n, s, d], 3)
    assert cols["n"].data.tolist() == [0, 7, 0] and cols["n"].valid.tolist() == [0, 1, 0]
    assert cols["s"].valid is None  # no null: no mask travels
    assert cols["d"].data.tolist() == [4.0, 1.5, 1.5] and cols["d"].valid is None


def test_valid_data_that_does_not_add_up_is_refused():
    n = schema_pb2.FieldData(field_name="n", type=DataType.INT32, valid_data=[True, True])
    n.scalars.int_data.data.append(7)
    with pytest.raises(MilvusError, match="1 values for 2 non-null rows"):
        convert.columns_from_fields_data(nullable_schema(), [n], 2)


def test_results_carry_valid_data_and_placeholders():
    fd = convert.field_data(nullable_schema().field("s"), ["a", None, "c"])
    assert list(fd.valid_data) == [True, False, True]
    assert list(fd.scalars.string_data.data) == ["a", "", "c"]
    fd = convert.field_data(nullable_schema().field("n"), np.array([1, 2], np.int32))
    assert list(fd.valid_data) == [True, True]


# -- channel codec, internal RPC, binlogs -------------------------------------------------


def insert_msg(fields: list[FieldColumn], rows: int) -> InsertMsg:
    stamps = np.full(rows, 5, np.int64)
    return InsertMsg(
        1, 5, 1, 1, 1, 1, "ch", np.arange(rows), np.zeros(rows, np.int64), stamps, fields
    )


def test_the_validity_mask_survives_the_channel_and_rpc():
    col = FieldColumn(
        102, "n", DataType.INT32, np.array([1, 0], np.int32), 0, np.array([1, 0], bool)
    )
    msg = insert_msg([col, FieldColumn(103, "s", DataType.VARCHAR, ["a", "b"])], 2)
    back = codec.decode(codec.encode(msg))
    assert back.fields[0].valid.tolist() == [True, False] and back.fields[1].valid is None
    assert rpc.decode(rpc.encode(col)).valid.tolist() == [True, False]


@pytest.mark.parametrize(
    "data_type,values",
    [
        (DataType.INT32, np.array([5, 0, 7], np.int32)),
        (DataType.BOOL, np.array([True, False, False])),
        (DataType.VARCHAR, ["a", "", "c"]),
        (DataType.JSON, ['{"k": 1}', "", "[]"]),
    ],
)
def test_binlogs_keep_nulls_as_parquet_nulls(data_type, values):
    valid = np.array([True, False, True])
    raw = binlog.encode_column(values, data_type, valid=valid)
    back, back_valid = binlog.read_column(raw, data_type)
    assert back_valid.tolist() == valid.tolist()
    assert list(back) == list(values)  # nulls read back as the placeholder
    assert binlog.read_column(binlog.encode_column(values, data_type), data_type)[1] is None


# -- query node and filters ---------------------------------------------------------------


def store_with_nulls() -> ShardStore:
    store = ShardStore(nullable_schema())
    fields = [
        FieldColumn(101, "v", DataType.FLOAT_VECTOR, np.ones((4, 2), np.float32), 2),
        FieldColumn(
            102,
            "n",
            DataType.INT32,
            np.array([1, 0, 3, 0]),
            0,
            np.array([True, False, True, False]),
        ),
        FieldColumn(103, "s", DataType.VARCHAR, ["a", "b", "c", "d"]),
        FieldColumn(104, "d", DataType.DOUBLE, np.full(4, 1.5)),
    ]
    store.insert(insert_msg(fields, 4))
    return store


def test_the_store_keeps_validity_and_outputs_none_for_nulls():
    store = store_with_nulls()
    assert store.valid("n").tolist() == [True, False, True, False]
    assert store.valid("s").all() and store.valid("d") is None
    assert store.output("n", np.array([0, 1])) == [1, None]
    assert store.output("s", np.array([1])) == ["b"]


def test_a_null_in_a_field_that_is_not_nullable_is_refused_by_the_store():
    """...unless the field has a default value: a null there is a row written before the
    field was added (AddCollectionField), read back from a binlog, and takes the default."""
    fields = [
        FieldColumn(101, "v", DataType.FLOAT_VECTOR, np.ones((1, 2), np.float32), 2),
        FieldColumn(102, "n", DataType.INT32, np.array([1])),
        FieldColumn(103, "s", DataType.VARCHAR, [""]),
        FieldColumn(104, "d", DataType.DOUBLE, np.full(1, 0.0), 0, np.array([False])),
    ]
    schema = nullable_schema()
    plain = replace(schema.fields[4], default_value=None)
    store = ShardStore(replace(schema, fields=[*schema.fields[:4], plain]))
    with pytest.raises(ValueError, match="not nullable"):
        store.insert(insert_msg(fields, 1))
    assert store.num_rows == 0
    defaulted = ShardStore(schema)
    defaulted.insert(insert_msg(fields, 1))
    assert defaulted.column("d").tolist() == [1.5]


def source() -> FakeSource:
    """Rows 0..4: n = 1, null, 5, null, 1; m = 1, 1, null, 0, 1; j = {k:1}, null, {k:2}..."""
    return FakeSource(
        columns={
            "n": np.array([1, 0, 5, 0, 1], np.int64),
            "m": np.array([1, 1, 0, 0, 1], np.int64),
            "j": [{"k": 1}, None, {"k": 2}, {"k": 1}, None],
        },
        types={"n": DataType.INT64, "m": DataType.INT64, "j": DataType.JSON},
        validity={
            "n": np.array([1, 0, 1, 0, 1], bool),
            "m": np.array([1, 1, 0, 1, 1], bool),
            "j": np.array([1, 0, 1, 1, 0], bool),
        },
    )


@pytest.mark.parametrize(
    "expr,rows",
    [  # the rows milvus-lite returns for the same data
        ("n is null", [1, 3]),
        ("n is not null", [0, 2, 4]),
        ("n > 2", [2]),
        ("not (n > 2)", [0, 4]),
        ("n != 5", [0, 4]),
        ("not (n > 2 and m > 0)", [0, 3, 4]),
        ("not (n > 2 or m > 0)", []),
        ("n > 2 or m > 0", [0, 1, 2, 4]),
        ("n == m", [0, 4]),
        ("not (n is null)", [0, 2, 4]),
        ("not (n is not null)", [1, 3]),
        ("n in [1, 5]", [0, 2, 4]),
        ("not (n in [1])", [2]),
        ('j["k"] == 1', [0, 3]),
        ('not (j["k"] == 1)', [2]),
        ("j is null", [1, 4]),
    ],
)
def test_filters_follow_three_valued_logic_over_nulls(expr, rows):
    assert np.flatnonzero(evaluate(parse(expr), source())).tolist() == rows


# -- REST ----------------------------------------------------------------------------------


def rest_body(**extra) -> dict:
    fields = [
        {"fieldName": "id", "dataType": "Int64", "isPrimary": True},
        {"fieldName": "v", "dataType": "FloatVector", "elementTypeParams": {"dim": 2}},
        {"fieldName": "x", "dataType": "Int32", **extra},
    ]
    return {"schema": {"fields": fields}}


def test_rest_default_values_and_nullable_reach_the_schema():
    proto = full_schema(rest_body(defaultValue=7, nullable=True), "c")
    schema = convert.schema_from_proto(proto.SerializeToString(), "c")
    assert schema.field("x").default_value == 7 and schema.field("x").nullable
    with pytest.raises(MilvusError, match="bad defaultValue"):
        full_schema(rest_body(defaultValue="seven"), "c")
