"""Search and query tasks: resolve the consistency level to a guarantee timestamp, fan out to
the query nodes serving the collection's shards, and reduce what they return."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from vectide.services.common import collection_properties, errors, timestamp, vector_types
from vectide.services.common.aggregation import (
    COUNT_STAR,
    Aggregation,
    combine,
    finish,
    parse_aggregation,
)
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.grouping import (
    as_values,
    group_by_field,
    merge_groups,
    restrict_to_groups,
)
from vectide.services.common.msgstream.message import DataType, Position, row_width
from vectide.services.common.order_by import OrderKey, columns_of, order_of, parse_order_by
from vectide.services.common.requests import ShardQueryRequest, ShardSearchRequest
from vectide.services.common.results import QueryRows, SearchHits, merge_hits, merge_rows, take
from vectide.services.common.schema import (
    DYNAMIC_FIELD,
    CollectionInfo,
    CollectionSchema,
    ConsistencyLevel,
    FieldSchema,
)
from vectide.services.common.search_range import band_of
from vectide.services.common.time_travel import EVENTUALLY_TS
from vectide.services.proxy import functions, limits, time_zones
from vectide.services.proxy.task_scheduler import Queue, Task

if TYPE_CHECKING:
    from vectide.services.proxy.context import TaskContext

_ShardRequest = TypeVar("_ShardRequest", ShardSearchRequest, ShardQueryRequest)


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
    #: the request's ``travel_timestamp`` (0: none; services/common/time_travel.py)
    travel_ts: int = 0
    #: seconds left before the client's deadline (None: no deadline)
    deadline_s: float | None = None
    #: the request's ``timezone`` and ``time_fields`` parameters ("": none;
    #: services/proxy/time_zones.py)
    timezone: str = ""
    time_fields: str = ""
    #: a page of a query or search iterator (``iterator`` in its params): every page is
    #: read at one snapshot, the first page's, which pymilvus sends back as the guarantee
    #: of the next (Milvus's iterator MVCC stamp)
    iterator: bool = False
    #: the request's ``order_by_fields`` ("": none; services/common/order_by.py)
    order_by: str = ""


@dataclass
class SearchSpec(ReadSpec):
    vectors: np.ndarray = field(default_factory=lambda: np.empty((0, 0), np.float32))
    anns_field: str = ""
    metric_type: str = ""
    limit: int = 10
    offset: int = 0
    round_decimal: int = -1
    params: dict[str, Any] = field(default_factory=dict)
    #: grouping search: the field hits are grouped by; ``limit`` and ``offset`` then count
    #: groups of up to ``group_size`` hits
    group_by_field: str = ""
    group_size: int = 1


@dataclass
class QuerySpec(ReadSpec):
    limit: int | None = None
    offset: int = 0
    #: the request's ``group_by_fields`` ("": none; services/common/aggregation.py);
    #: ``limit`` and ``offset`` then count groups
    group_by: str = ""


@dataclass(frozen=True)
class Outputs:
    """A read's output fields, resolved once against the schema (Milvus's proxy does the same
    in translateOutputFields).

    Clients read one value per name in the reply's ``output_fields``: the Node SDK looks each
    up in ``fields_data`` (or, failing that, in ``$meta``) and crashes when neither has it, and
    pymilvus and langchain-milvus drop what is missing. So every name listed here must come
    back as a column, or as a key of the dynamic field.
    """

    #: columns the query nodes return: schema fields, and ``$meta`` for dynamic keys; never
    #: the primary key, which every hit and row carries anyway
    fetch: list[str]
    #: the reply's ``output_fields``: the client's names, ``*`` expanded, in request order
    names: list[str]
    #: the client asked for the primary key (by name or through ``*``): search replies then
    #: carry its column as well as ``ids``, as Milvus's do
    pk: bool
    #: TIMESTAMPTZ columns are rendered in this zone, or as these components
    #: (``time_zones.render``)
    zone: str = "UTC"
    time_fields: tuple[str, ...] = ()
    #: an aggregation's reply columns (group fields and aggregates, as ``names``): the
    #: reply holds these instead of rows
    aggregated: tuple[FieldSchema, ...] = ()


def resolve_outputs(schema: CollectionSchema, requested: list[str]) -> Outputs:
    """The :class:`Outputs` of ``requested`` (Milvus 2.6 semantics).

    ``*`` means every field, vectors and ``$meta`` included (Milvus >= 2.4; older servers left
    vectors out), but not a function's output (never returned); a name the schema does not
    know is a dynamic key when the collection has dynamic fields (the query nodes return
    ``$meta`` and the client picks the key), and an error otherwise.
    """
    fetch: list[str] = []
    names: list[str] = []
    everything = [f.name for f in schema.fields if not f.is_function_output]
    for raw in requested:
        name = raw.strip()
        if not name:
            continue
        for each in everything if name == "*" else [name]:
            column = _column_of(schema, each)
            if column is not None and column not in fetch:
                fetch.append(column)
            if each not in names:
                names.append(each)
    return Outputs(fetch, names, schema.primary.name in names)


def _column_of(schema: CollectionSchema, name: str) -> str | None:
    """The column holding output ``name`` (None for the primary key: hits carry it)."""
    field = schema.field(name)
    if field is not None and field.is_function_output:
        raise errors.invalid(f"not allowed to retrieve raw data of field {name} (function output)")
    if field is not None:
        return None if field.is_primary else field.name
    if schema.enable_dynamic_field and name != COUNT_STAR:
        return DYNAMIC_FIELD
    raise errors.invalid(f"field {name} not exist")


class _ReadTask(Task):
    queue: ClassVar[Queue] = "dq"

    def __init__(self, proxy: TaskContext, spec: ReadSpec) -> None:
        self._proxy = proxy
        self._spec = spec
        self.info: CollectionInfo
        self.outputs: Outputs

    def _resolve_common(self) -> None:
        spec, proxy = self._spec, self._proxy
        self.info = proxy.meta.get(spec.collection_name)
        self.partition_ids = proxy.readable_partitions(self.info, spec.partition_names)
        self.zone = time_zones.read_zone(self.info, spec.timezone)
        if spec.expr.strip():
            tree = limits.parse_filter(proxy.config.quota, spec.expr, spec.expr_params, self.zone)
            functions.check_text_match(tree, self.info.schema)
        self.order_by = parse_order_by(spec.order_by, self.info.schema)
        if self.order_by and spec.iterator:
            raise errors.invalid("order_by is not supported when using an iterator")

    def _fetched(self, outputs: Outputs) -> list[str]:
        """The columns the query nodes return: the outputs', and the ORDER BY keys' (read to
        order the results, sent to the client only when it asked for them)."""
        if not self.order_by:
            return outputs.fetch
        return list(dict.fromkeys([*outputs.fetch, *columns_of(self.order_by)]))

    def _with_times(self, outputs: Outputs) -> Outputs:
        """``outputs`` rendering TIMESTAMPTZ columns as the request asks (most ask nothing:
        the cached outputs then serve as they are)."""
        components = tuple(time_zones.time_components(self._spec.time_fields))
        if self.zone == outputs.zone and components == outputs.time_fields:
            return outputs
        return replace(outputs, zone=self.zone, time_fields=components)

    def _guarantee(self) -> tuple[int, float, int, list[Position]]:
        """The guarantee timestamp for this read, how long it may wait for it, the snapshot
        it travels to (0: none, the read is at the shards' tsafe) and the fences that let the
        shards reach it without a TimeTick (none for an Eventually read: it does not wait)."""
        spec, proxy = self._spec, self._proxy
        level = (
            self.info.consistency_level
            if spec.use_default_consistency
            else (spec.consistency_level)
        )
        wait = proxy.config.max_timestamp_lag_ms / 1000
        if spec.deadline_s is not None:
            wait = max(min(wait, spec.deadline_s - 0.05), 0.0)
        retention = proxy.config.retention
        travel = retention.requested(
            level, spec.use_default_consistency, spec.guarantee_ts, spec.travel_ts
        )
        if travel:
            retention.check(travel, timestamp.now_ms())
            # a stamp in the future waits like a guarantee
            return travel, wait, travel, proxy.fences_for(self.info.pchannels, travel)
        if spec.iterator:
            return self._iterator_snapshot(wait)
        if level == ConsistencyLevel.STRONG or (
            level == ConsistencyLevel.CUSTOMIZED and spec.guarantee_ts == 0
        ):
            ts, fences = proxy.strong_read(self.info.pchannels)
            return ts, wait, 0, fences
        if level == ConsistencyLevel.BOUNDED:
            ts = timestamp.compose(max(timestamp.now_ms() - proxy.config.graceful_time_ms, 0))
            return ts, wait, 0, proxy.fences_for(self.info.pchannels, ts)
        if level == ConsistencyLevel.EVENTUALLY or spec.guarantee_ts <= EVENTUALLY_TS:
            return EVENTUALLY_TS, wait, 0, []  # Session/Customized of a client that never wrote
        # Session, Customized: as the client says
        return spec.guarantee_ts, wait, 0, proxy.fences_for(self.info.pchannels, spec.guarantee_ts)

    def _iterator_snapshot(self, wait: float) -> tuple[int, float, int, list[Position]]:
        """An iterator reads every page at one snapshot, as Milvus's do: the first page at a
        fresh stamp (as a Strong read, whatever the level: an iterator sees at least what
        was written before it began), later pages at the stamp they send as their guarantee,
        the first page's (its reply's ``session_ts``)."""
        pchannels = self.info.pchannels
        if self._spec.guarantee_ts > EVENTUALLY_TS:
            snapshot = self._spec.guarantee_ts
            return snapshot, wait, snapshot, self._proxy.fences_for(pchannels, snapshot)
        snapshot, fences = self._proxy.strong_read(pchannels)
        return snapshot, wait, snapshot, fences

    def _shard_read(self) -> dict[str, Any]:
        """What every shard read request carries, searches and queries alike: the shards,
        the snapshot it reads at (and may wait for), the filter and the columns to return."""
        spec = self._spec
        ts, wait, travel, fences = self._guarantee()
        return {
            "collection_id": self.info.collection_id,
            "vchannels": self.info.vchannels,
            "guarantee_ts": ts,
            "wait_timeout_s": wait,
            "travel_ts": travel,
            "strict_travel": not spec.iterator,
            "fences": fences,
            "expire_ts": self._expire_ts(travel),
            "expr": spec.expr,
            "expr_params": spec.expr_params,
            "timezone": self.zone,
            "partition_ids": self.partition_ids,
            "output_fields": self._fetched(self.outputs),
        }

    def _expire_ts(self, travel: int) -> int:
        """The oldest insert stamp this read returns: the collection's TTL counted back from
        the time it reads at (now, or the snapshot it travels to; Milvus's proxy sends the
        same bound with each read), or its last truncation."""
        read_ms = timestamp.physical_ms(travel) if travel else timestamp.now_ms()
        return collection_properties.oldest_visible(self.info, read_ms, travel)

    def _fan_out(self, call: Any) -> list[Any]:
        """Run ``call(node, vchannels)`` on every node leading this collection's shards in
        one replica (replicas take turns, read by read).

        The placement comes from the proxy's cache. When a node of the replica is gone or no
        longer serves a shard, the read goes to the next replica; when every replica fails
        so, it asks the coordinator again and, if the shards moved, runs once more.
        """
        shards = self._proxy.shards
        replicas = shards.get(self.info).replicas
        first = self._proxy.next_replica(len(replicas))
        failure: MilvusError | None = None
        for turn in range(len(replicas)):
            try:
                return self._fan_out_to(replicas[(first + turn) % len(replicas)], call)
            except MilvusError as exc:
                if exc.code not in (Code.SERVICE_NOT_READY, Code.SERVICE_UNAVAILABLE):
                    raise
                failure = exc
        fresh = shards.refresh(self.info).replicas
        if fresh == replicas or not fresh:
            assert failure is not None
            raise failure
        return self._fan_out_to(fresh[first % len(fresh)], call)

    def _fan_out_to(self, leaders: dict[str, int], call: Any) -> list[Any]:
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


@dataclass(frozen=True)
class _Names:
    """What a search's names resolve to against one version of a collection's meta: its
    vector field, metric and output fields."""

    field: FieldSchema
    metric: str
    outputs: Outputs
    #: the collection's scalar indexes (``CollectionInfo.scalar_indexes``)
    scalar_indexes: dict[str, str]


#: (id of a CollectionInfo, anns_field, metric_type, output fields) -> (that info, its
#: _Names): a client's searches name the same things again and again, and a DDL replaces
#: the cached CollectionInfo (a new object), so entries of an older one are never found
_NAMES: dict[tuple[Any, ...], tuple[CollectionInfo, _Names]] = {}
_NAMES_KEPT = 256


def _resolved_names(
    info: CollectionInfo, anns_field: str, metric_type: str, output_fields: list[str]
) -> _Names:
    key = (id(info), anns_field, metric_type, *output_fields)
    found = _NAMES.get(key)
    if found is not None and found[0] is info:
        return found[1]
    names = _resolve_names(info, anns_field, metric_type, output_fields)
    if len(_NAMES) >= _NAMES_KEPT:
        _NAMES.clear()
    _NAMES[key] = (info, names)
    return names


def _resolve_names(
    info: CollectionInfo, anns_field: str, metric_type: str, output_fields: list[str]
) -> _Names:
    """The checks of a search that depend only on the collection and the names it uses."""
    schema = info.schema
    if not anns_field:
        vector_fields = schema.vector_fields
        if len(vector_fields) != 1:
            raise errors.invalid("anns_field is required: the collection has several vectors")
        anns_field = vector_fields[0].name
    field = schema.field(anns_field)
    if field is None or not field.is_vector:
        raise errors.invalid(f"anns_field {anns_field} is not a vector field")
    index = info.index_on(field.name)
    metric = index.metric_type if index else _default_metric(field)
    if metric_type and metric_type.upper() != metric:
        raise errors.invalid(
            f"metric type not match: invalid parameter[expected={metric}][actual={metric_type}]"
        )
    outputs = resolve_outputs(schema, output_fields)
    return _Names(field, metric, outputs, info.scalar_indexes())


def _default_metric(field: FieldSchema) -> str:
    """A search's metric when the field has no index: BM25 for a BM25 function's output."""
    if field.is_function_output:
        return functions.BM25
    return vector_types.kind_of(field.data_type).default_metric


def _for_shards(request: _ShardRequest, vchannels: list[str]) -> _ShardRequest:
    """``request`` for the node leading ``vchannels``: itself when that node leads every
    shard (one node: no copy of the request per read)."""
    if vchannels == request.vchannels:
        return request
    return replace(request, vchannels=vchannels)


def _check_queries(field: FieldSchema, vectors: np.ndarray | list[bytes]) -> None:
    """Query vectors must have the field's shape (sparse ones any number of entries)."""
    if field.data_type == DataType.SPARSE_FLOAT_VECTOR:
        if isinstance(vectors, np.ndarray):
            raise errors.invalid(
                f"vector field {field.name} is sparse: search it with sparse vectors"
            )
        return
    width = row_width(field.data_type, field.dim)
    if not isinstance(vectors, np.ndarray) or vectors.ndim != 2 or vectors.shape[1] != width:
        raise errors.invalid(f"vector dimension mismatch: field {field.name} has {field.dim}")


