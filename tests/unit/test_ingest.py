"""The ingest role's pure parts: record decoding, batching into ordered writes, progress."""

from __future__ import annotations

import io
import json
import re
import struct

import fastavro
import numpy as np
import orjson
import pytest
import simdjson

from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.kv.memory import MemoryKV
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.schema import (
    CollectionInfo,
    CollectionSchema,
    ConsistencyLevel,
    FieldSchema,
)
from vectide.services.ingest.batcher import Backpressure, BatchApplier, KafkaRecord
from vectide.services.ingest.decode import (
    RecordDecoder,
    RecordError,
    Tombstone,
    Upsert,
    avro_schema,
)
from vectide.services.ingest.mapping import IngestMapping, MappingError, MappingStore, Progress

DIM = 4


def schema(pk_type: DataType = DataType.INT64, auto_id: bool = False, dynamic: bool = False):
    fields = [
        FieldSchema(100, "id", pk_type, is_primary=True, auto_id=auto_id, max_length=16),
        FieldSchema(101, "vec", DataType.FLOAT_VECTOR, dim=DIM),
        FieldSchema(102, "title", DataType.VARCHAR, max_length=8),
        FieldSchema(103, "n", DataType.INT32),
    ]
    if dynamic:
        fields.append(FieldSchema(104, "$meta", DataType.JSON, is_dynamic=True))
    return CollectionSchema("docs", fields, enable_dynamic_field=dynamic)


def avro_record(name: str, **types) -> dict:
    """An Avro record schema: its fields' names and types, in order."""
    return {
        "type": "record",
        "name": name,
        "fields": [{"name": k, "type": t} for k, t in types.items()],
    }


def avro_array(items) -> dict:
    return {"type": "array", "items": items}


def row(pk=None, **over):
    value = {"vec": [0.5] * DIM, "title": "t", "n": 1, **over}
    if pk is not None:
        value["id"] = pk
    return orjson.dumps(value)


# -- decoding ----------------------------------------------------------------------------------


def test_json_rows_take_the_key_as_primary_key_when_the_value_has_none():
    decoder = RecordDecoder(schema())
    got = decoder.decode(b"42", row())
    assert isinstance(got, Upsert) and got.pk == 42
    assert got.values["vec"].dtype == np.float32 and got.values["title"] == "t"
    assert decoder.decode(b"1", row(pk=7)).pk == 7  # the value wins over the key
    assert decoder.decode(b"9", None) == Tombstone(9)


def test_a_batch_converts_its_vectors_together_and_fails_only_the_bad_ones():
    decoder = RecordDecoder(schema())
    records = [
        (b"1", row(vec=[0.1, 0.2, 0.3, 0.4])),
        (b"2", row(vec=[1.0, "x", 2.0, 3.0])),
        (b"3", row(vec=[1e39, 0.0, 0.0, 0.0])),  # beyond float32: not a finite number
        (b"4", None),
        (b"5", row(vec=[1.0] * 3)),
        (b"6", row(vec=[4, 3, 2, 1])),
    ]
    got = decoder.decode_all(records)
    assert [type(g).__name__ for g in got] == [
        "Upsert", "RecordError", "RecordError", "Tombstone", "RecordError", "Upsert"
    ]  # fmt: skip
    assert "non-numbers" in str(got[1]) and "finite" in str(got[2])
    np.testing.assert_array_equal(got[0].values["vec"], np.float32([0.1, 0.2, 0.3, 0.4]))
    assert got[5].values["vec"].dtype == np.float32 and got[5].values["vec"].tolist() == [
        4,
        3,
        2,
        1,
    ]
    # all good: one matrix, rows in record order
    good = decoder.decode_all([(b"7", row(vec=[7.0] * DIM)), (b"8", row(vec=[8.0] * DIM))])
    assert [g.values["vec"][0] for g in good] == [7.0, 8.0]


