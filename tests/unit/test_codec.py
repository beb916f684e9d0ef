import io
import json

import avro.io
import avro.schema
import fastavro
import numpy as np
import pytest

from vectide.services.common.msgstream import codec
from vectide.services.common.msgstream.message import (
    CollectionDDLMsg,
    DataType,
    DDLOp,
    DeleteMsg,
    FieldColumn,
    InsertMsg,
    TimeTickMsg,
)


def insert_msg(pks=None, rows=4):
    rng = np.random.default_rng(1)
    pks = np.arange(100, 100 + rows, dtype=np.int64) if pks is None else pks
    return InsertMsg(
        msg_id=7,
        ts=(1_700_000_000_000 << 18) | 3,
        source_id=2,
        collection_id=11,
        partition_id=12,
        segment_id=13,
        shard="vectide-dml_0_11v0",
        pks=pks,
        row_ids=np.arange(rows, dtype=np.int64),
        timestamps=np.full(rows, 99, dtype=np.int64),
        fields=[
            FieldColumn(
                100, "vec", DataType.FLOAT_VECTOR, rng.random((rows, 8), dtype=np.float32), dim=8
            ),
            FieldColumn(101, "age", DataType.INT32, np.arange(rows, dtype=np.int32)),
            FieldColumn(102, "ok", DataType.BOOL, np.arange(rows) % 2 == 0),
            FieldColumn(103, "score", DataType.DOUBLE, np.linspace(0, 1, rows)),
            FieldColumn(104, "title", DataType.VARCHAR, [f"t{i}" for i in range(rows)]),
            FieldColumn(105, "meta", DataType.JSON, [json.dumps({"i": i}) for i in range(rows)]),
        ],
    )


def assert_columns_equal(a: FieldColumn, b: FieldColumn) -> None:
    assert (a.field_id, a.name, a.data_type, a.dim) == (b.field_id, b.name, b.data_type, b.dim)
    if isinstance(a.data, np.ndarray):
        np.testing.assert_array_equal(a.data, b.data)
        assert b.data.dtype == codec.FIXED_DTYPES[a.data_type]
    else:
        assert list(a.data) == list(b.data)


@pytest.mark.parametrize("pks", [None, ["a", "b", "é", ""]])
def test_insert_round_trip(pks):
    msg = insert_msg(pks)
    back = codec.decode(codec.encode(msg))
    assert isinstance(back, InsertMsg)
    assert (back.msg_id, back.ts, back.segment_id, back.shard) == (
        msg.msg_id,
        msg.ts,
        msg.segment_id,
        msg.shard,
    )
    if pks is None:
        np.testing.assert_array_equal(back.pks, msg.pks)
    else:
        assert back.pks == pks
    np.testing.assert_array_equal(back.timestamps, msg.timestamps)
    for a, b in zip(msg.fields, back.fields, strict=True):
        assert_columns_equal(a, b)
    assert back.fields[0].data.shape == (4, 8)


def test_vectors_travel_as_float32_little_endian():
    msg = insert_msg(rows=2)
    raw = codec.encode(msg)
    assert msg.fields[0].data.astype("<f4").tobytes() in raw


def test_delete_tick_and_ddl_round_trip():
    delete = DeleteMsg(1, 50, 2, 11, -1, "s", ["x", "y"], np.array([50, 50], dtype=np.int64))
    back = codec.decode(codec.encode(delete))
    assert isinstance(back, DeleteMsg) and back.pks == ["x", "y"] and back.partition_id == -1
    assert codec.decode(codec.encode(TimeTickMsg(3, 99, 1))) == TimeTickMsg(3, 99, 1)
    ddl = CollectionDDLMsg(4, 60, 1, DDLOp.CREATE_PARTITION, 11, "c", 5, "p", b"\x01")
    assert codec.decode(codec.encode(ddl)) == ddl


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\xff\xff\xff", b"\x06" + b"\x00" * 3])
def test_garbage_raises_decode_error(raw):
    with pytest.raises(codec.DecodeError):
        codec.decode(raw)


def test_inconsistent_row_counts_are_rejected():
    msg = insert_msg()
    msg.timestamps = msg.timestamps[:2]
    with pytest.raises(codec.DecodeError, match="inconsistent row counts"):
        codec.decode(codec.encode(msg))


# -- the .avsc files as a published wire format, checked with the reference Avro library --


def avro_union() -> avro.schema.Schema:
    return avro.schema.parse(json.dumps(codec.message_schema_json()))