class SearchTask(_ReadTask):
    _spec: SearchSpec

    def pre_execute(self) -> None:
        self._resolve_common()
        spec = self._spec
        names = _resolved_names(self.info, spec.anns_field, spec.metric_type, spec.output_fields)
        spec.anns_field, self.metric = names.field.name, names.metric
        self.outputs = self._with_times(names.outputs)
        self.scalar_indexes = names.scalar_indexes
        _check_queries(names.field, spec.vectors)
        if spec.limit < 1 or spec.offset < 0:
            raise errors.invalid(
                f"limit must be 1 or more and offset 0 or more, got {spec.limit} and {spec.offset}"
            )
        self._check_grouping()
        limits.check_search(
            self._proxy.config.quota,
            len(spec.vectors),
            (spec.limit + spec.offset) * spec.group_size,
        )
        band = band_of(self.metric, spec.params)  # a band that cannot hold a hit: client's error
        if band is not None and spec.group_by_field:
            raise errors.invalid("Not allowed to do range-search when doing search-group-by")
        if names.field.data_type == DataType.SPARSE_FLOAT_VECTOR:
            try:
                vector_types.drop_ratio(spec.params)
            except ValueError as exc:
                raise errors.invalid(str(exc)) from None
        if self.metric == functions.BM25:
            index = self.info.index_on(spec.anns_field)
            spec.params = functions.bm25_params(index.params if index else {}, spec.params)

    def _check_grouping(self) -> None:
        spec = self._spec
        if spec.group_by_field:
            group_by_field(self.info.schema, spec.group_by_field)
        if spec.group_size < 1:
            raise errors.invalid(f"group_size must be 1 or more, got {spec.group_size}")

    def execute(self) -> None:
        spec = self._spec
        topk = spec.limit + spec.offset
        request = ShardSearchRequest(
            **self._shard_read(),
            anns_field=spec.anns_field,
            vectors=spec.vectors,
            metric_type=self.metric,
            topk=topk,
            search_params=spec.params,
            group_by=spec.group_by_field,
            group_size=spec.group_size,
            scalar_indexes=self.scalar_indexes,
        )
        if spec.group_by_field:
            self.hits = self._search_groups(request)
        elif self.order_by:
            best = _ordered(merge_hits(self._search(request), topk), self.order_by)
            self.hits = _page(best, spec.offset, spec.limit)
        else:
            self.hits = _page(merge_hits(self._search(request), topk), spec.offset, spec.limit)
        self.hits.snapshot_ts = request.travel_ts
        if spec.round_decimal >= 0:
            self.hits.scores = np.round(self.hits.scores, spec.round_decimal)

    def _search(self, request: ShardSearchRequest) -> list[SearchHits]:
        return self._fan_out(lambda node, vchs: node.search(_for_shards(request, vchs)))

    def _search_groups(self, request: ShardSearchRequest) -> SearchHits:
        """The best groups, then (``group_size > 1``) every shard's hits of those groups
        (services/common/grouping.py says why)."""
        spec = self._spec
        # ORDER BY orders the best ``offset + limit`` groups, then pages them
        limit, offset = (request.topk, 0) if self.order_by else (spec.limit, spec.offset)
        if spec.group_size == 1:
            hits = merge_groups(self._search(request), limit, 1, offset)
        else:
            best = merge_groups(self._search(replace(request, group_size=1)), request.topk, 1)
            chosen = list(dict.fromkeys(best.groups or []))
            if not chosen:
                return best
            expr, params = restrict_to_groups(
                request.expr, request.expr_params, spec.group_by_field, chosen
            )
            narrowed = replace(request, expr=expr, expr_params=params, topk=len(chosen))
            hits = merge_groups(self._search(narrowed), limit, spec.group_size, offset)
        if self.order_by:
            hits = _ordered_groups(hits, self.order_by, spec.offset, spec.limit)
        return hits

    def post_execute(self) -> tuple[CollectionInfo, SearchHits, Outputs]:
        return self.info, self.hits, self.outputs


