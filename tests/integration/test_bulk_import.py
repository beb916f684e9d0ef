"""Bulk import as Milvus's guide runs it, with unmodified pymilvus: ``RemoteBulkWriter``
writes Parquet and JSON files into the deployment's bucket (on the real SeaweedFS, through
the MinIO client pymilvus uses), ``utility.do_bulk_insert`` and the REST ``bulk_import``
start jobs, ``get_bulk_insert_state``/``get_import_progress``/``list_import_jobs`` follow
them, and the rows are searchable afterwards."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from urllib.parse import urlparse

import numpy as np
import pytest
from pymilvus import DataType, MilvusClient, connections, utility
from pymilvus.bulk_writer import (
    BulkFileType,
    RemoteBulkWriter,
    bulk_import,
    get_import_progress,
    list_import_jobs,
)
from pymilvus.client.types import BulkInsertState

from vectide.services.common.objectstore import ObjectStore

DIM = 8
#: do_bulk_insert and its state calls exist only in pymilvus's ORM API (MilvusClient has none)
pytestmark = pytest.mark.filterwarnings("ignore:.*ORM-style PyMilvus API")


@pytest.fixture(scope="module")
def orm(standalone):
    alias = f"import_{uuid.uuid4().hex[:6]}"
    connections.connect(alias=alias, uri=standalone.uri)
    yield alias
    connections.disconnect(alias)


@pytest.fixture
def name(client):
    name = f"bulk_{uuid.uuid4().hex[:6]}"
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=True)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("title", DataType.VARCHAR, max_length=64)
    index = client.prepare_index_params()
    index.add_index("vector", index_type="HNSW", metric_type="L2", params={"M": 8})
    client.create_collection(name, schema=schema, index_params=index)
    yield name
    client.drop_collection(name)


def write_files(standalone, client, name: str, keys: range, file_type: BulkFileType) -> list:
    """The rows of ``keys`` written by pymilvus's RemoteBulkWriter; its file lists."""
    s3 = standalone.config.s3
    endpoint = urlparse(s3.endpoint)
    param = RemoteBulkWriter.S3ConnectParam(
        endpoint=endpoint.netloc,
        access_key=s3.access_key,
        secret_key=s3.secret_key,
        bucket_name=s3.bucket,
        secure=False,
    )
    schema = client.describe_collection(name)
    bulk_schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=True)
    for field in schema["fields"]:
        bulk_schema.add_field(
            field["name"],
            field["type"],
            **field.get("params", {}),
            is_primary=field.get("is_primary", False),
        )
    with RemoteBulkWriter(
        schema=bulk_schema,
        remote_path=f"bulk/{name}",
        connect_param=param,
        file_type=file_type,
    ) as writer:
        for k in keys:
            writer.append_row(
                {"id": k, "vector": vector(k).tolist(), "title": f"t{k}", "tag": k % 3}
            )
        writer.commit()
        return writer.batch_files


def vector(key: int) -> np.ndarray:
    return np.random.default_rng(key).random(DIM, dtype=np.float32)


def wait_state(alias: str, job: int, timeout_s: float = 60) -> BulkInsertState:
    deadline = time.monotonic() + timeout_s
    while True:
        state = utility.get_bulk_insert_state(job, using=alias)
        if state.state in (
            BulkInsertState.ImportCompleted,
            BulkInsertState.ImportFailed,
            BulkInsertState.ImportFailedAndCleaned,
        ):
            return state
        assert time.monotonic() < deadline, state
        time.sleep(0.2)


@pytest.mark.parametrize("kind", ["PARQUET", "JSON", "CSV", "NUMPY"])
def test_files_from_the_bulk_writer_are_imported_and_searchable(
    standalone, client, orm, name, kind
):
    client.load_collection(name)
    files = write_files(standalone, client, name, range(1000), BulkFileType[kind])
    assert len(files) == 1
    job = utility.do_bulk_insert(name, files=files[0], using=orm)
    state = wait_state(orm, job)
    assert state.state == BulkInsertState.ImportCompleted, state.infos
    assert state.row_count == 1000
    assert state.infos["collection"] == name and state.progress == 100
    count = client.query(name, output_fields=["count(*)"], consistency_level="Strong")
    assert count[0]["count(*)"] == 1000
    hits = client.search(
        name,
        [vector(123).tolist()],
        limit=1,
        output_fields=["title", "tag"],
        consistency_level="Strong",
    )[0]
    assert hits[0]["id"] == 123
    assert hits[0]["entity"] == {"title": "t123", "tag": 0}
    tasks = utility.list_bulk_insert_tasks(collection_name=name, using=orm)
    assert [t.task_id for t in tasks] == [job]


def test_rest_bulk_import_follows_its_job_to_the_end(standalone, client, name):
    url = f"http://127.0.0.1:{standalone.config.service.http_port}"
    files = write_files(standalone, client, name, range(500), BulkFileType.JSON)
    reply = bulk_import(url=url, collection_name=name, files=files).json()
    assert reply["code"] == 0, reply
    job = reply["data"]["jobId"]
    deadline = time.monotonic() + 60
    while (progress := get_import_progress(url=url, job_id=job).json()["data"])["state"] not in (
        "Completed",
        "Failed",
    ):
        assert time.monotonic() < deadline, progress
        time.sleep(0.2)
    assert progress["state"] == "Completed", progress
    assert progress["progress"] == 100
    assert progress["importedRows"] == progress["totalRows"] == 500
    assert progress["details"][0]["fileName"] == files[0][0]
    listed = list_import_jobs(url=url, collection_name=name).json()["data"]["records"]
    assert listed == [{"collectionName": name, "jobId": job, "progress": 100, "state": "Completed"}]
    client.load_collection(name)
    count = client.query(name, output_fields=["count(*)"], consistency_level="Strong")
    assert count[0]["count(*)"] == 500


def test_a_file_that_does_not_match_the_schema_fails_the_job_and_writes_nothing(
    standalone, client, orm, name
):
    client.load_collection(name)
    good = write_files(standalone, client, name, range(10), BulkFileType.PARQUET)[0]

    bucket = ObjectStore(replace(standalone.config.s3, root_path=""))
    bucket.put(f"bulk/{name}/bad.json", b'[{"id": 99, "vector": [1.0, 2.0], "title": "x"}]')
    job = utility.do_bulk_insert(name, files=[*good, f"bulk/{name}/bad.json"], using=orm)
    state = wait_state(orm, job)
    assert state.state == BulkInsertState.ImportFailed
    assert f"bulk/{name}/bad.json: row 0" in state.infos["failed_reason"]
    assert "dimension 2, expected 8" in state.infos["failed_reason"]
    count = client.query(name, output_fields=["count(*)"], consistency_level="Strong")
    assert count[0]["count(*)"] == 0
    with pytest.raises(Exception, match="not found"):
        utility.do_bulk_insert(name, files=[f"bulk/{name}/none.parquet"], using=orm)
