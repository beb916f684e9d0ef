"""Executes compaction plans: source segments' binlogs in, one merged segment's binlog out.

Pure of Spark and of the coordinator: ``compact`` takes a plan and a store. Rows deleted by
the plan's deltalogs at or before its ``delete_ts`` are dropped (a delete at ``d`` removes
rows of its key inserted before ``d``, so an upsert's new row survives its own delete), and
rows inserted before its ``expire_ts`` (past the collection's TTL for every read); the
survivors keep their insert timestamps, so reads at any later snapshot see what they saw
before. Columns are filtered and rewritten as Arrow arrays, whatever the field's type.

The object names derive from the plan (``compaction-{plan id}``): running a plan again
overwrites the same objects. ``CompactionWorker`` runs in the data node's driver: it asks
datacoord for plans, has each executed (``SparkCompactions``: a one-task Spark job, so an
executor reads and writes S3 and the driver only receives the new binlog's record), and
reports the result.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from vectide.services.common import binlog
from vectide.services.common.binlog import PK_FIELD, TS_FIELD
from vectide.services.common.compaction_plan import CompactionPlan
from vectide.services.common.segment import Binlog, Deltalog

log = logging.getLogger(__name__)


class CompactionSource(Protocol):
    """The datacoord, as the data node's compaction worker sees it."""

    def next_compaction(self) -> CompactionPlan | None: ...
    def complete_compaction(self, plan_id: int, binlog: Binlog | None, error: str = "") -> bool: ...


def latest_deletes(deltalogs: list[Deltalog], up_to_ts: int, store: binlog.Store) -> dict:
    """Each deleted key's newest delete stamp, among deletes stamped at or before ``up_to_ts``."""
    latest: dict = {}
    for delta in deltalogs:
        pks, stamps = binlog.decode_deltas(store.get(delta.path))
        keys = pks.tolist() if isinstance(pks, np.ndarray) else pks
        for pk, ts in zip(keys, stamps.tolist(), strict=True):
            if ts <= up_to_ts and ts > latest.get(pk, -1):
                latest[pk] = ts
    return latest


def surviving(pks: pa.Array, stamps: pa.Array, deletes: dict, expire_ts: int = 0) -> pa.Array:
    """Which rows no delete hits and the TTL keeps: a row survives unless its key's delete
    is newer than it or it was inserted before ``expire_ts``."""
    inserted = stamps.to_numpy(zero_copy_only=False)
    deleted_at = np.fromiter((deletes.get(pk, 0) for pk in pks.to_pylist()), np.int64, len(pks))
    return pa.array((deleted_at <= inserted) & (inserted >= expire_ts))


def compact(plan: CompactionPlan, store: binlog.Store) -> Binlog | None:
    """Write the plan's merged segment; its binlog, or None when no row survived."""
    deletes = latest_deletes(plan.deltalogs, plan.delete_ts, store)
    parts: list[dict[str, pa.Array]] = []
    for source in plan.sources:
        for part in source.parts_in_row_order():
            paths = part.paths
            pks = binlog.decode_arrow(store.get(paths[str(PK_FIELD)]))
            stamps = binlog.decode_arrow(store.get(paths[str(TS_FIELD)]))
            keep = surviving(pks, stamps, deletes, plan.expire_ts)
            columns = {str(PK_FIELD): pks, str(TS_FIELD): stamps}
            for field_id, path in paths.items():
                if field_id not in columns:
                    columns[field_id] = binlog.decode_arrow(store.get(path))
            parts.append({field_id: column.filter(keep) for field_id, column in columns.items()})
    merged = _merged(parts)
    rows = len(merged.get(str(PK_FIELD), []))
    if not rows:
        return None
    log_id = f"compaction-{plan.plan_id}"
    paths = {}
    for field_id, column in merged.items():
        key = binlog.insert_log_key(
            plan.collection_id, plan.partition_id, plan.target_id, int(field_id), log_id
        )
        store.put(key, binlog.encode_arrow(column))
        paths[field_id] = key
    pk_column = merged[str(PK_FIELD)]
    pks = pk_column.to_pylist() if pa.types.is_string(pk_column.type) else pk_column.to_numpy()
    stats_key = binlog.stats_log_key(
        plan.collection_id, plan.partition_id, plan.target_id, PK_FIELD, log_id
    )
    store.put(stats_key, binlog.PkStats.of(pks).to_json())
    stamps = merged[str(TS_FIELD)].to_numpy()
    return Binlog(log_id, rows, paths, stats_key, int(stamps.min()), int(stamps.max()))


def _merged(parts: list[dict[str, pa.Array]]) -> dict[str, pa.Array]:
    """Each field's column over every part; a part written before AddCollectionField added a
    field has no file of it, so its rows get nulls there."""
    kinds: dict[str, pa.DataType] = {}
    for part in parts:
        for field_id, column in part.items():
            kinds.setdefault(field_id, column.type)
    merged = {}
    for field_id, kind in kinds.items():
        columns = [p.get(field_id) for p in parts]
        rows = [len(p[str(PK_FIELD)]) for p in parts]
        filled = [pa.nulls(n, kind) if c is None else c for c, n in zip(columns, rows, strict=True)]
        merged[field_id] = pa.concat_arrays(filled)
    return merged


def run_on_executor(task: tuple[CompactionPlan, dict[str, str]]) -> Binlog | None:
    """A Spark task: execute the plan with this Python worker's S3 client."""
    from vectide.streaming.source import object_store

    plan, s3_options = task
    return compact(plan, object_store(s3_options))


class SparkCompactions:
    """Executes a plan as a one-task Spark job on the data node's application (alongside
    the streaming query's batches)."""

    def __init__(self, spark: Any, s3_options: dict[str, str]) -> None:
        self._spark = spark
        self._s3_options = s3_options

    def __call__(self, plan: CompactionPlan) -> Binlog | None:
        context = self._spark.sparkContext
        context.setJobDescription(f"compaction plan {plan.plan_id}")
        [result] = context.parallelize([(plan, self._s3_options)], 1).map(run_on_executor).collect()
        return result


def in_process(store: binlog.Store) -> Callable[[CompactionPlan], Binlog | None]:
    """Execute plans in this process (unit tests; a data node without Spark)."""
    return lambda plan: compact(plan, store)


class CompactionWorker:
    """Takes plans from datacoord until none is left, has each executed, reports it (a
    periodic task of the data node)."""

    def __init__(
        self, datacoord: CompactionSource, execute: Callable[[CompactionPlan], Binlog | None]
    ) -> None:
        self._datacoord = datacoord
        self._execute = execute

    def run_once(self) -> int:
        done = 0
        while (plan := self._datacoord.next_compaction()) is not None:
            try:
                result = self._execute(plan)
            except Exception as exc:
                log.exception("compaction failed", extra={"plan": plan.plan_id})
                self._datacoord.complete_compaction(plan.plan_id, None, f"{exc}")
                continue
            if self._datacoord.complete_compaction(plan.plan_id, result):
                done += 1
            log.info(
                "compaction executed",
                extra={
                    "plan": plan.plan_id,
                    "sources": len(plan.sources),
                    "rows": result.rows if result else 0,
                },
            )
        return done
