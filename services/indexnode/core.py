"""Index builds: one faiss index file per flushed segment and vector index, on S3.

A task is (segment, index). States follow Milvus's index builds: Unissued (flushed, no
file yet) -> InProgress -> Finished (file written, segment Indexed) or Failed (retried up to
``max_attempts`` times, then left Failed and reported). Query nodes that load the segment
later take the file instead of building the index themselves. Index files of dropped
indexes and collections are recycled.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import faiss
import numpy as np

from vectide.services.common import binlog, vector_types
from vectide.services.common.index_spec import IndexSpec, is_interim
from vectide.services.common.memory import release_freed
from vectide.services.common.msgstream.message import DataType
from vectide.services.common.schema import CollectionInfo, FieldSchema, IndexInfo
from vectide.services.common.segment import PERSISTED, SegmentInfo, SegmentState

log = logging.getLogger(__name__)


class TaskState(StrEnum):
    UNISSUED = "Unissued"
    IN_PROGRESS = "InProgress"
    FINISHED = "Finished"
    FAILED = "Failed"


class Segments(Protocol):
    def segments(
        self, collection_id: int, states: tuple[SegmentState, ...] | None = None
    ) -> list[SegmentInfo]: ...
    def set_index_file(self, segment_id: int, build_id: int, path: str) -> None: ...


class Collections(Protocol):
    def show_collections(self) -> list[CollectionInfo]: ...


class ObjectStorePort(binlog.Store, Protocol):
    def list(self, prefix: str = ""): ...
    def delete_prefix(self, prefix: str) -> int: ...


@dataclass(frozen=True)
class Task:
    segment_id: int
    index_id: int


def segment_vectors(
    segment: SegmentInfo,
    field_id: int,
    dim: int,
    store: binlog.Store,
    data_type: DataType = DataType.FLOAT_VECTOR,
) -> tuple[np.ndarray, np.ndarray | None]:
    """A segment's float vectors (half floats widened to float32) in the order query nodes
    load its rows and, when some rows have none (a nullable field's nulls, or rows written
    before AddCollectionField added it), only those holding one, with their row offsets
    (None: every row, in order): what ``IndexSpec.build`` takes."""
    vectors, valid = [], []
    for part in segment.parts_in_row_order():
        path = part.paths.get(str(field_id))
        if path is None:  # written before AddCollectionField added the field: all nulls
            valid.append(np.zeros(part.rows, bool))
            continue
        rows, mask = binlog.read_column(store.get(path), data_type, dim)
        vectors.append(vector_types.as_float32(data_type, rows if mask is None else rows[mask]))
        valid.append(np.ones(len(rows), bool) if mask is None else mask)
    held = np.concatenate(valid) if valid else np.empty(0, bool)
    found = np.vstack(vectors) if vectors else np.empty((0, dim), np.float32)
    return found, None if held.all() else np.flatnonzero(held)


def build_threads() -> int:
    """A sealed segment's index build uses every core: it runs once per segment, and the
    sooner it ends the sooner reads leave the exact scan (server processes otherwise run
    faiss on one thread, see ``cli.use_one_faiss_thread``)."""
    return os.cpu_count() or 1


def index_file(
    spec: IndexSpec, segment: SegmentInfo, field: FieldSchema, store: binlog.Store
) -> tuple[bytes, int]:
    """A segment's index file and the rows it indexes. The segment's vectors and the built
    index are let go before the file's bytes are made, so they are not all held at once
    (1M x 128-d HNSW: 0.5 GB of vectors, 0.65 GB of index, its serialized copy and bytes)."""
    vectors, held = segment_vectors(segment, field.field_id, field.dim, store, field.data_type)
    release_freed()  # the binlogs' decode buffers, before minutes of building
    rows = sum(part.rows for part in segment.parts_in_row_order())
    faiss.omp_set_num_threads(build_threads())  # this thread only (OpenMP's per-thread ICV)
    built = spec.build(vectors, held)
    del vectors
    serialized = faiss.serialize_index(built)
    del built
    return serialized.tobytes(), rows


class IndexBuilder:
    def __init__(
        self,
        segments: Segments,
        collections: Collections,
        store: ObjectStorePort,
        max_attempts: int = 3,
    ) -> None:
        self._segments = segments
        self._collections = collections
        self._store = store
        self._max_attempts = max_attempts
        self._states: dict[Task, TaskState] = {}
        self._attempts: Counter[Task] = Counter()
        self._lock = threading.Lock()

    def state(self, segment_id: int, index_id: int) -> TaskState:
        with self._lock:
            return self._states.get(Task(segment_id, index_id), TaskState.UNISSUED)

    def run_once(self) -> int:
        """Build every pending index once; returns how many files were written."""
        built = 0
        for info, index, segment in self._missing():
            built += self._build(info, index, segment)
            release_freed()  # a segment's vectors, its index and the file's bytes: transient
        return built

    def backlog(self) -> dict[str, int]:
        """Index files still to build (``pending``) and given up on (``failed``): the
        index build queue an operator watches."""
        counts = {"pending": 0, "failed": 0}
        for _, index, segment in self._missing():
            failed = self.state(segment.segment_id, index.index_id) == TaskState.FAILED
            counts["failed" if failed else "pending"] += 1
        return counts

    def _missing(self) -> Iterator[tuple[CollectionInfo, IndexInfo, SegmentInfo]]:
        """Persisted segments without the file of an index that needs one."""
        for info in self._collections.show_collections():
            for index in info.indexes:
                if not is_interim(index, info.schema):
                    continue  # FLAT (and binary, sparse) need no index file: a scan
                for segment in self._segments.segments(info.collection_id, PERSISTED):
                    if str(index.index_id) not in segment.index_files:
                        yield info, index, segment

    def _build(self, info: CollectionInfo, index: IndexInfo, segment: SegmentInfo) -> int:
        task = Task(segment.segment_id, index.index_id)
        with self._lock:
            if self._states.get(task) == TaskState.FAILED:
                return 0
            self._states[task] = TaskState.IN_PROGRESS
        try:
            field = info.schema.field(index.field_name)
            data, rows = index_file(IndexSpec.of(index), segment, field, self._store)
            key = binlog.index_file_key(index.index_id, segment.segment_id)
            self._store.put(key, data)
            del data
            self._segments.set_index_file(segment.segment_id, index.index_id, key)
        except Exception:
            with self._lock:
                self._attempts[task] += 1
                failed = self._attempts[task] >= self._max_attempts
                self._states[task] = TaskState.FAILED if failed else TaskState.UNISSUED
            log.exception(
                "index build failed",
                extra={"segment": segment.segment_id, "index": index.index_id, "gave_up": failed},
            )
            return 0
        with self._lock:
            self._states[task] = TaskState.FINISHED
        log.info(
            "index built",
            extra={"segment": segment.segment_id, "index": index.index_id, "rows": rows},
        )
        return 1

    def recycle(self) -> int:
        """Delete index files whose index no longer exists (dropped index or collection)."""
        live = {str(i.index_id) for c in self._collections.show_collections() for i in c.indexes}
        stale = {key.split("/")[1] for key in self._store.list("index_files/")} - live
        return sum(self._store.delete_prefix(f"index_files/{build}/") for build in stale)