def _page(hits: SearchHits, offset: int, limit: int) -> SearchHits:
    if offset == 0 and all(c <= limit for c in hits.counts):
        return hits
    starts = np.concatenate([[0], np.cumsum(hits.counts)]).astype(np.int64)
    keep = [
        np.arange(s + offset, min(s + offset + limit, e)) for s, e in itertools.pairwise(starts)
    ]
    return _taken(hits, keep)


def _taken(hits: SearchHits, keep: list[np.ndarray]) -> SearchHits:
    """The hits at ``keep``'s positions, one array of them per query."""
    index = np.concatenate(keep) if keep else np.empty(0, np.int64)
    return SearchHits(
        hits.metric_type,
        [len(k) for k in keep],
        take(hits.pks, index),
        hits.scores[index],
        {n: take(v, index) for n, v in hits.fields.items()},
        None if hits.groups is None else take(hits.groups, index),
    )


def _ordered(hits: SearchHits, keys: tuple[OrderKey, ...]) -> SearchHits:
    """Each query's hits in ORDER BY order (ties keep their order by score)."""
    order = _hit_order(hits, keys)
    starts = np.concatenate([[0], np.cumsum(hits.counts)]).astype(np.int64)
    return _taken(hits, [order[s:e] for s, e in itertools.pairwise(starts)])