def test_the_fast_json_path_reads_exactly_what_the_general_parser_reads(monkeypatch):
    """Records the vector fast path (simdjson, floats straight into a buffer) takes or
    leaves to orjson: with the fast path turned off each decodes to the same row or the
    same error."""
    decoder = RecordDecoder(schema(dynamic=True))
    values = [
        row(vec=[0.25, 1, -2.5e-3, 3]),  # integers among floats
        row(vec=[[1.0], 2.0, 3.0, 4.0]),  # nested: simdjson would flatten it
        row(vec=[1.0, None, 2.0, 3.0]),
        row(vec=[True, 1.0, 2.0, 3.0]),
        row(vec=[1e39, 0.0, 0.0, 0.0]),
        row(vec=[1.0] * 5),
        row(title="[x", n=2),  # a bracket inside a string
        row(color={"deep": {"er": [1, 2]}}),  # an array elsewhere
        row(color={"deep": None}),
        b'{"vec": [1, 2, 3, 4], "title": "a", "n": 1, "n": 2}',  # a repeated key: the last
        rb'{"vec": [1, 2, 3, 4], "title": "\u00e9\u4e2d", "n": 1}',
        b'{"vec": [1e400, 2, 3, 4], "title": "a", "n": 1}',
        b'{"vec": [1, 2, 3, 4], "title": "\xff", "n": 1}',
        b'{"vec": [1, 2, 3, 4]}}',
        b"[1, 2, 3, 4]",
    ]
    records = [(b"5", v) for v in values]
    parser = simdjson.Parser()
    taken = [decoder._json_vectors(parser, v) is not None for v in values]
    expected = [True, False, False, False, True, True, False, False, True, False, True]
    assert taken == expected + [False] * 4

    def described(decoded):
        if isinstance(decoded, RecordError):
            return ("error", str(decoded))
        values = {
            k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in decoded.values.items()
        }
        return (decoded.pk, values)

    fast = [described(d) for d in decoder.decode_all(records)]
    monkeypatch.setattr(RecordDecoder, "_json_vectors", lambda self, parser, value: None)
    general = [described(d) for d in decoder.decode_all(records)]
    assert fast == general
    assert fast[0][1]["vec"] == [0.25, 1.0, np.float32(-2.5e-3), 3.0]
    assert fast[9][1]["n"] == 2
    assert [f[0] for f in fast].count("error") == 8


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (b"1", b"{not json", "not valid JSON"),
        (b"1", b"[1, 2]", "must be a JSON object"),
        (b"1", row(vec=[1.0] * 3), "dimension 3, expected 4"),
        (b"1", row(vec=["a"] * DIM), "non-numbers"),
        (b"1", orjson.dumps({"title": "t", "n": 1}), "'vec' is missing"),
        (b"1", row(n="x"), "expected an integer"),
        (b"1", row(n=2**40), "out of range for INT32"),
        (b"1", row(title="much too long"), "exceeds max_length 8"),
        (b"1", row(extra=1), "'extra' is not in collection"),
        (None, row(), "neither the value nor the key"),
        (b"abc", row(), "not an integer primary key"),
        (None, None, "needs a key"),
    ],
)
def test_bad_records_say_why(key, value, reason):
    with pytest.raises(RecordError, match=reason):
        RecordDecoder(schema()).decode(key, value)


def test_dynamic_fields_and_varchar_keys():
    decoder = RecordDecoder(schema(DataType.VARCHAR, dynamic=True))
    got = decoder.decode(b"doc-1", row(color="red"))
    assert got.pk == "doc-1" and json.loads(got.values["$meta"]) == {"color": "red"}


def test_plain_avro_written_with_the_derived_schema():
    derived = avro_schema(schema())
    assert [f["name"] for f in derived["fields"]] == ["id", "vec", "title", "n"]
    out = io.BytesIO()
    fastavro.schemaless_writer(
        out, fastavro.parse_schema(derived), {"id": None, "vec": [1.0] * DIM, "title": "a", "n": 3}
    )
    got = RecordDecoder(schema(), "avro").decode(b"5", out.getvalue())
    assert got.pk == 5 and got.values["n"] == 3
    with pytest.raises(RecordError, match="not Avro"):
        RecordDecoder(schema(), "avro").decode(b"5", b"\xff\xff")


