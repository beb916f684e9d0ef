"""The proxy's logic behind the Milvus API, in Vectide's own types (no protobuf, no gRPC).

The proxy keeps no state that matters for correctness besides its in-flight writes: meta is
cached from the rootcoord, shard placement comes from the querycoord, data goes to the
channels. Any number of proxies can serve the same cluster.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vectide.services.common import errors
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.expr import pk_terms
from vectide.services.common.expr.parser import path_text, split_sample
from vectide.services.common.index_spec import is_interim
from vectide.services.common.load_state import LOAD_STATE_LOADED
from vectide.services.common.msgstream.message import DataType, FieldColumn, Position, PrimaryKeys
from vectide.services.common.names import DEFAULT_DB, qualified
from vectide.services.common.pacer import Pacer
from vectide.services.common.results import QueryRows, SearchHits
from vectide.services.common.schema import (
    JSON_PATH,
    CollectionInfo,
    CollectionSchema,
    ConsistencyLevel,
    DatabaseInfo,
    FieldSchema,
    IndexInfo,
)
from vectide.services.common.segment import SegmentState
from vectide.services.proxy import limits, time_zones
from vectide.services.proxy.channels_time_ticker import AckedWriter, ChannelsTimeTicker
from vectide.services.proxy.context import (
    ChannelWriter,
    DataCoordPort,
    ProxyConfig,
    QueryCoordPort,
    QueryNodes,
    RootCoordPort,
)
from vectide.services.proxy.dml import DeleteTask, InsertTask, MutationResult
from vectide.services.proxy.dql import Outputs, QuerySpec, QueryTask, SearchSpec, SearchTask
from vectide.services.proxy.index_kinds import index_kind, scalar_index_type
from vectide.services.proxy.meta_cache import MetaCache
from vectide.services.proxy.segment_placement import (
    ServedSegment,
    load_reports,
    served_segments,
    shard_nodes,
)
from vectide.services.proxy.shard_cache import ShardLeaderCache
from vectide.services.proxy.task_scheduler import TaskScheduler

if TYPE_CHECKING:
    from vectide.services.proxy.imports import Importer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SegmentRows:
    """One segment as the segment-info RPCs report it."""

    segment_id: int
    partition_id: int
    vchannel: str
    state: str
    #: rows in its binlogs on S3
    num_rows: int
    #: rows written to it (the growing copy in the query nodes holds these)
    assigned_rows: int


class Proxy:
    def __init__(
        self,
        server_id: int,
        rootcoord: RootCoordPort,
        querycoord: QueryCoordPort,
        nodes: QueryNodes,
        writer: ChannelWriter,
        pchannels: Sequence[str],
        config: ProxyConfig | None = None,
        datacoord: DataCoordPort | None = None,
    ) -> None:
        self.server_id = server_id
        self.datacoord = datacoord
        self.rootcoord = rootcoord
        self.querycoord = querycoord
        self.nodes = nodes
        self.config = config or ProxyConfig()
        self.meta = MetaCache(rootcoord)
        self.shards = ShardLeaderCache(querycoord)
        #: reads take the replicas in turns
        self._replica_turns = itertools.count()
        self.ticker = ChannelsTimeTicker(pchannels, rootcoord.alloc_timestamp)
        self.writer = AckedWriter(writer.write, self.ticker)
        #: pchannel -> the fence the rootcoord answered the last report with
        self._fences: dict[str, Position] = {}
        self.report_pacer = Pacer(
            self.config.timetick_interval_ms / 1000, self.config.idle_timetick_interval_ms / 1000
        )
        self.scheduler = TaskScheduler(
            rootcoord.alloc_timestamp, self.ticker, self.config.max_concurrent_reads
        )
        #: runs bulk imports (set by the service, which knows the object store)
        self.importer: Importer | None = None

    def next_replica(self, replicas: int) -> int:
        """The replica the next read starts with (turns, so replicas share the reads)."""
        return next(self._replica_turns) % replicas if replicas else 0

    # -- timetick reports ------------------------------------------------------------------

    def report_timetick(self) -> None:
        """Promise the rootcoord a stamp per channel. Urgent after a finished write, a DDL or
        a Strong read (the rootcoord ticks at once); reported every fast period while this
        proxy or, by the rootcoord's answer, any proxy is active, so that the minimum the
        rootcoord takes over all proxies moves at once too."""
        urgent, wanted = self.ticker.take_urgent()
        promises, ends = self.ticker.promise()
        active, fences = self.rootcoord.report_timetick(
            self.server_id, promises, urgent, ends, self.ticker.written(), wanted
        )
        self._fences = {f.channel: f for f in fences}
        if urgent or active:
            self.report_pacer.activity(time.monotonic())

    def fences_for(self, pchannels: Iterable[str], ts: int) -> list[Position]:
        """Fences reaching a Bounded, Session or time-travel read's ``ts``: those of this
        proxy's last report when they all reach it (a report at most
        ``idle_timetick_interval_ms`` old does for Bounded, ``ts`` being 5 s back), else a
        Strong read's (a Session read right after its write, a proxy that has not reported
        since). Channels left without a fence get TimeTicks reaching ``ts``."""
        channels = set(pchannels)
        cached = self._fences
        fences = [f for ch in channels if (f := cached.get(ch)) is not None and f.ts >= ts]
        if len(fences) < len(channels):
            fences = self._fences_at(channels, self.rootcoord.alloc_timestamp(), ts)
        return fences

    def strong_read(self, pchannels: Iterable[str]) -> tuple[int, list[Position]]:
        """Stamp a Strong read of ``pchannels`` and fence those whose writers all promised
        that far: the query nodes answer it once they read up to the fences, and nothing is
        written for it."""
        ts = self.rootcoord.alloc_timestamp()
        return ts, self._fences_at(set(pchannels), ts, ts)

    def _fences_at(self, pchannels: set[str], at: int, ts: int) -> list[Position]:
        """Fences at ``at`` (a stamp just allocated) for a read that needs ``ts``. A channel
        without one (a write in flight, another proxy's promise not that recent) needs a
        TimeTick: ask for one reaching ``ts``."""
        promises, ends = self.ticker.promise(at_ts=at)
        fences = [
            f
            for f in self.rootcoord.read_fence(
                self.server_id, promises, ends, at, self.ticker.written()
            )
            if f.channel in pchannels
        ]
        if len(fences) < len(pchannels):
            fenced = {f.channel for f in fences}
            # report now: the next timetick then covers ``ts`` there
            self.ticker.wake({ch: ts for ch in pchannels - fenced})
        return fences

    def wake_timetick(self) -> None:
        """The rootcoord needs a fresh promise (another proxy's reader waits): report now."""
        self.ticker.wake()

    def invalidate_collection_cache(self, name: str) -> None:
        self.meta.invalidate(name)

    # -- collections -------------------------------------------------------------------------

    def create_collection(
        self,
        schema: CollectionSchema,
        shards_num: int,
        consistency_level: ConsistencyLevel,
        properties: dict[str, str],
        raw_schema: bytes,
        db_name: str = DEFAULT_DB,
    ) -> CollectionInfo:
        shards = shards_num or self.config.default_shards
        for vector in schema.vector_fields:
            if vector.data_type == DataType.SPARSE_FLOAT_VECTOR:
                continue  # sparse vectors have no dim
            limits.check_dim(self.config.quota, vector.name, vector.dim)
        limits.check_collection_count(self.config.quota, len(self.rootcoord.show_collections()))
        return self.scheduler.ddl(
            lambda ts: self.rootcoord.create_collection(
                ts, schema, shards, consistency_level, properties, raw_schema, db_name
            )
        )

    def drop_collection(self, name: str) -> None:
        info = self.meta.get(name)
        self.shards.invalidate(info.collection_id)
        self.querycoord.release_collection(info.collection_id)
        self.scheduler.ddl(lambda ts: self.rootcoord.drop_collection(ts, name))
        if self.datacoord is not None:
            self.datacoord.drop_collection(info.collection_id)
        self.meta.invalidate(name)

    def rename_collection(self, old: str, new_db: str, new_name: str) -> None:
        """``old`` is a reference; the collection keeps its id, channels and data."""
        self.scheduler.ddl(lambda ts: self.rootcoord.rename_collection(ts, old, new_db, new_name))
        self.meta.invalidate(old)

    def alter_collection(
        self, name: str, properties: dict[str, str], delete_keys: Sequence[str]
    ) -> None:
        """Set or delete a collection's properties (``name``: a reference, or an alias)."""
        self.scheduler.ddl(
            lambda ts: self.rootcoord.alter_collection(ts, name, properties, delete_keys)
        )
        self.meta.invalidate(name)

    def add_collection_field(self, name: str, added: FieldSchema) -> None:
        """AddCollectionField (``added`` checked by ``convert.added_field``)."""
        self.scheduler.ddl(lambda ts: self.rootcoord.add_collection_field(ts, name, added))
        self.meta.invalidate(name)

    def alter_collection_field(
        self, name: str, field_name: str, properties: dict[str, str], delete_keys: Sequence[str]
    ) -> None:
        self.scheduler.ddl(
            lambda ts: self.rootcoord.alter_collection_field(
                ts, name, field_name, properties, delete_keys
            )
        )
        self.meta.invalidate(name)

    def has_collection(self, name: str) -> bool:
        try:
            self.describe_collection(name)
        except MilvusError as exc:
            if exc.code == Code.COLLECTION_NOT_FOUND:
                return False
            raise
        return True

    def describe_collection(self, name: str = "", collection_id: int = 0) -> CollectionInfo:
        return self.rootcoord.describe_collection(name or None, collection_id)

    def show_collections(
        self, db_name: str = DEFAULT_DB, loaded_only: bool = False
    ) -> list[CollectionInfo]:
        """A database's collections; ``loaded_only`` keeps those loaded (ShowType InMemory)."""
        infos = self.rootcoord.show_collections(db_name)
        if not loaded_only:
            return infos
        return [
            c for c in infos if self.querycoord.load_state(c.collection_id)[0] == LOAD_STATE_LOADED
        ]

    # -- databases ---------------------------------------------------------------------------

    def create_database(self, name: str, properties: dict[str, str]) -> DatabaseInfo:
        return self.scheduler.ddl(lambda ts: self.rootcoord.create_database(ts, name, properties))

    def drop_database(self, name: str) -> None:
        self.scheduler.ddl(lambda ts: self.rootcoord.drop_database(ts, name))

    def alter_database(
        self, name: str, properties: dict[str, str], delete_keys: Sequence[str]
    ) -> DatabaseInfo:
        return self.scheduler.ddl(
            lambda ts: self.rootcoord.alter_database(ts, name, properties, delete_keys)
        )

    def list_databases(self) -> list[DatabaseInfo]:
        return self.rootcoord.list_databases()

    def describe_database(self, name: str) -> DatabaseInfo:
        return self.rootcoord.describe_database(name)

    # -- aliases (references: names qualified by their database) ----------------------------

    def create_alias(self, collection: str, alias: str) -> None:
        self.scheduler.ddl(lambda ts: self.rootcoord.create_alias(ts, collection, alias))
        self.meta.invalidate(alias)

    def alter_alias(self, collection: str, alias: str) -> None:
        self.scheduler.ddl(lambda ts: self.rootcoord.alter_alias(ts, collection, alias))
        self.meta.invalidate(alias)

    def drop_alias(self, alias: str) -> None:
        self.scheduler.ddl(lambda ts: self.rootcoord.drop_alias(ts, alias))
        self.meta.invalidate(alias)

    def describe_alias(self, alias: str) -> str:
        return self.rootcoord.describe_alias(alias)

    def list_aliases(self, db_name: str, collection: str = "") -> list[str]:
        return self.rootcoord.list_aliases(db_name, collection)

    # -- partitions --------------------------------------------------------------------------

    def create_partition(self, collection: str, partition: str) -> None:
        if any(f.is_partition_key for f in self.meta.get(collection).schema.fields):
            raise errors.invalid("disable create partition if partition key mode is used")
        self.scheduler.ddl(lambda ts: self.rootcoord.create_partition(ts, collection, partition))
        self.meta.invalidate(collection)

    def drop_partition(self, collection: str, partition: str) -> None:
        info = self.meta.get(collection)
        part = info.partition(partition)
        if part is not None:
            state, _ = self.querycoord.load_state(info.collection_id, [part.partition_id])
            if state == LOAD_STATE_LOADED:
                raise errors.invalid(
                    "partition cannot be dropped, partition is loaded, please release it first"
                )
        self.scheduler.ddl(lambda ts: self.rootcoord.drop_partition(ts, collection, partition))
        self.meta.invalidate(collection)

    def show_partitions(self, collection: str) -> CollectionInfo:
        return self.describe_collection(collection)

    def partition_id(self, info: CollectionInfo, name: str) -> int:
        part = info.partition(name or "_default")
        if part is None:
            # the cache may predate a CreatePartition from another proxy
            ref = qualified(info.db_name, info.name)
            self.meta.invalidate(ref)
            part = self.meta.get(ref).partition(name)
        if part is None:
            raise errors.partition_not_found(name)
        return part.partition_id

    # -- indexes -----------------------------------------------------------------------------

    def create_index(
        self, collection: str, field_name: str, index_name: str, params: dict[str, Any]
    ) -> IndexInfo:
        info = self.meta.get(collection)
        field = info.schema.field(field_name)
        dynamic = info.schema.dynamic_field
        if field is None and dynamic is not None:  # a key of the dynamic field, as Milvus
            params.setdefault(JSON_PATH, path_text(dynamic.name, (field_name,)))
            field, field_name = dynamic, dynamic.name
        if field is None:
            raise errors.invalid(f"cannot create index on non-exist field: {field_name}")
        if field.is_vector:
            index_type, metric = index_kind(field, params)
        else:
            index_type, metric = scalar_index_type(field, params), ""
        index = IndexInfo(
            0, index_name, field_name, index_type, metric, {k: str(v) for k, v in params.items()}
        )
        created = self.scheduler.ddl(lambda ts: self.rootcoord.create_index(ts, collection, index))
        self.meta.invalidate(collection)
        return created

    def describe_index(
        self, collection: str, index_name: str = "", field_name: str = ""
    ) -> list[IndexInfo]:
        info = self.describe_collection(collection)
        found = [
            i
            for i in info.indexes
            if index_name in ("", i.index_name) and field_name in ("", i.field_name)
        ]
        if not found:
            raise MilvusError(Code.INDEX_NOT_FOUND, f"index not found[collection={collection}]")
        return found

    def index_progress(self, collection: str, index: IndexInfo) -> tuple[int, int, int]:
        """(total, indexed, pending) rows of ``index``, for DescribeIndex."""
        info = self.meta.get(collection)
        if self.datacoord is None:
            return 0, 0, 0
        needs_files = is_interim(index, info.schema)
        return self.datacoord.index_progress(info.collection_id, index.index_id, needs_files)

    def drop_index(self, collection: str, index_name: str) -> None:
        info = self.meta.get(collection)
        if self.querycoord.load_state(info.collection_id)[0] == LOAD_STATE_LOADED:
            raise errors.invalid(
                "index cannot be dropped, collection is loaded, please release it first"
            )
        self.scheduler.ddl(lambda ts: self.rootcoord.drop_index(ts, collection, index_name))
        self.meta.invalidate(collection)

    def truncate_collection(self, collection: str) -> None:
        self.scheduler.ddl(lambda ts: self.rootcoord.truncate_collection(ts, collection))
        self.meta.invalidate(collection)

    def alter_index(
        self,
        collection: str,
        index_name: str,
        properties: dict[str, str],
        delete_keys: Sequence[str],
    ) -> None:
        self.scheduler.ddl(
            lambda ts: self.rootcoord.alter_index(
                ts, collection, index_name, properties, delete_keys
            )
        )
        self.meta.invalidate(collection)

    # -- load --------------------------------------------------------------------------------

    def load_collection(
        self, collection: str, replica_number: int = 1, resource_groups: Sequence[str] = ()
    ) -> None:
        collection_id = self.meta.get(collection).collection_id
        self.shards.invalidate(collection_id)
        self.querycoord.load_collection(
            collection_id, max(replica_number, 1), list(resource_groups)
        )

    def release_collection(self, collection: str) -> None:
        collection_id = self.meta.get(collection).collection_id
        self.shards.invalidate(collection_id)
        self.querycoord.release_collection(collection_id)

    def load_partitions(
        self,
        collection: str,
        partitions: Sequence[str],
        replica_number: int = 1,
        resource_groups: Sequence[str] = (),
    ) -> None:
        info = self.meta.get(collection)
        ids = [self.partition_id(info, name) for name in partitions]
        self.shards.invalidate(info.collection_id)
        self.querycoord.load_partitions(
            info.collection_id, ids, max(replica_number, 1), list(resource_groups)
        )

    def release_partitions(self, collection: str, partitions: Sequence[str]) -> None:
        info = self.meta.get(collection)
        ids = [self.partition_id(info, name) for name in partitions]
        self.shards.invalidate(info.collection_id)
        self.querycoord.release_partitions(info.collection_id, ids)

    def load_state(self, collection: str, partitions: Sequence[str] = ()) -> tuple[int, int]:
        info = self.meta.get(collection)
        ids = [self.partition_id(info, name) for name in partitions]
        return self.querycoord.load_state(info.collection_id, ids)

    def replica_shards(self, info: CollectionInfo) -> list[dict[str, list[int]]]:
        """Per replica, vchannel -> the query nodes serving it, its leader first; empty
        while the collection is not loaded."""
        if self.querycoord.load_state(info.collection_id)[0] != LOAD_STATE_LOADED:
            return []
        replicas = self.querycoord.replicas(info.collection_id)
        reports = load_reports(self.nodes, [n for r in replicas for n in r.values()])
        return [shard_nodes(leaders, reports) for leaders in replicas]

    def readable_partitions(self, info: CollectionInfo, names: Sequence[str]) -> list[int]:
        """The partition ids a read covers ([] = every one): the named ones, each of which
        must be loaded (Milvus's code 201 otherwise), or every loaded one. From the cached
        placement (no coordinator call), asked again once for a partition it lacks; raises
        collection_not_loaded when nothing of the collection is loaded."""
        named = [self.partition_id(info, name) for name in names]
        loaded = self.shards.get(info).partitions
        if loaded is not None and not set(named) <= set(loaded):
            loaded = self.shards.refresh(info).partitions  # loaded through another proxy?
        if loaded is None:
            return named
        for name, partition_id in zip(names, named, strict=True):
            if partition_id not in loaded:
                raise MilvusError(
                    Code.PARTITION_NOT_LOADED, f"partition not loaded[partition={name}]"
                )
        return named or loaded

    # -- writes ------------------------------------------------------------------------------

    def insert(
        self, collection: str, partition: str, columns: dict[str, FieldColumn], num_rows: int
    ) -> MutationResult:
        info = self.meta.get(collection)
        return self.scheduler.run(InsertTask(self, info, partition, columns, num_rows))

    def upsert(
        self, collection: str, partition: str, columns: dict[str, FieldColumn], num_rows: int
    ) -> MutationResult:
        info = self.meta.get(collection)
        return self.scheduler.run(InsertTask(self, info, partition, columns, num_rows, upsert=True))

    def delete(
        self, collection: str, partition: str, expr: str, expr_params: dict[str, Any] | None = None
    ) -> MutationResult:
        info = self.meta.get(collection)
        pks = self._pks_to_delete(info, partition, expr, expr_params or {})
        return self.scheduler.run(DeleteTask(self, info, partition, pks))

    def delete_pks(self, collection: str, partition: str, pks: PrimaryKeys) -> MutationResult:
        """Delete by primary keys (Kafka tombstones); the keys' type must match the schema."""
        info = self.meta.get(collection)
        is_str = info.schema.primary.data_type == DataType.VARCHAR
        if is_str != isinstance(pks, list):
            kind = "strings" if is_str else "int64"
            raise errors.invalid(f"primary keys of collection {collection} must be {kind}")
        return self.scheduler.run(DeleteTask(self, info, partition, pks))

    def _pks_to_delete(
        self, info: CollectionInfo, partition: str, expr: str, params: dict[str, Any]
    ) -> PrimaryKeys:
        if not expr.strip():
            raise errors.invalid("delete needs an expression")
        pk = info.schema.primary
        is_str = pk.data_type == DataType.VARCHAR
        zone = time_zones.collection_zone(info)
        tree = limits.parse_filter(self.config.quota, expr, params, zone)
        if split_sample(tree)[1] is not None:
            raise errors.invalid(
                "delete does not take random_sample: it would delete rows picked at random"
            )
        terms = pk_terms(tree, pk.name)
        if terms is not None:
            bad = [t for t in terms if isinstance(t, str) != is_str or isinstance(t, bool)]
            if bad:
                raise errors.invalid(f"primary key {pk.name} values of the wrong type: {bad[:3]}")
            return list(terms) if is_str else np.asarray(terms, dtype=np.int64)
        # any other expression: delete what a Strong read matches right now
        rows = self.query(
            QuerySpec(
                collection_name=info.name,
                expr=expr,
                expr_params=params,
                partition_names=[partition] if partition else [],
                use_default_consistency=False,
                consistency_level=ConsistencyLevel.STRONG,
            )
        )[1]
        return rows.pks

    # -- reads -------------------------------------------------------------------------------

    def search(self, spec: SearchSpec) -> tuple[CollectionInfo, SearchHits, Outputs]:
        return self.scheduler.run(SearchTask(self, spec))

    def query(self, spec: QuerySpec) -> tuple[CollectionInfo, QueryRows, Outputs]:
        return self.scheduler.run(QueryTask(self, spec))

    def flush(self, collections: list[str]) -> dict[str, tuple[list[int], int]]:
        """Seal the collections' growing segments: per name, the segments the client waits
        for (GetFlushState) and the flush timestamp."""
        infos = [self.meta.get(name) for name in collections]
        if self.datacoord is None:
            ts = self.rootcoord.alloc_timestamp()
            return {info.name: ([], ts) for info in infos}
        flushed = {info.name: self.datacoord.flush(info.collection_id) for info in infos}
        # the data node's checkpoints must pass the flush stamps: tick there now, not at the
        # idle pace (nothing may have been written there since their last tick)
        self.ticker.wake({ch: flushed[info.name][1] for info in infos for ch in info.pchannels})
        return flushed

    def flush_all(self, db_name: str = "") -> int:
        """Seal every collection's segments (of ``db_name``, or of every database): FlushAll.
        Returns the stamp :meth:`flushed_all` is asked about."""
        flushed = self.flush(self._all_collections(db_name))
        return max((ts for _, ts in flushed.values()), default=self.rootcoord.alloc_timestamp())

    def flushed_all(self, flush_ts: int, db_name: str = "") -> bool:
        """GetFlushAllState: no collection in scope has a sealed segment left unpersisted,
        and every channel is persisted past ``flush_ts``."""
        if self.datacoord is None:
            return True
        for ref in self._all_collections(db_name):
            info = self.meta.get(ref)
            rows = self.datacoord.segment_rows(info.collection_id)
            sealed = [row[0] for row in rows if row[3] == SegmentState.SEALED]
            if not self.flushed(sealed, ref, flush_ts):
                return False
        return True

    def _all_collections(self, db_name: str) -> list[str]:
        dbs = [db_name] if db_name else [db.name for db in self.list_databases()]
        return [qualified(db, info.name) for db in dbs for info in self.show_collections(db)]

    def flushed(self, segment_ids: list[int], collection: str = "", flush_ts: int = 0) -> bool:
        """Whether a flush is done: its segments persisted and, with the collection and the
        flush's stamp, every channel of the collection persisted up to it (deletes too)."""
        if self.datacoord is None:
            return True
        pchannels = self.meta.get(collection).pchannels if collection and flush_ts else []
        return self.datacoord.flushed(segment_ids, pchannels, flush_ts)

    def persistent_segments(self, collection: str) -> tuple[int, list[SegmentRows]]:
        """(collection id, its segments as datacoord records them): GetPersistentSegmentInfo."""
        info = self.meta.get(collection)
        if self.datacoord is None:
            return info.collection_id, []
        rows = self.datacoord.segment_rows(info.collection_id)
        return info.collection_id, [SegmentRows(*r) for r in rows]

    def query_segments(self, collection: str) -> tuple[int, list[ServedSegment]]:
        """Segments the query nodes serve, with the node serving each and its memory: the
        sealed copies they loaded, and the growing segments of their shards
        (GetQuerySegmentInfo)."""
        collection_id, segments = self.persistent_segments(collection)
        if self.querycoord.load_state(collection_id)[0] != LOAD_STATE_LOADED:
            return collection_id, []
        replicas = self.querycoord.replicas(collection_id)
        reports = load_reports(self.nodes, [n for r in replicas for n in r.values()])
        return collection_id, [
            copy for leaders in replicas for copy in served_segments(segments, leaders, reports)
        ]

    def load_balance(
        self,
        collection: str,
        source: int,
        destinations: Sequence[int],
        segment_ids: Sequence[int],
    ) -> None:
        info = self.meta.get(collection)
        self.querycoord.load_balance(
            info.collection_id, source, list(destinations), list(segment_ids)
        )

    def row_count(self, collection: str, partition: str = "") -> int:
        """Rows visible now in a loaded collection (or one of its loaded partitions), as
        GetCollectionStatistics and GetPartitionStatistics report; 0 when not loaded."""
        info = self.meta.get(collection)
        parts = [self.partition_id(info, partition)] if partition else []
        if self.querycoord.load_state(info.collection_id, parts)[0] != LOAD_STATE_LOADED:
            return 0
        spec = QuerySpec(
            collection_name=collection,
            output_fields=["count(*)"],
            partition_names=[partition] if partition else [],
            use_default_consistency=False,
            consistency_level=ConsistencyLevel.EVENTUALLY,
        )
        return self.query(spec)[1].count or 0
