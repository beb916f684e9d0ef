"""Search and query tasks: resolve the consistency level to a guarantee timestamp, fan out to
the query nodes serving the collection's shards, and reduce what they return."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from services.common import errors, timestamp
from services.common.errors import Code, MilvusError
from services.common.expr import ExprError, parse
from services.common.requests import ShardQueryRequest, ShardSearchRequest
from services.common.results import QueryRows, SearchHits, merge_hits, merge_rows, take
from services.common.schema import DYNAMIC_FIELD, CollectionInfo, ConsistencyLevel
from services.proxy.task_scheduler import Queue, Task

if TYPE_CHECKING:
    from services.proxy.core import Proxy

COUNT_STAR = "count(*)"
EVENTUALLY_TS = 1


@dataclass
class ReadSpec:
    """What every read shares: where, at which consistency, with which filter and outputs."""

    collection_name: str
    expr: str = ""
    expr_params: dict[str, Any] = field(default_factory=dict)
    partition_names: list[str] = field(default_factory=list)
    output_fields: list[str] = field(default_factory=list)
    guarantee_ts: int = 0
    use_default_consistency: bool = True
    consistency_level: ConsistencyLevel = ConsistencyLevel.BOUNDED
    #: seconds left before the client's deadline (None: no deadline)
    deadline_s: float | None = None


@dataclass
class SearchSpec(ReadSpec):
    vectors: np.ndarray = field(default_factory=lambda: np.empty((0, 0), np.float32))
    anns_field: str = ""
    metric_type: str = ""
    limit: int = 10
    offset: int = 0
    round_decimal: int = -1
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class QuerySpec(ReadSpec):
    limit: int | None = None
    offset: int = 0


def output_fields(info: CollectionInfo, requested: list[str]) -> tuple[list[str], list[str]]:
    """(fields the query nodes must return, names the response lists).

    ``*`` means every field; a name the schema does not know is a dynamic key when the
    collection has dynamic fields (the query nodes return ``$meta`` and pymilvus picks the key).
    """
    schema = info.schema
    fetch: list[str] = []
    names: list[str] = []
    for name in requested:
        if name == "*":
            for f in schema.fields:
                if not f.is_primary and f.name not in fetch:
                    fetch.append(f.name)
                if f.name not in names:
                    names.append(f.name)
            continue
        f = schema.field(name)
        if f is not None:
            if not f.is_primary and name not in fetch:
                fetch.append(name)
        elif schema.enable_dynamic_field and name != COUNT_STAR:
            if DYNAMIC_FIELD not in fetch:
                fetch.append(DYNAMIC_FIELD)
        else:
            raise errors.invalid(f"field {name} not exist")
        if name not in names:
            names.append(name)
    return fetch, names


class _ReadTask(Task):
    queue: ClassVar[Queue] = "dq"

    def __init__(self, proxy: Proxy, spec: ReadSpec) -> None:
        self._proxy = proxy
        self._spec = spec
        self.info: CollectionInfo

    def _resolve_common(self) -> None:
        spec, proxy = self._spec, self._proxy
        self.info = proxy.meta.get(spec.collection_name)
        proxy.require_loaded(self.info)
        if spec.expr.strip():
            try:
                parse(spec.expr, spec.expr_params or None)
            except ExprError as exc:
                raise errors.invalid(str(exc)) from exc
        self.partition_ids = [proxy.partition_id(self.info, p) for p in spec.partition_names]

    def _guarantee(self) -> tuple[int, float]:
        """The guarantee timestamp for this read and how long it may wait for it."""
        spec, proxy = self._spec, self._proxy
        level = (
            self.info.consistency_level
            if spec.use_default_consistency
            else (spec.consistency_level)
        )
        if level == ConsistencyLevel.STRONG or (
            level == ConsistencyLevel.CUSTOMIZED and spec.guarantee_ts == 0
        ):
            ts = proxy.rootcoord.alloc_timestamp()
            proxy.ticker.wake()  # report now: the next timetick then covers ``ts``
        elif level == ConsistencyLevel.BOUNDED:
            ts = timestamp.compose(max(timestamp.now_ms() - proxy.config.graceful_time_ms, 0))
        elif level == ConsistencyLevel.EVENTUALLY:
            ts = EVENTUALLY_TS
        else:  # Session, Customized: as the client says (1 when it never wrote)
            ts = max(spec.guarantee_ts, EVENTUALLY_TS)
        wait = proxy.config.max_timestamp_lag_ms / 1000
        if spec.deadline_s is not None:
            wait = max(min(wait, spec.deadline_s - 0.05), 0.0)
        return ts, wait

    def _fan_out(self, call: Any) -> list[Any]:
        """Run ``call(node, vchannels)`` on every node serving this collection's shards."""
        leaders = self._proxy.querycoord.shard_leaders(self.info.collection_id)
        by_node: dict[int, list[str]] = {}
        for vchannel in self.info.vchannels:
            if vchannel not in leaders:
                raise MilvusError(Code.SERVICE_NOT_READY, f"shard {vchannel} has no query node")
            by_node.setdefault(leaders[vchannel], []).append(vchannel)
        if len(by_node) == 1:
            [(node_id, vchannels)] = by_node.items()
            return [call(self._proxy.nodes.node(node_id), vchannels)]
        with ThreadPoolExecutor(max_workers=len(by_node)) as pool:
            futures = [pool.submit(call, self._proxy.nodes.node(n), v) for n, v in by_node.items()]
            return [f.result() for f in futures]