def test_confluent_wire_format_resolves_the_writer_schema_by_id():
    writer = fastavro.parse_schema(
        avro_record("Doc", id="long", vec=avro_array("float"), title="string", n="int")
    )
    out = io.BytesIO()
    fastavro.schemaless_writer(out, writer, {"id": 8, "vec": [2.0] * DIM, "title": "b", "n": 1})
    framed = b"\x00" + struct.pack(">I", 17) + out.getvalue()
    decoder = RecordDecoder(schema(), "avro", registry={17: writer}.__getitem__)
    assert decoder.decode(None, framed).pk == 8
    with pytest.raises(RecordError, match="schema id 18 not resolved"):
        decoder.decode(None, b"\x00" + struct.pack(">I", 18) + out.getvalue())
    with pytest.raises(RecordError, match="Confluent wire format"):
        decoder.decode(None, out.getvalue())


# -- batching ----------------------------------------------------------------------------------


class FakeProxy:
    """The proxy's write path on a dict, refusing what the real one refuses."""

    def __init__(self, collection_schema: CollectionSchema | None) -> None:
        self.schema = collection_schema
        self.rows: dict[object, float] = {}
        self.calls: list[str] = []
        self.down = False

    def describe_collection(self, name):
        if self.schema is None:
            raise MilvusError(Code.COLLECTION_NOT_FOUND, f"can't find collection {name}")
        return CollectionInfo(1, name, self.schema, 1, [], [], ConsistencyLevel.BOUNDED, 0)

    def upsert(self, collection, partition, columns, num_rows):
        if self.down:
            raise MilvusError(Code.SERVICE_UNAVAILABLE, "proxy down")
        pks = list(columns["id"].data)
        assert len(set(pks)) == len(pks), "one upsert never carries a key twice"
        if any(t == "REFUSE" for t in columns["title"].data):
            raise MilvusError(Code.PARAMETER_INVALID, "title REFUSE is refused")
        self.calls.append(f"upsert {len(pks)}")
        for pk, vec in zip(pks, columns["vec"].data, strict=True):
            self.rows[int(pk)] = float(vec[0])

    def delete_pks(self, collection, partition, pks):
        self.calls.append(f"delete {len(pks)}")
        for pk in pks:
            self.rows.pop(int(pk), None)


def rec(offset, key, value, partition=0):
    return KafkaRecord("t", partition, offset, key, value)


def test_order_is_kept_across_tombstones_and_the_last_write_of_a_key_wins():
    proxy = FakeProxy(schema())
    records = [
        rec(0, b"1", row(vec=[1.0] * DIM)),
        rec(1, b"1", row(vec=[2.0] * DIM)),
        rec(2, b"2", row()),
        rec(3, b"1", None),
        rec(4, b"2", None),
        rec(5, b"2", row(vec=[3.0] * DIM)),
        rec(6, b"bad", b"{"),
    ]
    outcome = BatchApplier(proxy, "docs").apply(records)
    assert proxy.rows == {2: 3.0}
    assert proxy.calls == ["upsert 2", "delete 2", "upsert 1"]
    assert outcome.next_offsets == {("t", 0): 7}
    assert outcome.applied == {("t", 0): 6} and outcome.failed == {("t", 0): 1}
    assert [d.record.offset for d in outcome.dead] == [6]


def test_a_refused_batch_is_split_so_only_the_refused_record_is_dead():
    proxy = FakeProxy(schema())
    records = [rec(i, str(i).encode(), row(title="REFUSE" if i == 3 else "ok")) for i in range(6)]
    outcome = BatchApplier(proxy, "docs").apply(records)
    assert sorted(proxy.rows) == [0, 1, 2, 4, 5]
    (dead,) = outcome.dead
    assert dead.record.offset == 3 and "title REFUSE is refused" in dead.error
    headers = dict(dead.headers())
    assert headers["source.topic"] == b"t" and headers["source.offset"] == b"3"
    assert headers["source.partition"] == b"0" and headers["error"].startswith(b"refused")


