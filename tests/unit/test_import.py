"""Bulk import (Import / GetImportState / ListImportTasks, REST jobs/import) on the fault
harness: files in the in-memory object store, rows through the real proxy, query node and
coordinators."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pymilvus import DataType as PyDataType
from pymilvus import MilvusClient
from pymilvus.client.prepare import Prepare
from pymilvus.grpc_gen import common_pb2, milvus_pb2

from benchmarks.search_path import Context
from vectide.services.common.errors import Code
from vectide.services.common.import_job import ImportJob
from vectide.services.common.kv.memory import MemoryKV
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.rpc import codec
from vectide.services.common.rpc import types as rpc_types
from vectide.services.common.schema import CollectionSchema, ConsistencyLevel, FieldSchema
from vectide.services.datacoord.core import DataCoord
from vectide.services.proxy import import_files, imports
from vectide.services.proxy.dql import QuerySpec
from vectide.services.proxy.grpc_import import state_response
from vectide.services.proxy.grpc_service import MilvusService
from vectide.services.proxy.rest_import import describe_job
from vectide.services.testing import Harness


def rows(keys: range, dim: int = 4) -> list[dict]:
    return [{"id": k, "vec": [float(k)] * dim} for k in keys]


def parquet(records: list[dict]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(records), buf)
    return buf.getvalue()


@pytest.fixture
def h():
    h = Harness()
    h.create_collection("c")
    return h


def service_of(h: Harness) -> MilvusService:
    return MilvusService(h.proxy)


def submit(service: MilvusService, files: list[str], collection: str = "c", partition: str = ""):
    request = Prepare.do_bulk_insert(collection, partition, files)
    return service.Import(request, Context())


def run(
    h: Harness, service: MilvusService, files: list[str], **kw
) -> milvus_pb2.GetImportStateResponse:
    reply = submit(service, files, **kw)
    assert reply.status.code == 0, reply.status.reason
    assert h.proxy.importer.drain() == 1
    h.tick()
    h.pump()
    state = service.GetImportState(milvus_pb2.GetImportStateRequest(task=reply.tasks[0]), Context())
    assert state.status.code == 0
    return state


def infos(state) -> dict[str, str]:
    return {kv.key: kv.value for kv in state.infos}


@pytest.mark.parametrize("keep", [imports.KEEP_BYTES, 0], ids=["rows-kept", "read-twice"])
def test_parquet_json_and_json_lines_files_are_imported(h, monkeypatch, keep):
    monkeypatch.setattr(imports, "KEEP_BYTES", keep)
    service = service_of(h)
    h.store.objects["in/a.parquet"] = parquet(rows(range(0, 3000)))
    h.store.objects["in/b.json"] = orjson.dumps({"rows": rows(range(3000, 3010))})
    h.store.objects["in/c.jsonl"] = b"\n".join(orjson.dumps(r) for r in rows(range(3010, 3012)))
    h.store.objects["in/d.json"] = orjson.dumps(rows(range(3012, 3013)))  # a bare list
    files = ["in/a.parquet", "in/b.json", "in/c.jsonl", "in/d.json"]
    state = run(h, service, files)
    assert state.state == common_pb2.ImportCompleted
    assert state.row_count == 3013
    assert infos(state)["progress_percent"] == "100"
    assert infos(state)["file_rows"] == "3000,10,2,1"
    assert h.query_ids("c") == list(range(3013))
    assert h.search_ids("c", 5, limit=1) == [5]
    listed = service.ListImportTasks(
        milvus_pb2.ListImportTasksRequest(collection_name="c"), Context()
    )
    assert [t.id for t in listed.tasks] == [state.id]
    described = describe_job(state)
    assert described["state"] == "Completed" and described["totalRows"] == 3013
    assert described["details"][1] == {"fileName": "in/b.json", "totalRows": 10}


def test_a_bad_row_fails_the_job_before_any_row_is_written(h):
    service = service_of(h)
    h.store.objects["in/good.parquet"] = parquet(rows(range(0, 100)))
    bad = rows(range(100, 110))
    bad[7]["vec"] = [1.0, 2.0]
    h.store.objects["in/bad.json"] = orjson.dumps(bad)
    state = run(h, service, ["in/good.parquet", "in/bad.json"])
    assert state.state == common_pb2.ImportFailed
    reason = infos(state)["failed_reason"]
    assert "in/bad.json: row 7" in reason and "dimension 2, expected 4" in reason, reason
    assert state.row_count == 0
    assert h.query_ids("c") == []


def test_a_job_failing_midway_deletes_the_rows_it_inserted(h, monkeypatch):
    service = service_of(h)
    h.store.objects["in/a.parquet"] = parquet(rows(range(0, 5000)))  # three insert batches
    insert = h.proxy.insert
    calls = []

    def failing_insert(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise OSError("the broker went away")
        return insert(*args, **kwargs)

    monkeypatch.setattr(h.proxy, "insert", failing_insert)
    state = run(h, service, ["in/a.parquet"])
    assert state.state == common_pb2.ImportFailedAndCleaned
    assert "the broker went away" in infos(state)["failed_reason"]
    assert state.row_count == 4000
    assert h.query_ids("c") == []


def test_dynamic_fields_json_text_nullable_defaults_and_auto_id():
    h = Harness()
    schema = MilvusClient.create_schema(auto_id=True, enable_dynamic_field=True)
    schema.add_field("id", PyDataType.INT64, is_primary=True)
    schema.add_field("vec", PyDataType.FLOAT_VECTOR, dim=2)
    schema.add_field("meta", PyDataType.JSON)
    schema.add_field("score", PyDataType.FLOAT, nullable=True, default_value=0.5)
    service = service_of(h)
    create = Prepare.create_collection_request("docs", schema, consistency_level="Strong")
    assert service.CreateCollection(create, Context()).code == 0
    h.proxy.create_index("docs", "vec", "v", {"index_type": "FLAT", "metric_type": "L2"})
    h.proxy.load_collection("docs")
    h.tick()
    # as pymilvus's bulk writers write them: Parquet carries JSON and $meta as text
    records = [
        {"vec": [1.0, 2.0], "meta": '{"a": 1}', "score": None, "$meta": '{"color": "red"}'},
        {"vec": [3.0, 4.0], "meta": '{"a": 2}', "score": 2.0, "$meta": '{"color": "blue"}'},
    ]
    h.store.objects["in/p.parquet"] = parquet(records)
    h.store.objects["in/j.json"] = orjson.dumps(
        {"rows": [{"vec": [5.0, 6.0], "meta": {"a": 3}, "color": "green"}]}
    )
    state = run(h, service, ["in/p.parquet", "in/j.json"], collection="docs")
    assert state.state == common_pb2.ImportCompleted, infos(state)
    spec_rows = h.proxy.query(
        QuerySpec(
            collection_name="docs",
            expr="id > 0",
            output_fields=["meta", "score", "color"],
            use_default_consistency=False,
            consistency_level=ConsistencyLevel.STRONG,
        )
    )[1]
    assert len(spec_rows.pks) == 3 and len(set(spec_rows.pks.tolist())) == 3
    fields = {k: list(getattr(v, "data", v)) for k, v in spec_rows.fields.items()}
    dynamic = [json.loads(m) for m in fields["$meta"]]
    got = sorted(
        zip(
            [d["color"] for d in dynamic],
            [float(v) for v in fields["score"]],
            [json.loads(m)["a"] for m in fields["meta"]],
            strict=True,
        )
    )
    assert got == [("blue", 2.0, 2), ("green", 0.5, 3), ("red", 0.5, 1)]


@pytest.mark.parametrize(
    ("files", "partition", "code", "message"),
    [
        ([], "", Code.PARAMETER_INVALID, "import request is empty"),
        (["in/missing.parquet"], "", Code.PARAMETER_INVALID, "in/missing.parquet not found"),
        (["in/x.txt"], "", Code.PARAMETER_INVALID, "unsupported import file type"),
        (["in/a.parquet"], "nope", Code.PARTITION_NOT_FOUND, "nope"),
    ],
)
def test_requests_that_cannot_run_are_refused_at_once(h, files, partition, code, message):
    h.store.objects["in/a.parquet"] = parquet(rows(range(3)))
    reply = submit(service_of(h), files, partition=partition)
    assert reply.status.code == code, reply.status
    assert message in reply.status.reason
    assert h.proxy.importer.drain() == 0


def test_jobs_outlive_a_coordinator_restart(h):
    service = service_of(h)
    h.store.objects["in/a.json"] = orjson.dumps(rows(range(5)))
    state = run(h, service, ["in/a.json"])
    h.crash_coordinators()
    again = service.GetImportState(milvus_pb2.GetImportStateRequest(task=state.id), Context())
    assert (again.state, again.row_count) == (common_pb2.ImportCompleted, 5)
    missing = service.GetImportState(milvus_pb2.GetImportStateRequest(task=12345), Context())
    assert missing.status.code == Code.PARAMETER_INVALID


def test_text_values_of_parquet_files_are_parsed():
    schema_rows = [{"id": 1, "sp": '{"3": 0.5}', "$meta": '{"k": 1}'}]
    raw = parquet(schema_rows)
    schema = CollectionSchema(
        "s",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "sp", DataType.SPARSE_FLOAT_VECTOR),
            FieldSchema(102, "$meta", DataType.JSON, is_dynamic=True),
        ],
    )
    [batch] = list(import_files.row_batches({"x.parquet": raw}, schema))
    assert batch == [{"id": 1, "sp": {"3": 0.5}, "k": 1}]
    with pytest.raises(import_files.ImportFileError, match="not valid JSON"):
        list(import_files.row_batches({"x.json": b"{"}, schema))
    with pytest.raises(import_files.ImportFileError, match="not a Parquet file"):
        list(import_files.row_batches({"x.parquet": b"nope"}, schema))


def test_the_job_record_crosses_the_rpc_codec():
    assert "new_import" in rpc_types.DATACOORD_METHODS  # the proxies' datacoord client has it
    job = ImportJob(7, 1, "c", "default", "", ["a.json"], 3, file_rows=[4])
    assert codec.decode(codec.encode(job)) == job
    assert state_response(job).state == common_pb2.ImportPending


def test_a_job_whose_proxy_died_fails_instead_of_running_forever(h):
    service = service_of(h)
    h.store.objects["in/a.json"] = orjson.dumps(rows(range(5)))
    job = submit(service, ["in/a.json"]).tasks[0]  # queued on h.proxy, never run
    other = h.add_proxy()
    h.crash_proxy(h.proxy)
    state = MilvusService(other).GetImportState(
        milvus_pb2.GetImportStateRequest(task=job), Context()
    )
    assert state.state == common_pb2.ImportFailed
    assert "stopped after inserting 0 of its rows" in infos(state)["failed_reason"]


def test_a_coordinator_taking_over_fails_the_jobs_of_proxies_gone_meanwhile():
    kv, ids = MemoryKV(), iter(range(100, 200))
    first = DataCoord(kv, lambda: 1, lambda: next(ids))
    first.start()
    job = first.new_import(ImportJob(0, 1, "c", "default", "", ["a.json"], proxy_id=5))
    second = DataCoord(kv, lambda: 1, lambda: next(ids))
    second.proxies_changed([7])  # the session watch may fire before the records are loaded
    second.start()
    got = second.import_job(job.job_id)
    assert got is not None and got.state == "Failed" and "session 5" in got.reason
    second.save_import(replace(got, state="Completed"))  # the gone proxy's late word is ignored
    assert second.import_job(job.job_id).state == "Failed"


def npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def test_csv_files_and_numpy_file_sets_are_imported(h):
    service = service_of(h)
    lines = ["id;vec"] + [f"{k};[{k}, {k}, {k}, {k}]" for k in range(10)]
    h.store.objects["in/a.csv"] = "\n".join(lines).encode()
    h.store.objects["in/np/id.npy"] = npy(np.arange(10, 15))
    h.store.objects["in/np/vec.npy"] = npy(
        np.repeat(np.arange(10, 15, dtype=np.float32), 4).reshape(5, 4)
    )
    request = Prepare.do_bulk_insert(
        "c", "", ["in/a.csv", "in/np/id.npy", "in/np/vec.npy"], sep=";"
    )
    job = service.Import(request, Context()).tasks[0]
    assert h.proxy.importer.drain() == 1
    h.tick()
    h.pump()
    state = service.GetImportState(milvus_pb2.GetImportStateRequest(task=job), Context())
    assert state.state == common_pb2.ImportCompleted, infos(state)
    assert infos(state)["file_rows"] == "10,5,5" and infos(state)["total_rows"] == "15"
    assert h.query_ids("c") == list(range(15))
    assert h.search_ids("c", 12, limit=1) == [12]


def test_csv_values_are_read_by_their_fields_types():
    schema = CollectionSchema(
        "s",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "name", DataType.VARCHAR, max_length=10),
            FieldSchema(102, "score", DataType.DOUBLE, nullable=True),
            FieldSchema(103, "ok", DataType.BOOL),
            FieldSchema(104, "$meta", DataType.JSON, is_dynamic=True),
        ],
    )
    raw = b'id,name,score,ok,$meta\n7,0123,NULL,true,"{""k"": 1}"\n'
    [batch] = list(import_files.row_batches({"x.csv": raw}, schema, {"nullkey": "NULL"}))
    assert batch == [{"id": 7, "name": "0123", "score": None, "ok": True, "k": 1}]
    with pytest.raises(import_files.ImportFileError, match="row 0: score 'x' is not a number"):
        list(import_files.row_batches({"x.csv": b"id,score\n1,x\n"}, schema))
    with pytest.raises(import_files.ImportFileError, match="differ in length"):
        unit = {"a/id.npy": npy(np.arange(3)), "a/name.npy": npy(np.array(["a"]))}
        list(import_files.row_batches(unit, schema))
    assert import_files.units(["a.json", "n/id.npy", "b.csv", "n/v.npy"]) == [
        ["a.json"],
        ["b.csv"],
        ["n/id.npy", "n/v.npy"],
    ]


def test_a_job_whose_collection_was_dropped_before_it_ran_fails(h):
    service = service_of(h)
    h.store.objects["in/a.json"] = orjson.dumps(rows(range(5)))
    job = submit(service, ["in/a.json"]).tasks[0]
    h.proxy.drop_collection("c")
    assert h.proxy.importer.drain() == 1
    state = service.GetImportState(milvus_pb2.GetImportStateRequest(task=job), Context())
    assert state.state == common_pb2.ImportFailed
    assert "can't find collection" in infos(state)["failed_reason"]


def test_parquet_vectors_come_as_numpy_rows_and_float_arrays_as_lists():
    schema = CollectionSchema(
        "s",
        [
            FieldSchema(100, "id", DataType.INT64, is_primary=True),
            FieldSchema(101, "v", DataType.FLOAT_VECTOR, dim=2),
            FieldSchema(102, "a", DataType.ARRAY, element_type=DataType.FLOAT, max_capacity=4),
        ],
    )
    raw = parquet([{"id": 1, "v": [1.0, 2.0], "a": [0.5, 1.5]}])
    [[row]] = list(import_files.row_batches({"x.parquet": raw}, schema))
    assert isinstance(row["v"], np.ndarray) and row["v"].tolist() == [1.0, 2.0]
    assert row["a"] == [0.5, 1.5]


def _loaded(name: str, vector: str, *fields: tuple) -> tuple[Harness, MilvusService]:
    """A harness with collection ``name``: an int64 ``id``, ``fields`` (name, type, options)
    and a FLAT index on ``vector`` (on each of ``a,b``), loaded."""
    h = Harness()
    schema = MilvusClient.create_schema()
    schema.add_field("id", PyDataType.INT64, is_primary=True)
    for field, data_type, options in fields:
        schema.add_field(field, data_type, **options)
    service = service_of(h)
    create = Prepare.create_collection_request(name, schema, consistency_level="Strong")
    assert service.CreateCollection(create, Context()).code == 0
    for field in vector.split(","):
        h.proxy.create_index(name, field, field, {"index_type": "FLAT", "metric_type": "L2"})
    h.proxy.load_collection(name)
    h.tick()
    return h, service


def _rows_of(h: Harness, name: str, expr: str, field: str) -> dict[int, object]:
    spec = QuerySpec(
        collection_name=name,
        expr=expr,
        output_fields=[field],
        use_default_consistency=False,
        consistency_level=ConsistencyLevel.STRONG,
    )
    rows = h.proxy.query(spec)[1]
    values = rows.fields[field]
    values = values.tolist() if isinstance(values, np.ndarray) else list(values)
    return dict(zip(rows.pks.tolist(), values, strict=True))


def _failed_reason(h: Harness, service: MilvusService, collection: str, row: dict) -> str:
    """Import ``row`` alone (``in/bad.json``) into ``collection``: the job must fail; its
    reason."""
    h.store.objects["in/bad.json"] = orjson.dumps({"rows": [row]})
    state = run(h, service, ["in/bad.json"], collection=collection)
    assert state.state == common_pb2.ImportFailed
    return infos(state)["failed_reason"]


def test_geometry_rows_are_imported_normalized_and_bad_wkt_fails_the_job():
    h, service = _loaded(
        "geo",
        "vec",
        ("vec", PyDataType.FLOAT_VECTOR, {"dim": 2}),
        ("geo", PyDataType.GEOMETRY, {"nullable": True}),
    )
    records = [
        {"id": 1, "vec": [1.0, 2.0], "geo": "point(1  2)"},
        {"id": 2, "vec": [3.0, 4.0], "geo": None},
    ]
    h.store.objects["in/g.parquet"] = parquet(records)
    h.store.objects["in/g.json"] = orjson.dumps(
        {"rows": [{"id": 3, "vec": [5.0, 6.0], "geo": "POLYGON((0 0, 2 0, 2 2, 0 0))"}]}
    )
    state = run(h, service, ["in/g.parquet", "in/g.json"], collection="geo")
    assert state.state == common_pb2.ImportCompleted, infos(state)
    expr = "ST_INTERSECTS(geo, 'POINT (1 1)') or geo is null or id == 1"
    assert _rows_of(h, "geo", expr, "geo") == {
        1: "POINT (1 2)",
        2: None,
        3: "POLYGON ((0 0, 2 0, 2 2, 0 0))",
    }
    reason = _failed_reason(h, service, "geo", {"id": 4, "vec": [0.0, 0.0], "geo": "POINT (1)"})
    assert "in/bad.json: row 0" in reason and "'geo': invalid WKT" in reason, reason


def test_int8_vectors_are_imported_from_parquet_and_json():
    h, service = _loaded("i8", "v", ("v", PyDataType.INT8_VECTOR, {"dim": 3}))
    h.store.objects["in/i.parquet"] = parquet([{"id": 1, "v": [1, -2, 3]}])
    h.store.objects["in/i.json"] = orjson.dumps({"rows": [{"id": 2, "v": [127, -128, 0]}]})
    state = run(h, service, ["in/i.parquet", "in/i.json"], collection="i8")
    assert state.state == common_pb2.ImportCompleted, infos(state)
    assert _rows_of(h, "i8", "id > 0", "v") == {1: [1, -2, 3], 2: [127, -128, 0]}
    assert "[-128, 127]" in _failed_reason(h, service, "i8", {"id": 3, "v": [300, 0, 0]})


def test_timestamptz_rows_are_imported_as_instants_and_bad_text_fails_the_job():
    h, service = _loaded(
        "when",
        "vec",
        ("vec", PyDataType.FLOAT_VECTOR, {"dim": 2}),
        ("at", PyDataType.TIMESTAMPTZ, {"nullable": True}),
    )
    h.store.objects["in/t.parquet"] = parquet(
        [
            {"id": 1, "vec": [1.0, 2.0], "at": "2025-01-01T08:00:00+08:00"},
            {"id": 2, "vec": [3.0, 4.0], "at": None},
        ]
    )
    h.store.objects["in/t.json"] = orjson.dumps(
        {"rows": [{"id": 3, "vec": [5.0, 6.0], "at": "2025-01-01 00:00:00.25"}]}  # UTC's
    )
    state = run(h, service, ["in/t.parquet", "in/t.json"], collection="when")
    assert state.state == common_pb2.ImportCompleted, infos(state)
    midnight = 1735689600 * 10**6  # 2025-01-01T00:00:00Z
    assert _rows_of(h, "when", "id > 0", "at") == {1: midnight, 2: None, 3: midnight + 250_000}
    bad = {"id": 4, "vec": [0.0, 0.0], "at": "2025-13-01T00:00:00Z"}
    reason = _failed_reason(h, service, "when", bad)
    assert "in/bad.json: row 0" in reason and "'at': invalid timestamp string" in reason, reason


def test_rows_without_a_vector_are_imported_into_a_nullable_vector_field():
    h, service = _loaded(
        "nv",
        "vec,extra",
        ("vec", PyDataType.FLOAT_VECTOR, {"dim": 2}),
        ("extra", PyDataType.FLOAT_VECTOR, {"dim": 2, "nullable": True}),
    )
    h.store.objects["in/n.parquet"] = parquet(
        [
            {"id": 1, "vec": [1.0, 2.0], "extra": [0.5, 0.5]},
            {"id": 2, "vec": [3.0, 4.0], "extra": None},
        ]
    )
    h.store.objects["in/n.json"] = orjson.dumps({"rows": [{"id": 3, "vec": [5.0, 6.0]}]})
    state = run(h, service, ["in/n.parquet", "in/n.json"], collection="nv")
    assert state.state == common_pb2.ImportCompleted, infos(state)
    assert _rows_of(h, "nv", "id > 0", "extra") == {1: [0.5, 0.5], 2: None, 3: None}
