"""Protobuf <-> Vectide translation at the proxy's edge."""

from dataclasses import replace

import numpy as np
import pytest
from pymilvus.grpc_gen import common_pb2, schema_pb2

from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.schema import DYNAMIC_FIELD, CollectionSchema, FieldSchema
from vectide.services.proxy import convert


def proto_schema(**overrides) -> bytes:
    schema = schema_pb2.CollectionSchema(name="c", enable_dynamic_field=True)
    schema.fields.add(name="id", data_type=DataType.INT64, is_primary_key=True, autoID=True)
    vec = schema.fields.add(name="v", data_type=DataType.FLOAT_VECTOR)
    vec.type_params.add(key="dim", value=str(overrides.get("dim", 4)))
    title = schema.fields.add(name="t", data_type=DataType.VARCHAR)
    title.type_params.add(key="max_length", value="8")
    return schema.SerializeToString()


def test_schema_gets_field_ids_and_a_hidden_dynamic_field():
    schema = convert.schema_from_proto(proto_schema(), "c")
    assert [f.field_id for f in schema.fields] == [100, 101, 102, 103]
    assert schema.dynamic_field.name == DYNAMIC_FIELD and schema.primary.auto_id
    back = convert.schema_to_proto(schema)
    assert [f.name for f in back.fields] == ["id", "v", "t"]  # $meta stays hidden


@pytest.mark.parametrize("dim", [0, -3])  # the upper bound: quota.max_dim (test_limits.py)
def test_bad_dimension_is_an_illegal_schema(dim):
    with pytest.raises(MilvusError) as bad:
        convert.schema_from_proto(proto_schema(dim=dim), "c")
    assert bad.value.code == Code.COLLECTION_ILLEGAL_SCHEMA


def with_keys(*specs) -> bytes:
    """The base schema plus Int64/VarChar fields flagged as partition keys: (name, type, pk)."""
    schema = schema_pb2.CollectionSchema.FromString(proto_schema())
    for name, data_type, primary in specs:
        field = schema.fields.add(name=name, data_type=data_type, is_partition_key=True)
        field.is_primary_key = primary
        if data_type == DataType.VARCHAR:
            field.type_params.add(key="max_length", value="8")
    return schema.SerializeToString()


def test_a_partition_key_round_trips():
    schema = convert.schema_from_proto(with_keys(("k", DataType.VARCHAR, False)), "c")
    assert [f.name for f in schema.fields if f.is_partition_key] == ["k"]
    back = convert.schema_to_proto(schema)
    assert [f.name for f in back.fields if f.is_partition_key] == ["k"]


@pytest.mark.parametrize(
    "keys",
    [
        [("a", DataType.INT64, False), ("b", DataType.INT64, False)],  # two keys
        [("f", DataType.FLOAT, False)],  # not Int64/VarChar
    ],
)
def test_bad_partition_keys_are_an_illegal_schema(keys):
    with pytest.raises(MilvusError) as bad:
        convert.schema_from_proto(with_keys(*keys), "c")
    assert bad.value.code == Code.COLLECTION_ILLEGAL_SCHEMA


def test_packed_vectors_round_trip_without_loss():
    schema = convert.schema_from_proto(proto_schema(dim=3), "c")
    vectors = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    fd = convert.field_data(schema.field("v"), vectors)
    columns = convert.columns_from_fields_data(schema, [fd], 5)
    np.testing.assert_array_equal(columns["v"].data, vectors)


def test_a_row_count_no_column_bears_out_is_refused():
    schema = convert.schema_from_proto(proto_schema(), "c")
    with pytest.raises(MilvusError, match="no field data for the request's 4294967295 rows"):
        convert.columns_from_fields_data(schema, [], 2**32 - 1)
    fd = convert.field_data(schema.field("t"), ["a", "b"])
    with pytest.raises(MilvusError, match="2 values for 4294967295 rows"):
        convert.columns_from_fields_data(schema, [fd], 2**32 - 1)


def test_varchar_longer_than_max_length_is_refused():
    schema = convert.schema_from_proto(proto_schema(), "c")
    fd = convert.field_data(schema.field("t"), ["short", "much too long"])
    with pytest.raises(MilvusError, match="exceeds max_length 8"):
        convert.columns_from_fields_data(schema, [fd], 2)


def test_query_vectors_must_match_the_dimension():
    group = common_pb2.PlaceholderGroup()
    group.placeholders.add(
        tag="$0", type=common_pb2.PlaceholderType.FloatVector, values=[np.ones(3, "<f4").tobytes()]
    )
    field = FieldSchema(101, "v", DataType.FLOAT_VECTOR, dim=3)
    schema = CollectionSchema("c", [field])
    assert convert.read_vectors(group.SerializeToString(), field, schema).shape == (1, 3)
    with pytest.raises(MilvusError, match="dim"):
        convert.read_vectors(group.SerializeToString(), replace(field, dim=4), schema)


def test_error_status_carries_both_codes():
    status = convert.error_status(MilvusError(Code.COLLECTION_NOT_FOUND, "gone"))
    assert (status.code, status.error_code, status.reason) == (100, 4, "gone")
    crash = convert.error_status(RuntimeError("boom"))
    assert crash.error_code == common_pb2.UnexpectedError and "boom" in crash.reason