def test_nullable_and_defaulted_fields_may_be_null_or_left_out():
    fields = [
        *schema().fields,
        FieldSchema(105, "maybe", DataType.INT64, nullable=True),
        FieldSchema(106, "tag", DataType.VARCHAR, max_length=8, default_value="none"),
    ]
    nullable_schema = CollectionSchema("docs", fields)
    proxy = FakeProxy(nullable_schema)
    seen = {}
    proxy.upsert = lambda collection, partition, columns, num_rows: seen.update(columns)
    records = [
        rec(0, b"1", row(maybe=5, tag="a")),
        rec(1, b"2", row(maybe=None, tag=None)),
        rec(2, b"3", row()),  # both left out
    ]
    outcome = BatchApplier(proxy, "docs").apply(records)
    assert not outcome.dead
    assert seen["maybe"].data.tolist()[0] == 5 and seen["maybe"].valid.tolist() == [
        True,
        False,
        False,
    ]
    assert seen["tag"].data == ["a", "none", "none"] and seen["tag"].valid is None  # defaults
    plain = avro_schema(nullable_schema)["fields"]
    assert {f["name"]: f["type"] for f in plain}["maybe"] == ["null", "long"]
    with pytest.raises(RecordError, match="'n' is null"):
        RecordDecoder(nullable_schema).decode(b"4", orjson.dumps({**json.loads(row()), "n": None}))


def test_missing_collection_dead_letters_and_proxy_outage_pushes_back():
    outcome = BatchApplier(FakeProxy(None), "gone").apply([rec(0, b"1", row())])
    assert "collection 'gone' does not exist" in outcome.dead[0].error
    proxy = FakeProxy(schema())
    proxy.down = True
    with pytest.raises(Backpressure):
        BatchApplier(proxy, "docs").apply([rec(0, b"1", row())])


# -- mappings and progress ---------------------------------------------------------------------


def test_mappings_validate_and_progress_is_fenced():
    store = MappingStore(MemoryKV())
    store.add(IngestMapping("m1", "orders", "docs"))
    with pytest.raises(MappingError, match="exists"):
        store.add(IngestMapping("m1", "orders", "docs"))
    with pytest.raises(MappingError, match="format"):
        store.add(IngestMapping("m2", "orders", "docs", format="xml"))
    with pytest.raises(MappingError, match="name"):
        store.add(IngestMapping("bad/name", "orders", "docs"))
    assert [m.dlq_topic for m in store.list()] == ["orders.dlq"]

    raw = store.save_progress("m1", {("orders", 0): (None, Progress(10, 9, 1, 10))})
    assert raw is not None
    # a worker that still believes the partition is fresh is fenced
    assert store.save_progress("m1", {("orders", 0): (None, Progress(5, 5, 0, 5))}) is None
    (stats,) = store.stats(lambda topic: {0: 25, 1: 3})
    assert stats.to_dict()["lag"] == 15 + 3
    assert stats.to_dict()["applied"] == 9 and stats.to_dict()["failed"] == 1
    assert store.remove("m1") and store.list() == []
    assert store.progress_raw("m1", "orders", 0) is None


# -- every field type ----------------------------------------------------------------------------


def typed_schema() -> CollectionSchema:
    """A field of every type the gRPC path takes, vectors of each kind and ARRAY fields."""
    fields = [
        FieldSchema(100, "id", DataType.INT64, is_primary=True),
        FieldSchema(101, "fv", DataType.FLOAT_VECTOR, dim=DIM),
        FieldSchema(102, "f16", DataType.FLOAT16_VECTOR, dim=DIM),
        FieldSchema(103, "bf16", DataType.BFLOAT16_VECTOR, dim=DIM),
        FieldSchema(104, "bin", DataType.BINARY_VECTOR, dim=16),
        FieldSchema(105, "sp", DataType.SPARSE_FLOAT_VECTOR),
        FieldSchema(106, "nums", DataType.ARRAY, element_type=DataType.INT32, max_capacity=3),
        FieldSchema(
            107,
            "tags",
            DataType.ARRAY,
            element_type=DataType.VARCHAR,
            max_capacity=2,
            max_length=5,
        ),
        FieldSchema(108, "meta", DataType.JSON),
        FieldSchema(
            109,
            "maybe",
            DataType.ARRAY,
            element_type=DataType.DOUBLE,
            max_capacity=2,
            nullable=True,
        ),
        FieldSchema(110, "geo", DataType.GEOMETRY),
        FieldSchema(111, "i8", DataType.INT8_VECTOR, dim=DIM),
        FieldSchema(112, "when", DataType.TIMESTAMPTZ, nullable=True),
    ]
    return CollectionSchema("typed", fields)