def _ordered_groups(
    hits: SearchHits, keys: tuple[OrderKey, ...], offset: int, limit: int
) -> SearchHits:
    """A grouping search's groups in ORDER BY order of each group's best hit, then the page
    ``[offset, offset + limit)`` of groups; a group's hits keep their order."""
    groups = as_values(hits.groups)
    place = np.empty(len(groups), np.int64)  # each hit's place in ORDER BY order
    place[_hit_order(hits, keys)] = np.arange(len(groups))
    starts = np.concatenate([[0], np.cumsum(hits.counts)]).astype(np.int64)
    keep = []
    for s, e in itertools.pairwise(starts):
        members: dict[Any, list[int]] = {}
        for i in range(s, e):
            members.setdefault(groups[i], []).append(i)
        chosen = sorted(members, key=lambda g: place[members[g][0]])[offset : offset + limit]
        keep.append(np.array([i for g in chosen for i in members[g]], dtype=np.int64))
    return _taken(hits, keep)


def _hit_order(hits: SearchHits, keys: tuple[OrderKey, ...]) -> np.ndarray:
    """Every hit's position, in ORDER BY order within each query (ties keep score order)."""
    query = np.repeat(np.arange(hits.nq), hits.counts)
    return order_of(hits.fields, keys, hits.pks, ties_by_pk=False, within=query)


