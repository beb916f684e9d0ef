"""Datacoord's side of bulk import: the job records (``datacoord/imports/{job id}``).

A mixin of :class:`services.datacoord.core.DataCoord`. The proxy that takes an Import runs
it (``services/proxy/imports.py``) and records each change of state here, so every proxy
answers for every job, also after a coordinator restart or failover. Finished jobs are kept
``IMPORT_RETENTION_S`` and the newest ``IMPORT_JOBS_KEPT`` at most.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from vectide.services.common.import_job import RUNNING, ImportJob
from vectide.services.common.kv.base import MetaKV

_IMPORTS = "datacoord/imports"
#: a finished job answers GetImportState this long
IMPORT_RETENTION_S = 24 * 3600.0
IMPORT_JOBS_KEPT = 1000


class ImportCoord:
    _lock: threading.RLock
    _kv: MetaKV
    _alloc_id: Callable[[], int]
    _clock: Callable[[], float]
    _imports: dict[int, ImportJob]

    def _load_imports(self) -> None:
        """Reload the recorded jobs (``DataCoord.start``)."""
        self._imports = {
            job.job_id: job
            for job in map(ImportJob.from_json, self._kv.list_prefix(_IMPORTS).values())
        }

    def new_import(self, job: ImportJob) -> ImportJob:
        """Record a job the proxy is about to run; returns it with its id and creation time."""
        with self._lock:
            job.job_id, job.created_at = self._alloc_id(), self._clock()
            self._put_import(job)
            self._expire_imports()
            return job

    def save_import(self, job: ImportJob) -> None:
        with self._lock:
            if job.job_id in self._imports:  # expired or dropped meanwhile: not brought back
                self._put_import(job)

    def import_job(self, job_id: int) -> ImportJob | None:
        with self._lock:
            return self._imports.get(job_id)

    def import_jobs(self, collection_id: int = 0) -> list[ImportJob]:
        """The jobs of one collection (0: every collection), oldest first."""
        with self._lock:
            jobs = [
                j
                for j in self._imports.values()
                if not collection_id or j.collection_id == collection_id
            ]
            return sorted(jobs, key=lambda j: j.job_id)

    def _put_import(self, job: ImportJob) -> None:
        self._kv.put(f"{_IMPORTS}/{job.job_id}", job.to_json())
        self._imports[job.job_id] = job

    def _expire_imports(self) -> None:
        now = self._clock()
        finished = sorted(
            (j for j in self._imports.values() if j.state not in RUNNING), key=lambda j: j.job_id
        )
        excess = len(self._imports) - IMPORT_JOBS_KEPT
        for job in finished:
            if job.finished_at > now - IMPORT_RETENTION_S and excess <= 0:
                continue
            self._kv.delete(f"{_IMPORTS}/{job.job_id}")
            del self._imports[job.job_id]
            excess -= 1