def typed_row(**over) -> dict:
    return {
        "fv": [0.5] * DIM,
        "f16": [0.1, -2.0, 3.5, 65504.0],
        "bf16": [0.1, -2.0, 3.5, 1e30],
        "bin": [255, 1],
        "sp": {"3": 0.5, "1": 1.5},
        "nums": [1, -2, 3],
        "tags": ["a", "bb"],
        "meta": {"k": [1, 2]},
        "geo": "point(1  2)",
        "i8": [1, -2, 127, -128],
        "when": "2025-01-01 08:00:00",  # no offset: the collection's zone (UTC here)
        **over,
    }


class CapturingProxy(FakeProxy):
    """Keeps the columns of every upsert."""

    def __init__(self, collection_schema):
        super().__init__(collection_schema)
        self.columns: list[dict] = []

    def upsert(self, collection, partition, columns, num_rows):
        self.columns.append(columns)


def typed_columns(values: list[bytes], fmt: str = "json", registry=None):
    proxy = CapturingProxy(typed_schema())
    records = [rec(i, str(i).encode(), v) for i, v in enumerate(values)]
    outcome = BatchApplier(proxy, "typed", fmt=fmt, registry=registry).apply(records)
    return outcome, (proxy.columns[0] if proxy.columns else None)


def check_typed_columns(columns: dict) -> None:
    """Two rows of typed_row() in the stored form of each type."""
    from vectide.services.common import vector_types

    f16 = columns["f16"].data
    assert f16.dtype == np.dtype("<f2") and f16.shape == (2, DIM)
    assert f16[0].tolist() == np.float16([0.1, -2.0, 3.5, 65504.0]).tolist()
    bf16 = columns["bf16"].data
    assert bf16.dtype == np.dtype("<u2")
    expected = vector_types.bfloat16_bits(np.float32([0.1, -2.0, 3.5, 1e30]))
    assert bf16[0].tolist() == expected.tolist()
    assert columns["bin"].data.dtype == np.uint8 and columns["bin"].data[0].tolist() == [255, 1]
    assert columns["sp"].data[0] == vector_types.sparse_row({1: 1.5, 3: 0.5})
    assert json.loads(columns["nums"].data[0]) == [1, -2, 3]
    assert json.loads(columns["tags"].data[0]) == ["a", "bb"]
    assert json.loads(columns["meta"].data[0]) == {"k": [1, 2]}
    assert columns["maybe"].valid.tolist() == [False, True]
    assert json.loads(columns["maybe"].data[1]) == [1.0, 2.5]
    assert columns["geo"].data[0] == "POINT (1 2)"  # WKT as stored, whatever the spacing
    i8 = columns["i8"].data
    assert i8.dtype == np.int8 and i8.shape == (2, DIM) and i8[0].tolist() == [1, -2, 127, -128]
    assert columns["when"].data[0] == 1735718400 * 10**6  # 2025-01-01T08:00:00Z


def test_json_values_of_every_type_become_their_stored_columns():
    second = typed_row(
        bin="/wE=",  # base64 of [255, 1], as Milvus's REST takes it
        bf16=[0.1, -2.0, 3.5, 1e30],
        sp={"indices": [1, 3], "values": [1.5, 0.5]},
        maybe=[1, 2.5],
    )
    outcome, columns = typed_columns([orjson.dumps(typed_row()), orjson.dumps(second)])
    assert not outcome.dead, outcome.dead[0].error
    check_typed_columns(columns)
    assert columns["sp"].data[0] == columns["sp"].data[1]


