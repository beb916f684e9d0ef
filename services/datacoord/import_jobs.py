"""Datacoord's side of bulk import: the job records (``datacoord/imports/{job id}``).

A mixin of :class:`services.datacoord.core.DataCoord`. The proxy that takes an Import runs
it (``services/proxy/imports.py``) and records each change of state here, so every proxy
answers for every job, also after a coordinator restart or failover. Finished jobs are kept
``IMPORT_RETENTION_S`` and the newest ``IMPORT_JOBS_KEPT`` at most.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from vectide.services.common.import_job import FAILED, RUNNING, ImportJob
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

    #: the live proxies' session ids, once told (None: not yet)
    _live_proxies: frozenset[int] | None = None

    def _load_imports(self) -> None:
        """Reload the recorded jobs (``DataCoord.start``); those of proxies known to be gone
        fail at once."""
        self._imports = {
            job.job_id: job
            for job in map(ImportJob.from_json, self._kv.list_prefix(_IMPORTS).values())
        }
        if self._live_proxies is not None:
            self.proxies_changed(self._live_proxies)

    def new_import(self, job: ImportJob) -> ImportJob:
        """Record a job the proxy is about to run; returns it with its id and creation time."""
        with self._lock:
            job.job_id, job.created_at = self._alloc_id(), self._clock()
            self._put_import(job)
            self._expire_imports()
            return _copy(job)

    def save_import(self, job: ImportJob) -> None:
        with self._lock:
            known = self._imports.get(job.job_id)
            # not brought back once expired, nor running again once failed as orphaned
            if known is not None and known.state in RUNNING:
                self._put_import(job)

    def import_job(self, job_id: int) -> ImportJob | None:
        with self._lock:
            job = self._imports.get(job_id)
            return None if job is None else _copy(job)

    def import_jobs(self, collection_id: int = 0) -> list[ImportJob]:
        """The jobs of one collection (0: every collection), oldest first."""
        with self._lock:
            jobs = [
                j
                for j in self._imports.values()
                if not collection_id or j.collection_id == collection_id
            ]
            return [_copy(j) for j in sorted(jobs, key=lambda j: j.job_id)]

    def proxies_changed(self, live: Sequence[int]) -> None:
        """Fail the running jobs of proxies whose session ended: nothing else would ever
        finish them (their rows stay; the reason says how many)."""
        alive = self._live_proxies = frozenset(live)
        with self._lock:
            for job in list(self._imports.values()):
                if job.state in RUNNING and job.proxy_id not in alive:
                    self._put_import(orphaned(job, self._clock()))

    def _put_import(self, job: ImportJob) -> None:
        self._kv.put(f"{_IMPORTS}/{job.job_id}", job.to_json())
        self._imports[job.job_id] = _copy(job)  # in-process callers keep changing theirs

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


def orphaned(job: ImportJob, now: float) -> ImportJob:
    reason = (
        f"the proxy running the import (session {job.proxy_id}) stopped after inserting "
        f"{job.imported_rows} of its rows, which stay: delete them or drop the collection, "
        "then import again"
    )
    return replace(job, state=FAILED, reason=reason, finished_at=now)


def _copy(job: ImportJob) -> ImportJob:
    return replace(
        job, files=list(job.files), file_rows=list(job.file_rows), options=dict(job.options)
    )