class SearchTask(_ReadTask):
    _spec: SearchSpec

    def pre_execute(self) -> None:
        self._resolve_common()
        spec, schema = self._spec, self.info.schema
        vector_fields = schema.vector_fields
        if not spec.anns_field:
            if len(vector_fields) != 1:
                raise errors.invalid("anns_field is required: the collection has several vectors")
            spec.anns_field = vector_fields[0].name
        field = schema.field(spec.anns_field)
        if field is None or not field.is_vector:
            raise errors.invalid(f"anns_field {spec.anns_field} is not a vector field")
        if spec.vectors.ndim != 2 or spec.vectors.shape[1] != field.dim:
            raise errors.invalid(f"vector dimension mismatch: field {field.name} has {field.dim}")
        if not 1 <= spec.limit <= 16384:
            raise errors.invalid(f"limit must be in [1, 16384], got {spec.limit}")
        if spec.offset < 0 or spec.offset + spec.limit > 16384:
            raise errors.invalid("offset + limit must be in [1, 16384]")
        index = self.info.index_on(field.name)
        metric = index.metric_type if index else "L2"
        if spec.metric_type and spec.metric_type.upper() != metric:
            raise errors.invalid(
                f"metric type not match: invalid parameter[expected={metric}]"
                f"[actual={spec.metric_type}]"
            )
        self.metric = metric
        self.fetch, self.names = output_fields(self.info, spec.output_fields)

    def execute(self) -> None:
        spec = self._spec
        ts, wait = self._guarantee()
        topk = spec.limit + spec.offset
        request = ShardSearchRequest(
            collection_id=self.info.collection_id,
            vchannels=[],
            anns_field=spec.anns_field,
            vectors=np.ascontiguousarray(spec.vectors, dtype=np.float32),
            metric_type=self.metric,
            topk=topk,
            guarantee_ts=ts,
            wait_timeout_s=wait,
            expr=spec.expr,
            expr_params=spec.expr_params,
            partition_ids=self.partition_ids,
            output_fields=self.fetch,
            search_params=spec.params,
        )
        parts = self._fan_out(lambda node, vchs: node.search(replace(request, vchannels=vchs)))
        merged = merge_hits(parts, topk)
        self.hits = _page(merged, spec.offset, spec.limit)
        if spec.round_decimal >= 0:
            self.hits.scores = np.round(self.hits.scores, spec.round_decimal)

    def post_execute(self) -> tuple[CollectionInfo, SearchHits, list[str]]:
        return self.info, self.hits, self.names


def _page(hits: SearchHits, offset: int, limit: int) -> SearchHits:
    if offset == 0 and all(c <= limit for c in hits.counts):
        return hits
    starts = np.concatenate([[0], np.cumsum(hits.counts)]).astype(np.int64)
    keep = [
        np.arange(s + offset, min(s + offset + limit, e)) for s, e in itertools.pairwise(starts)
    ]
    counts = [len(k) for k in keep]
    index = np.concatenate(keep) if keep else np.empty(0, np.int64)
    return SearchHits(
        hits.metric_type,
        counts,
        take(hits.pks, index),
        hits.scores[index],
        {n: take(v, index) for n, v in hits.fields.items()},
    )


class QueryTask(_ReadTask):
    _spec: QuerySpec

    def pre_execute(self) -> None:
        self._resolve_common()
        spec = self._spec
        self.count_only = [f.strip().lower() for f in spec.output_fields] == [COUNT_STAR]
        if not self.count_only and not spec.expr.strip() and spec.limit is None:
            raise errors.invalid("empty expression should be used with limit")
        if spec.limit is not None and (spec.limit < 0 or spec.offset < 0):
            raise errors.invalid("limit and offset must not be negative")
        if self.count_only:
            self.fetch, self.names = [], [COUNT_STAR]
        else:
            self.fetch, self.names = output_fields(self.info, spec.output_fields)
            pk = self.info.schema.primary.name
            if pk not in self.names:
                self.names.insert(0, pk)

    def execute(self) -> None:
        spec = self._spec
        ts, wait = self._guarantee()
        per_shard = None if spec.limit is None else spec.limit + spec.offset
        request = ShardQueryRequest(
            collection_id=self.info.collection_id,
            vchannels=[],
            guarantee_ts=ts,
            wait_timeout_s=wait,
            expr=spec.expr,
            expr_params=spec.expr_params,
            partition_ids=self.partition_ids,
            output_fields=self.fetch,
            limit=per_shard,
            count_only=self.count_only,
        )
        parts = self._fan_out(lambda node, vchs: node.query(replace(request, vchannels=vchs)))
        self.rows = merge_rows(parts, spec.offset, spec.limit)

    def post_execute(self) -> tuple[CollectionInfo, QueryRows, list[str]]:
        return self.info, self.rows, self.names
