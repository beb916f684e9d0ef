"""RESTful v2 ``/jobs/import/{create,describe,get_progress,list}`` (pymilvus's
``bulk_import``, ``get_import_progress``, ``list_import_jobs``): each route is one gRPC
import call (``grpc_import.py``), so authentication and privileges are the same."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pymilvus.grpc_gen import common_pb2, milvus_pb2

from vectide.services.proxy import rest_body as rb

if TYPE_CHECKING:
    from vectide.services.proxy.rest_call import Handler, RestCall, RestCaller


def import_routes(api: RestCaller) -> dict[str, Handler]:
    describe = lambda c: _describe(api, c)  # noqa: E731
    return {
        "create": lambda c: _create(api, c),
        "describe": describe,
        "get_progress": describe,  # the route's name before Milvus 2.4.5
        "list": lambda c: _list(api, c),
    }


def _create(api: RestCaller, call: RestCall) -> dict[str, Any]:
    groups = rb.get(call.body, "files", list)
    files = []
    for group in groups:  # Milvus: one list per import file (a NumPy file set is one list)
        if not isinstance(group, list) or not all(isinstance(f, str) for f in group):
            raise rb.bad_format("files must be an array of arrays of file paths")
        files.extend(group)
    options = rb.get(call.body, "options", dict, {})
    if not all(isinstance(v, str | int | float) for v in options.values()):
        raise rb.bad_format("options must be an object of strings")
    request = milvus_pb2.ImportRequest(
        collection_name=call.collection,
        partition_name=rb.get(call.body, "partitionName", str, ""),
        files=files,
        options=[common_pb2.KeyValuePair(key=k, value=str(v)) for k, v in options.items()],
    )
    reply = api.call("Import", request, call.db_name)
    return {"jobId": str(reply.tasks[0])}


def _describe(api: RestCaller, call: RestCall) -> dict[str, Any]:
    job_id = _job_id(call.body)
    state = api.call("GetImportState", milvus_pb2.GetImportStateRequest(task=job_id), call.db_name)
    return describe_job(state)


def _list(api: RestCaller, call: RestCall) -> dict[str, Any]:
    request = milvus_pb2.ListImportTasksRequest(
        collection_name=rb.get(call.body, "collectionName", str, "")
    )
    reply = api.call("ListImportTasks", request, call.db_name)
    records = []
    for task in reply.tasks:
        job = describe_job(task)
        records.append({k: job[k] for k in ("collectionName", "jobId", "progress", "state")})
    return {"records": records}


def describe_job(state: milvus_pb2.GetImportStateResponse) -> dict[str, Any]:
    """A job as Milvus's REST server describes it, from the GetImportState reply."""
    infos = {kv.key: kv.value for kv in state.infos}
    job = {
        "jobId": str(state.id),
        "collectionName": infos.get("collection", ""),
        "state": infos.get("state", ""),
        "progress": int(infos.get("progress_percent") or 0),
        "importedRows": state.row_count,
        "totalRows": int(infos.get("total_rows") or 0),
        "fileSize": int(infos.get("file_bytes") or 0),
        "completeTime": infos.get("completed_at", ""),
        "details": _details(infos),
    }
    if infos.get("failed_reason"):
        job["reason"] = infos["failed_reason"]
    return job


def _details(infos: dict[str, str]) -> list[dict[str, Any]]:
    """Per file, its rows once they were counted (0 before)."""
    names = _split(infos.get("files"))
    rows = [int(n) for n in _split(infos.get("file_rows"))]
    return [
        {"fileName": name, "totalRows": rows[i] if i < len(rows) else 0}
        for i, name in enumerate(names)
    ]


def _split(text: str | None) -> list[str]:
    return text.split(",") if text else []


def _job_id(body: dict[str, Any]) -> int:
    value = body.get("jobId")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise rb.bad_format("jobId must be a job id (a number or a string of digits)")
