"""Bulk import (Milvus's ``Import`` / pymilvus ``do_bulk_insert``, REST ``jobs/import``):
rows from Parquet, JSON, CSV or NumPy files in the object store (``import_files.py``),
inserted as a job in the background.

The proxy that takes the request checks it (collection, partition, file types, each file
present), records the job with datacoord and returns its id; one worker thread per proxy
runs its jobs in turn:

1. every file is read and every row checked against the schema (the Kafka ingest decoder's
   rules): a bad row fails the job, naming the file and the row, before any row is written;
2. the rows are inserted in batches through this proxy's own insert path (TSO stamps,
   shards by primary key, auto_id keys, BM25 outputs, partition keys, defaults), so imported
   rows are ordinary rows to every other role;
3. the collection is flushed, so the imported rows reach sealed segments and their indexes.

A job that fails after some rows were inserted deletes them again (``cleaned``; pymilvus's
ImportFailedAndCleaned). Rows become visible as their batches are inserted, not all at once
as in Milvus, whose data nodes write imported segments directly.

Files are named by their keys in the bucket of ``s3.bucket`` (not under ``s3.root_path``),
as Milvus reads import files from its own bucket.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, Protocol

from vectide.services.common import errors, timestamptz
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.import_job import COMPLETED, FAILED, IMPORTING, ImportJob
from vectide.services.common.msgstream.message import FieldColumn
from vectide.services.common.names import qualified
from vectide.services.common.schema import CollectionInfo
from vectide.services.ingest.batcher import columns_of, pk_column
from vectide.services.ingest.decode import RecordDecoder, RecordError
from vectide.services.proxy.context import DataCoordPort
from vectide.services.proxy.import_files import ImportFileError, check_name, row_batches, units

log = logging.getLogger(__name__)

#: files per job, as Milvus's ``maxFilesPerImportReq`` (1,024)
MAX_FILES = 1024
#: a running job's progress is recorded at most this often
SAVE_INTERVAL_S = 1.0
#: the checked rows of files up to this size in all are kept for the insert, not read twice
KEEP_BYTES = 256 << 20


class ImportFiles(Protocol):
    """The bucket the files are read from."""

    def get(self, key: str) -> bytes: ...
    def size(self, key: str) -> int | None: ...


class ImportTarget(Protocol):
    """What a job needs of the proxy core."""

    server_id: int
    datacoord: DataCoordPort | None

    def describe_collection(self, name: str = "", collection_id: int = 0) -> CollectionInfo: ...
    def partition_id(self, info: CollectionInfo, partition_name: str) -> int: ...
    def insert(
        self, collection: str, partition: str, columns: dict[str, FieldColumn], num_rows: int
    ) -> Any: ...
    def delete_pks(self, collection: str, partition: str, pks: Any) -> Any: ...
    def flush(self, collections: list[str]) -> Any: ...


class Importer:
    def __init__(
        self,
        proxy: ImportTarget,
        files: ImportFiles,
        clock: Callable[[], float] = time.time,
        background: bool = True,
    ) -> None:
        """``background`` False: jobs wait for :meth:`drain` (a fault harness steps time)."""
        self._proxy = proxy
        self._files = files
        self._clock = clock
        self._background = background
        self._queue: queue.SimpleQueue[ImportJob | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()

    # -- requests --------------------------------------------------------------------------

    def submit(
        self,
        db_name: str,
        collection: str,
        partition: str,
        files: list[str],
        options: dict[str, str] | None = None,
    ) -> int:
        """Check an Import request and queue it; returns the job id."""
        datacoord = self._datacoord()
        info = self._proxy.describe_collection(qualified(db_name, collection))
        if partition and any(f.is_partition_key for f in info.schema.fields):
            raise errors.invalid(
                "not allowed to set the partition name of a collection with a partition key"
            )
        self._proxy.partition_id(info, partition)  # refuses a partition that does not exist
        if not files:
            raise errors.invalid("import request is empty: give the files to import")
        if len(files) > MAX_FILES:
            raise errors.invalid(f"{len(files)} files in one import, at most {MAX_FILES}")
        sizes = []
        for name in files:
            try:
                check_name(name)
            except ImportFileError as exc:
                raise errors.invalid(str(exc)) from None
            size = self._files.size(name)
            if size is None:
                raise errors.invalid(f"import file {name} not found")
            sizes.append(size)
        job = ImportJob(
            job_id=0,
            collection_id=info.collection_id,
            collection_name=info.name,
            db_name=db_name,
            partition_name=partition,
            files=list(files),
            proxy_id=self._proxy.server_id,
            file_bytes=sum(sizes),
            options=dict(options or {}),
        )
        job = datacoord.new_import(job)
        self._queue.put(job)
        if self._background:
            self._start_worker()
        log.info(
            "import queued",
            extra={"job": job.job_id, "collection": info.name, "files": len(files)},
        )
        return job.job_id

    def job(self, job_id: int) -> ImportJob:
        job = self._datacoord().import_job(job_id)
        if job is None:
            raise errors.invalid(f"import job {job_id} not found")
        return job

    def jobs(self, db_name: str, collection: str = "") -> list[ImportJob]:
        """The jobs of a collection, or of every collection of the database."""
        if collection:
            info = self._proxy.describe_collection(qualified(db_name, collection))
            return self._datacoord().import_jobs(info.collection_id)
        return [j for j in self._datacoord().import_jobs() if j.db_name == db_name]

    def stop(self) -> None:
        """Stop after the current batch; a job cut short fails (and is cleaned)."""
        self._stopping.set()
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout=30)

    # -- the worker ------------------------------------------------------------------------

    def _start_worker(self) -> None:
        with self._lock:
            if self._thread is None and not self._stopping.is_set():
                self._thread = threading.Thread(target=self._work, name="import", daemon=True)
                self._thread.start()

    def _work(self) -> None:
        while (job := self._queue.get()) is not None:
            try:
                self.run(job)
            except Exception:  # its record could not be written: the next job still runs
                log.exception("import job could not be recorded", extra={"job": job.job_id})

    def drain(self) -> int:
        """Run the queued jobs on this thread (without a worker); how many ran."""
        ran = 0
        while not self._queue.empty():
            job = self._queue.get()
            if job is not None:
                self.run(job)
                ran += 1
        return ran

    def run(self, job: ImportJob) -> ImportJob:
        """Run one job to its end (the worker thread; tests call it directly)."""
        job = replace(job, state=IMPORTING)
        try:
            run = _Run(self, job)
        except MilvusError as exc:  # the collection was dropped meanwhile
            job.state, job.reason, job.finished_at = FAILED, exc.message, self._clock()
            self._datacoord().save_import(job)
            return job
        run.save(force=True)
        try:
            run.check_files()
            run.insert_rows()
            self._proxy.flush([run.collection])
            run.job.state, run.job.finished_at = COMPLETED, self._clock()
            log.info("import completed", extra={"job": job.job_id, "rows": run.job.imported_rows})
        except Exception as exc:  # every failure ends the job; its rows are deleted again
            run.fail(exc)
        run.save(force=True)
        return run.job

    def _datacoord(self) -> DataCoordPort:
        if self._proxy.datacoord is None:
            raise MilvusError(Code.SERVICE_NOT_READY, "import needs the data coordinator")
        return self._proxy.datacoord


class _Run:
    """One job being run: its record, its decoder, the keys it inserted."""

    def __init__(self, importer: Importer, job: ImportJob) -> None:
        self._importer = importer
        self._proxy = importer._proxy
        self.job = job
        self.collection = qualified(job.db_name, job.collection_name)
        self._info = self._proxy.describe_collection(collection_id=job.collection_id)
        self._decoder = RecordDecoder(
            self._info.schema, zone=timestamptz.zone_of(self._info.properties)
        )
        self._inserted: list[Any] = []
        #: files read together: each file, or the NumPy files as one set of columns
        self._units = units(job.files)
        #: unit -> its checked batches, kept from the check for the insert
        self._kept: dict[int, list[list[Any]]] = {}
        self._saved_at = 0.0

    def save(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._saved_at >= SAVE_INTERVAL_S:
            self._importer._datacoord().save_import(self.job)
            self._saved_at = now

    def check_files(self) -> None:
        """Read and check every row of every file and count them. The checked rows of the
        first files, up to ``KEEP_BYTES`` of files, are kept for the insert; the others are
        read and decoded again then."""
        budget = KEEP_BYTES
        rows: dict[str, int] = {}
        for i, unit in enumerate(self._units):
            files = self._read(unit)
            batches = list(self._checked(unit, files))
            rows.update(dict.fromkeys(unit, sum(map(len, batches))))
            size = sum(map(len, files.values()))
            if size <= budget:
                self._kept[i], budget = batches, budget - size
        self.job.file_rows = [rows[name] for name in self.job.files]
        self.job.total_rows = sum(rows[unit[0]] for unit in self._units)
        self.save(force=True)

    def insert_rows(self) -> None:
        pk = self._info.schema.primary
        for i, unit in enumerate(self._units):
            kept = self._kept.pop(i, None)
            for rows in self._checked(unit, self._read(unit)) if kept is None else kept:
                self._go_on()
                columns = columns_of(self._decoder, [row.values for row in rows])
                if not pk.auto_id:
                    columns[pk.name] = pk_column(pk, [row.pk for row in rows])
                result = self._proxy.insert(
                    self.collection, self.job.partition_name, columns, len(rows)
                )
                self._inserted.append(result.pks)
                self.job.imported_rows += len(rows)
                self.save()

    def _read(self, unit: list[str]) -> dict[str, bytes]:
        return {name: self._importer._files.get(name) for name in unit}

    def _checked(self, unit: list[str], files: dict[str, bytes]) -> Iterator[list[Any]]:
        """The unit's rows decoded, a batch at a time; the first bad row raises."""
        start = 0
        for batch in row_batches(files, self._info.schema, self.job.options):
            self._go_on()
            decoded = self._decoder.decode_rows(batch)
            for i, row in enumerate(decoded):
                if isinstance(row, RecordError):
                    raise ImportFileError(f"{', '.join(unit)}: row {start + i}: {row}")
            start += len(batch)
            yield decoded

    def _go_on(self) -> None:
        if self._importer._stopping.is_set():
            raise MilvusError(Code.SERVICE_NOT_READY, "the proxy stopped: import again")

    def fail(self, exc: Exception) -> None:
        reason = exc.message if isinstance(exc, MilvusError) else str(exc)
        self.job.state, self.job.reason = FAILED, reason
        self.job.finished_at = self._importer._clock()
        log.warning("import failed", extra={"job": self.job.job_id, "error": reason})
        if not self._inserted:
            return
        try:
            for pks in self._inserted:
                self._proxy.delete_pks(self.collection, self.job.partition_name, pks)
            self.job.cleaned = True
        except Exception as cleanup:
            rows = self.job.imported_rows
            self.job.reason += f"; its {rows} inserted rows were not deleted again: {cleanup}"
            log.exception("import cleanup failed", extra={"job": self.job.job_id})
