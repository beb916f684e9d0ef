"""Insert, delete and upsert tasks: validate, hash keys to shards, stamp, write.

Rows of one request go to each shard as column batches of at most ``MAX_MSG_BYTES``, all
carrying the task's stamp. The task returns only after the broker acknowledged every batch,
so a client that got its insert timestamp back can read its write at that timestamp.
"""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from vectide.services.common import errors, nullable
from vectide.services.common.hashing import shard_of
from vectide.services.common.msgstream.channels import pchannel_of
from vectide.services.common.msgstream.message import (
    DataType,
    DeleteMsg,
    FieldColumn,
    InsertMsg,
    Message,
    PrimaryKeys,
)
from vectide.services.common.results import MutationResult, take
from vectide.services.common.schema import CollectionInfo
from vectide.services.proxy import functions
from vectide.services.proxy.task_scheduler import Queue, Task

if TYPE_CHECKING:
    from vectide.services.proxy.context import TaskContext

MAX_MSG_BYTES = 4 * 1024 * 1024
_msg_ids = itertools.count(1)
_msg_id_lock = threading.Lock()


def next_msg_id(server_id: int) -> int:
    with _msg_id_lock:
        return (server_id << 40) | next(_msg_ids)


#: a shard's rows of a request: their offsets, or a range of them (a one-shard collection's
#: rows, taken as views of the request's columns instead of copies)
Rows = np.ndarray | slice


def _by_shard(pks: PrimaryKeys, info: CollectionInfo) -> dict[int, Rows]:
    if info.shards_num == 1:  # every key hashes to shard 0
        return {0: slice(0, len(pks))}
    shards = shard_of(pks, info.shards_num)
    return {int(s): np.flatnonzero(shards == s) for s in np.unique(shards)}