@pytest.mark.parametrize(
    ("over", "reason"),
    [
        ({"f16": [1.0] * 3}, "'f16': dimension 3, expected 4"),
        ({"f16": [1e6, 0, 0, 0]}, "'f16': the vector must be finite"),  # beyond float16
        ({"bf16": ["a", 0, 0, 0]}, "'bf16': the vector holds non-numbers"),
        ({"bf16": "AAAA"}, "'bf16': vector of 3 bytes, expected 8"),
        ({"bin": [255, 1, 0]}, "'bin': vector of 3 bytes, expected 2"),
        ({"bin": [256, 1]}, "'bin': a binary vector must be an array of byte values"),
        ({"bin": "not base64!"}, "'bin': a vector given as text must be base64"),
        ({"sp": [1, 2]}, "'sp': a sparse vector must be an object"),
        ({"sp": {"-1": 0.5}}, "'sp': sparse vector indices must be integers in"),
        ({"sp": {"indices": [1, 2], "values": [0.5]}}, "'sp': .* arrays of one length"),
        ({"sp": {"indices": [1, 1], "values": [0.5, 1]}}, "'sp': sparse vector indices must be"),
        ({"sp": {"1": "x"}}, "'sp': a sparse vector must be an object of index: number"),
        ({"nums": [1, 2, 3, 4]}, "'nums': array length 4 exceeds max_capacity 3"),
        ({"nums": [1, "2"]}, "'nums': array elements must be INT32"),
        ({"nums": [2**31]}, "'nums': array element out of range for INT32"),
        ({"nums": 5}, "'nums': expected an array"),
        ({"tags": ["toolong"]}, "'tags': array element length 7 exceeds max_length 5"),
        ({"maybe": [True]}, "'maybe': array elements must be DOUBLE"),
        ({"fv": None}, "'fv' is null"),
        ({"geo": "POLYGON ((0 0, 1 1))"}, "'geo': invalid WKT"),
        ({"geo": [1, 2]}, "'geo': expected WKT text"),
        ({"i8": [1, 2, 3, 128]}, r"'i8': an int8 vector must be an array of integers"),
        ({"i8": [1, 2, 3]}, "'i8': vector of 3 bytes, expected 4"),
        ({"when": "soon"}, "'when': invalid timestamp string"),
        ({"when": "2025-01-01T00:00:00+15:00"}, "'when': UTC offset hour 15"),
        ({"when": 1735718400}, "'when': expected ISO 8601 text"),
    ],
)
def test_bad_typed_json_values_are_dead_lettered_with_the_reason(over, reason):
    outcome, columns = typed_columns([orjson.dumps(typed_row()), orjson.dumps(typed_row(**over))])
    (dead,) = outcome.dead
    assert dead.record.offset == 1
    assert re.search(reason, dead.error), dead.error
    assert len(columns["fv"]) == 1  # the good record still went through


def test_plain_avro_of_every_type_with_the_derived_schema():
    derived = avro_schema(typed_schema())
    types = {f["name"]: f["type"] for f in derived["fields"]}
    assert types["f16"] == types["bf16"] == {"type": "array", "items": "float"}
    assert types["bin"] == "bytes"
    assert types["sp"] == {"type": "map", "values": "float"}
    assert types["nums"] == {"type": "array", "items": "int"}
    assert types["tags"] == {"type": "array", "items": "string"}
    assert types["maybe"] == ["null", {"type": "array", "items": "double"}]
    assert types["meta"] == types["geo"] == "string"
    parsed = fastavro.parse_schema(derived)

    def avro(row: dict) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, {"id": None, "maybe": None, **row})
        return out.getvalue()

    first = typed_row(bin=b"\xff\x01", meta='{"k": [1, 2]}')
    second = {**first, "maybe": [1.0, 2.5]}
    outcome, columns = typed_columns([avro(first), avro(second)], fmt="avro")
    assert not outcome.dead, outcome.dead[0].error
    check_typed_columns(columns)
    outcome, _ = typed_columns([avro(typed_row(bin=b"\xff", meta="{}"))], fmt="avro")
    assert "'bin': vector of 1 bytes, expected 2" in outcome.dead[0].error


def test_registry_writers_may_send_half_floats_as_bytes_and_sparse_as_indices_and_values():
    sparse = avro_record("Sparse", indices=avro_array("long"), values=avro_array("float"))
    writer = fastavro.parse_schema(
        avro_record(
            "Typed",
            id="long",
            fv="bytes",
            f16="bytes",
            bf16=avro_array("double"),
            bin="bytes",
            sp=sparse,
            nums=avro_array("int"),
            tags=avro_array("string"),
            meta="string",
            maybe=["null", avro_array("double")],
            geo="string",
            i8=avro_array("int"),
            when=["null", "string"],
        )
    )
    values = []
    for pk, maybe in ((1, None), (2, [1.0, 2.5])):
        row = typed_row(
            id=pk,
            fv=np.float32([0.5] * DIM).tobytes(),
            f16=np.float16([0.1, -2.0, 3.5, 65504.0]).tobytes(),
            bin=b"\xff\x01",
            sp={"indices": [3, 1], "values": [0.5, 1.5]},
            meta='{"k": [1, 2]}',
            maybe=maybe,
        )
        out = io.BytesIO()
        fastavro.schemaless_writer(out, writer, row)
        values.append(b"\x00" + struct.pack(">I", 3) + out.getvalue())
    outcome, columns = typed_columns(values, fmt="avro", registry={3: writer}.__getitem__)
    assert not outcome.dead, outcome.dead[0].error
    check_typed_columns(columns)


