"""The bulk import RPCs: Import, GetImportState, ListImportTasks (pymilvus ``do_bulk_insert``,
``get_bulk_insert_state``, ``list_bulk_insert_tasks``; the REST ``jobs/import`` routes call
them too).

A mixin of :class:`services.proxy.grpc_service.MilvusService`, which supplies ``proxy``.
The job runs in this proxy's importer (``services/proxy/imports.py``); its record lives in
datacoord, so any proxy answers for it.
"""

from __future__ import annotations

import time

from pymilvus.grpc_gen import common_pb2, milvus_pb2

from vectide.services.common import errors
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.import_job import COMPLETED, FAILED, IMPORTING, ImportJob
from vectide.services.proxy.core import Proxy
from vectide.services.proxy.grpc_common import db_of, ok, rpc
from vectide.services.proxy.imports import Importer

#: ImportJob.state -> common.proto ImportState
_STATES = {
    IMPORTING: common_pb2.ImportStarted,
    COMPLETED: common_pb2.ImportCompleted,
}


class ImportRpcs:
    proxy: Proxy

    @rpc(milvus_pb2.ImportResponse)
    def Import(self, request, context):
        options = {kv.key: kv.value for kv in request.options}
        if options.pop("backup", "").lower() == "true":
            raise errors.invalid("importing Milvus backups is not supported")
        job_id = self._importer().submit(
            db_of(request, context),
            request.collection_name,
            request.partition_name,
            list(request.files),
            options,
        )
        return milvus_pb2.ImportResponse(status=ok(), tasks=[job_id])

    @rpc(milvus_pb2.GetImportStateResponse)
    def GetImportState(self, request, context):
        return state_response(self._importer().job(request.task))

    @rpc(milvus_pb2.ListImportTasksResponse)
    def ListImportTasks(self, request, context):
        jobs = self._importer().jobs(db_of(request, context), request.collection_name)
        if request.limit > 0:
            jobs = jobs[-request.limit :]
        return milvus_pb2.ListImportTasksResponse(
            status=ok(), tasks=[state_response(j) for j in jobs]
        )

    def _importer(self) -> Importer:
        if self.proxy.importer is None:
            raise MilvusError(Code.SERVICE_NOT_READY, "import is not available on this proxy")
        return self.proxy.importer


def _utc(epoch_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_s))


def state_response(job: ImportJob) -> milvus_pb2.GetImportStateResponse:
    if job.state == FAILED:
        state = common_pb2.ImportFailedAndCleaned if job.cleaned else common_pb2.ImportFailed
    else:
        state = _STATES.get(job.state, common_pb2.ImportPending)
    infos = {  # pymilvus's keys, then what the REST job routes describe
        "collection": job.collection_name,
        "partition": job.partition_name,
        "files": ",".join(job.files),
        "failed_reason": job.reason,
        "progress_percent": str(job.progress),
        "state": job.state,
        "total_rows": str(job.total_rows),
        "file_rows": ",".join(map(str, job.file_rows)),
        "file_bytes": str(job.file_bytes),
        "completed_at": _utc(job.finished_at) if job.state == COMPLETED else "",
    }
    return milvus_pb2.GetImportStateResponse(
        status=ok(),
        state=state,
        row_count=job.imported_rows,
        infos=[common_pb2.KeyValuePair(key=k, value=v) for k, v in infos.items()],
        id=job.job_id,
        collection_id=job.collection_id,
        create_ts=int(job.created_at),
    )