def test_every_schema_file_parses_with_the_avro_library():
    names = avro.schema.Names()
    for name in codec.SCHEMA_FILES:
        parsed = avro.schema.make_avsc_object(codec.load_schema_json(name), names)
        assert parsed.fullname == f"{codec.NAMESPACE}.{name}"
    assert {s.name for s in avro_union().schemas} == set(codec.MESSAGE_RECORDS)


def test_avro_library_reads_what_the_codec_writes():
    msg = insert_msg()
    reader = avro.io.DatumReader(avro_union())
    record = reader.read(avro.io.BinaryDecoder(io.BytesIO(codec.encode(msg))))
    assert record["num_rows"] == 4 and record["shard"] == msg.shard
    assert np.frombuffer(record["pks"]["int_ids"], "<i8").tolist() == msg.pks.tolist()
    assert record["fields"][4]["strings"] == msg.fields[4].data


def test_codec_reads_what_the_avro_library_writes():
    """An external producer in any language, writing the documented schema, is understood."""
    schema = avro_union()
    record = {
        "msg_id": 1,
        "ts": 500,
        "source_id": 9,
        "collection_id": 3,
        "partition_id": 4,
        "shard": "s",
        "num_rows": 2,
        "pks": {"int_ids": None, "str_ids": ["k1", "k2"]},
        "timestamps": np.array([500, 500], "<i8").tobytes(),
    }
    branch = [s.name for s in schema.schemas].index("Delete")
    buf = io.BytesIO()
    encoder = avro.io.BinaryEncoder(buf)
    encoder.write_long(branch)  # a union datum: the branch index, then the record
    avro.io.DatumWriter(schema.schemas[branch]).write(record, encoder)
    back = codec.decode(buf.getvalue())
    assert isinstance(back, DeleteMsg) and back.pks == ["k1", "k2"] and back.ts == 500


# -- fixed-width inserts and deletes: written and read without fastavro, the same bytes --


def fastavro_bytes(msg) -> bytes:
    name, record = codec._to_record(msg)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, codec.message_schema(), (f"{codec.NAMESPACE}.{name}", record))
    return buf.getvalue()


def fixed_insert(rows: int, columns: int) -> InsertMsg:
    rng = np.random.default_rng(rows)
    fields = [
        FieldColumn(100, "vec", DataType.FLOAT_VECTOR, rng.random((rows, 16), np.float32), 16),
        FieldColumn(
            101, "n", DataType.INT32, np.arange(rows, dtype=np.int32), 0, np.arange(rows) % 3 == 0
        ),
        FieldColumn(
            102, "é", DataType.BINARY_VECTOR, rng.integers(0, 255, (rows, 2), np.uint8), 16
        ),
    ][:columns]
    pks = np.arange(rows, dtype=np.int64) - 3  # negative keys: zigzag in the length prefixes
    return InsertMsg(
        2**45 + 7, (1 << 60) + 3, 1, -5, 2**40, 123, "ch_0v1", pks,
        np.zeros(rows, np.int64), np.full(rows, 77, np.int64), fields,
    )  # fmt: skip


@pytest.mark.parametrize("rows", [0, 1, 1000])
@pytest.mark.parametrize("columns", [0, 1, 3])
def test_fixed_width_inserts_are_the_bytes_fastavro_writes(rows, columns):
    msg = fixed_insert(rows, columns)
    raw = codec.encode(msg)
    assert raw == fastavro_bytes(msg)
    back = codec.decode(raw)
    assert isinstance(back, InsertMsg) and (back.msg_id, back.ts, back.segment_id) == (
        msg.msg_id,
        msg.ts,
        msg.segment_id,
    )
    np.testing.assert_array_equal(back.pks, msg.pks)
    for a, b in zip(msg.fields, back.fields, strict=True):
        assert_columns_equal(a, b)
        assert (a.valid is None) == (b.valid is None)
    delete = DeleteMsg(1, 2, 3, 4, -1, "ch", msg.pks, np.full(rows, 5, np.int64))
    assert codec.encode(delete) == fastavro_bytes(delete)
    np.testing.assert_array_equal(codec.decode(codec.encode(delete)).pks, msg.pks)


def test_a_truncated_fixed_width_insert_is_a_decode_error():
    raw = codec.encode(fixed_insert(10, 2))
    for cut in (1, 20, len(raw) // 2, len(raw) - 1):
        with pytest.raises(codec.DecodeError):
            codec.decode(raw[:cut])


def test_decoded_columns_view_the_record_without_copies():
    raw = codec.encode(fixed_insert(100, 1))
    back = codec.decode(raw)
    assert not back.fields[0].data.flags.owndata and not back.fields[0].data.flags.writeable