class QueryTask(_ReadTask):
    _spec: QuerySpec

    def pre_execute(self) -> None:
        self._resolve_common()
        spec = self._spec
        self.aggregation = parse_aggregation(spec.output_fields, spec.group_by, self.info.schema)
        asked = [f.strip().lower() for f in spec.output_fields]
        self.count_only = self.aggregation is None and asked == [COUNT_STAR]
        rows = self.aggregation is None and not self.count_only  # an answer row per entity
        if rows and not spec.expr.strip() and spec.limit is None:
            raise errors.invalid("empty expression should be used with limit")
        if spec.limit is not None and (spec.limit < 0 or spec.offset < 0):
            raise errors.invalid("limit and offset must not be negative")
        if self.count_only:
            self.outputs = Outputs([], [COUNT_STAR], pk=False)
        elif self.aggregation is not None:
            self.outputs = self._aggregated(self.aggregation)
        else:  # the reply always carries the pk column, listed only when asked for (Milvus)
            self.outputs = self._with_times(resolve_outputs(self.info.schema, spec.output_fields))

    def _aggregated(self, aggregation: Aggregation) -> Outputs:
        if self.order_by or self._spec.iterator:
            raise errors.invalid(
                "group_by_fields and aggregates cannot be used with order_by or an iterator"
            )
        schema = self.info.schema
        columns = {
            a.output: FieldSchema(0, a.output, a.result_type, nullable=True)
            for a in aggregation.aggregates
        }
        columns.update({key: schema.field(key) for key in aggregation.group_by})
        names = list(aggregation.outputs)
        return self._with_times(
            Outputs([], names, pk=False, aggregated=tuple(columns[n] for n in names))
        )

    def execute(self) -> None:
        spec = self._spec
        # an aggregation's limit counts groups: every matching row counts toward them
        whole = spec.limit is None or self.aggregation is not None
        per_shard = None if whole else spec.limit + spec.offset
        order_by = () if self.count_only else self.order_by
        request = ShardQueryRequest(
            **self._shard_read(),
            limit=per_shard,
            count_only=self.count_only,
            scalar_indexes=self.info.scalar_indexes(),
            order_by=order_by,
            aggregation=self.aggregation,
        )
        parts = self._fan_out(lambda node, vchs: node.query(_for_shards(request, vchs)))
        if self.aggregation is not None:
            groups = combine(self.aggregation, [p.fields for p in parts])
            self.rows = QueryRows([], finish(self.aggregation, groups, spec.offset, spec.limit))
        else:
            self.rows = merge_rows(parts, spec.offset, spec.limit, order_by)
        self.rows.snapshot_ts = request.travel_ts

    def post_execute(self) -> tuple[CollectionInfo, QueryRows, Outputs]:
        return self.info, self.rows, self.outputs