def _chunks(rows: Rows, row_bytes: int) -> list[Rows]:
    per_msg = max(1, MAX_MSG_BYTES // max(row_bytes, 1))
    if isinstance(rows, slice):
        return [
            slice(i, min(i + per_msg, rows.stop)) for i in range(rows.start, rows.stop, per_msg)
        ]
    return [rows[i : i + per_msg] for i in range(0, len(rows), per_msg)]


def _count(rows: Rows) -> int:
    return rows.stop - rows.start if isinstance(rows, slice) else len(rows)


def _take(values: Any, rows: Rows) -> Any:
    return values[rows] if isinstance(rows, slice) else take(values, rows)


def _pk_array(values: Any, is_str: bool) -> PrimaryKeys:
    return list(values) if is_str else np.asarray(values, dtype=np.int64)


class InsertTask(Task):
    queue: ClassVar[Queue] = "dm"

    def __init__(
        self,
        proxy: TaskContext,
        info: CollectionInfo,
        partition_name: str,
        columns: dict[str, FieldColumn],
        num_rows: int,
        upsert: bool = False,
    ) -> None:
        self._proxy = proxy
        self._info = info
        self._partition_name = partition_name
        self._columns = columns
        self._num_rows = num_rows
        self._upsert = upsert
        self._pks: PrimaryKeys = []
        self._groups: dict[int, Rows] = {}

    def pre_execute(self) -> None:
        info, schema = self._info, self._info.schema
        if self._num_rows <= 0:
            raise errors.invalid("no rows to insert")
        self._partition_id = self._proxy.partition_id(info, self._partition_name)
        pk = schema.primary
        if pk.auto_id and not self._upsert:
            if pk.name in self._columns:
                raise errors.invalid(
                    f"the primary key {pk.name} is auto_id: do not provide it on insert"
                )
            first, _ = self._proxy.rootcoord.alloc_ids(self._num_rows)
            self._pks = np.arange(first, first + self._num_rows, dtype=np.int64)
        else:
            given = self._columns.pop(pk.name, None)
            if given is None:
                raise errors.invalid(f"the primary key field {pk.name} is missing")
            self._pks = _pk_array(given.data, pk.data_type == DataType.VARCHAR)
        functions.refuse_outputs(schema, self._columns)
        for f in schema.fields:
            if f.is_primary or f.is_function_output or f.name in self._columns:
                continue
            if f.is_dynamic:
                self._columns[f.name] = FieldColumn(
                    f.field_id, f.name, f.data_type, ["{}"] * self._num_rows
                )
            else:
                column = nullable.absent(f, self._num_rows)
                if column is None:
                    raise errors.invalid(f"field {f.name} is missing from the insert")
                self._columns[f.name] = column
        functions.run(schema, self._columns, self._num_rows)
        self._groups = _by_shard(self._pks, info)

    def channels(self) -> list[str]:
        return [pchannel_of(self._info.vchannels[s]) for s in self._groups]

    def _row_bytes(self) -> int:
        total = 16
        for col in self._columns.values():
            if isinstance(col.data, np.ndarray):
                total += col.data.itemsize * max(col.dim, 1)
            else:
                total += 8 + sum(map(len, col.data[:100])) // max(min(len(col.data), 100), 1)
        return total

    def execute(self) -> None:
        info, ts, proxy = self._info, self.ts, self._proxy
        messages: list[tuple[str, Message]] = []
        row_bytes = self._row_bytes()
        for shard, rows in self._groups.items():
            vchannel = info.vchannels[shard]
            channel = pchannel_of(vchannel)
            segment_id = 0
            if proxy.datacoord is not None:  # after the stamp: see DataCoord.assign_segment
                segment_id = proxy.datacoord.assign_segment(
                    info.collection_id, self._partition_id, vchannel, _count(rows)
                )
            if self._upsert:
                messages.append(
                    (
                        channel,
                        DeleteMsg(
                            next_msg_id(proxy.server_id),
                            ts,
                            proxy.server_id,
                            info.collection_id,
                            -1,
                            vchannel,
                            _take(self._pks, rows),
                            np.full(_count(rows), ts, dtype=np.int64),
                        ),
                    )
                )
            for chunk in _chunks(rows, row_bytes):
                messages.append(
                    (
                        channel,
                        InsertMsg(
                            msg_id=next_msg_id(proxy.server_id),
                            ts=ts,
                            source_id=proxy.server_id,
                            collection_id=info.collection_id,
                            partition_id=self._partition_id,
                            segment_id=segment_id,
                            shard=vchannel,
                            pks=_take(self._pks, chunk),
                            row_ids=np.zeros(_count(chunk), dtype=np.int64),
                            timestamps=np.full(_count(chunk), ts, dtype=np.int64),
                            fields=[c.rows(chunk) for c in self._columns.values()],
                        ),
                    )
                )
        proxy.writer.write(messages)

    def post_execute(self) -> MutationResult:
        n = self._num_rows
        if self._upsert:
            return MutationResult(self._pks, self.ts, upsert_count=n)
        return MutationResult(self._pks, self.ts, insert_count=n)


class DeleteTask(Task):
    queue: ClassVar[Queue] = "dm"

    def __init__(
        self, proxy: TaskContext, info: CollectionInfo, partition_name: str, pks: PrimaryKeys
    ) -> None:
        self._proxy = proxy
        self._info = info
        self._partition_name = partition_name
        self._pks = pks
        self._groups: dict[int, Rows] = {}

    def pre_execute(self) -> None:
        self._partition_id = (
            self._proxy.partition_id(self._info, self._partition_name)
            if self._partition_name
            else -1
        )
        self._groups = _by_shard(self._pks, self._info) if len(self._pks) else {}

    def channels(self) -> list[str]:
        return [pchannel_of(self._info.vchannels[s]) for s in self._groups]

    def execute(self) -> None:
        info, proxy = self._info, self._proxy
        messages: list[tuple[str, Message]] = []
        for shard, rows in self._groups.items():
            vchannel = info.vchannels[shard]
            for chunk in _chunks(rows, 64):
                messages.append(
                    (
                        pchannel_of(vchannel),
                        DeleteMsg(
                            next_msg_id(proxy.server_id),
                            self.ts,
                            proxy.server_id,
                            info.collection_id,
                            self._partition_id,
                            vchannel,
                            _take(self._pks, chunk),
                            np.full(_count(chunk), self.ts, dtype=np.int64),
                        ),
                    )
                )
        if messages:
            proxy.writer.write(messages)

    def post_execute(self) -> MutationResult:
        return MutationResult(self._pks, self.ts, delete_count=len(self._pks))