# -- the compiled Avro reader --------------------------------------------------------------------


def test_the_compiled_avro_reader_reads_what_fastavro_reads():
    from vectide.services.ingest.avro_reader import AvroError, compile_reader

    schema = fastavro.parse_schema(
        avro_record(
            "R",
            id=["null", "long"],
            vec=avro_array("float"),
            d=avro_array("double"),
            s="string",
            b="bytes",
            ok="boolean",
            f="float",
            x="double",
            m={"type": "map", "values": "float"},
            tags=avro_array("string"),
            rec=avro_record("In", n="int"),
        )
    )
    value = {
        "id": -(2**40),
        "vec": [0.5, -1.25, 3.0],
        "d": [0.1, 2.0],
        "s": "héllo",
        "b": b"\x00\xff",
        "ok": True,
        "f": 0.1,
        "x": -2.5,
        "m": {"3": 0.5},
        "tags": ["a", "b"],
        "rec": {"n": -7},
    }
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, value)
    raw = out.getvalue()
    read = compile_reader(schema, frozenset({"vec"}))
    got = read(raw)
    want = fastavro.schemaless_reader(io.BytesIO(raw), schema, None)
    assert isinstance(got["vec"], np.ndarray) and got["vec"].dtype == np.float32
    assert got["vec"].tolist() == want["vec"]
    assert got["d"] == want["d"] and isinstance(got["d"], list)  # not a vector field: a list
    assert {k: v for k, v in got.items() if k != "vec"} == {
        k: v for k, v in want.items() if k != "vec"
    }
    # blocks with a byte size (negative count), as Java's writers split long arrays
    blocked = b"\x00" + b"\x03" + b"\x10" + np.float32([1, 2]).tobytes() + b"\x00"
    array = avro_record("A", id=["null", "long"], vec=avro_array("float"))
    assert compile_reader(array, frozenset({"vec"}))(blocked)["vec"].tolist() == [1.0, 2.0]
    with pytest.raises(AvroError, match="left over"):
        read(raw + b"\x00")
    with pytest.raises(AvroError):
        read(raw[:-3])
    with pytest.raises(AvroError, match="union branch 5"):
        read(b"\x0a" + raw[1:])
    # outside the subset: None, and the decoder keeps fastavro
    enum = {"type": "enum", "name": "K", "symbols": ["A"]}
    timestamp = {"type": "long", "logicalType": "timestamp-millis"}
    for unsupported in (enum, timestamp):
        assert compile_reader(avro_record("U", u=unsupported)) is None


def test_writer_schemas_outside_the_compiled_subset_are_read_with_fastavro():
    """A ``fixed`` binary vector: fastavro reads the value, the same checks apply."""
    bits = {"type": "fixed", "name": "Bits", "size": 2}
    writer = fastavro.parse_schema(
        avro_record("Fixed", id="long", vec=avro_array("float"), bits=bits)
    )
    fields = [
        FieldSchema(100, "id", DataType.INT64, is_primary=True),
        FieldSchema(101, "vec", DataType.FLOAT_VECTOR, dim=DIM),
        FieldSchema(102, "bits", DataType.BINARY_VECTOR, dim=16),
    ]
    decoder = RecordDecoder(CollectionSchema("f", fields), "avro", registry={1: writer}.__getitem__)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, writer, {"id": 4, "vec": [1.0] * DIM, "bits": b"\x0f\xf0"})
    got = decoder.decode(None, b"\x00" + struct.pack(">I", 1) + out.getvalue())
    assert got.pk == 4 and got.values["bits"].tolist() == [15, 240]
    assert got.values["vec"].dtype == np.float32
    assert decoder._readers == {1: None}  # fastavro, not a compiled reader
