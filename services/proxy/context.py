"""What the proxy's tasks and adapters see of the proxy: its ports to the other roles, its
config, and ``TaskContext``, the part of the ``Proxy`` a DML or DQL task uses.

Apart from services/proxy/core.py so that the tasks (dml.py, dql.py) need not import the
core that imports them: the core builds tasks, tasks see only this context.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from vectide.services.common.compaction_plan import JobState
from vectide.services.common.config import Config, QuotaConfig
from vectide.services.common.import_job import ImportJob
from vectide.services.common.msgstream.message import Message, Position
from vectide.services.common.names import DEFAULT_DB
from vectide.services.common.placement import NodeLoad
from vectide.services.common.requests import ShardQueryRequest, ShardSearchRequest
from vectide.services.common.results import QueryRows, SearchHits
from vectide.services.common.schema import (
    CollectionInfo,
    CollectionSchema,
    ConsistencyLevel,
    DatabaseInfo,
    FieldSchema,
    IndexInfo,
)
from vectide.services.common.time_travel import Retention
from vectide.services.proxy.channels_time_ticker import ChannelsTimeTicker
from vectide.services.proxy.meta_cache import MetaCache
from vectide.services.proxy.shard_cache import ShardLeaderCache


class RootCoordPort(Protocol):
    def alloc_timestamp(self, count: int = 1) -> int: ...
    def alloc_ids(self, count: int = 1) -> tuple[int, int]: ...
    def create_collection(
        self,
        ts: int,
        schema: CollectionSchema,
        shards_num: int,
        consistency_level: ConsistencyLevel,
        properties: dict[str, str],
        raw_schema: bytes,
        db_name: str = DEFAULT_DB,
    ) -> CollectionInfo: ...
    def drop_collection(self, ts: int, name: str) -> None: ...
    def describe_collection(
        self, name: str | None = None, collection_id: int = 0
    ) -> CollectionInfo: ...
    def show_collections(self, db_name: str | None = None) -> list[CollectionInfo]: ...
    def create_database(
        self, ts: int, name: str, properties: dict[str, str] | None = None
    ) -> DatabaseInfo: ...
    def drop_database(self, ts: int, name: str) -> None: ...
    def alter_database(
        self, ts: int, name: str, properties: dict[str, str], delete_keys: Sequence[str] = ()
    ) -> DatabaseInfo: ...
    def list_databases(self) -> list[DatabaseInfo]: ...
    def describe_database(self, name: str) -> DatabaseInfo: ...
    def rename_collection(self, ts: int, old: str, new_db: str, new_name: str) -> None: ...
    def alter_collection(
        self, ts: int, name: str, properties: dict[str, str], delete_keys: Sequence[str] = ()
    ) -> CollectionInfo: ...
    def add_collection_field(self, ts: int, name: str, added: FieldSchema) -> CollectionInfo: ...
    def alter_collection_field(
        self,
        ts: int,
        name: str,
        field_name: str,
        properties: dict[str, str],
        delete_keys: Sequence[str] = (),
    ) -> CollectionInfo: ...
    def create_alias(self, ts: int, collection: str, alias: str) -> None: ...
    def alter_alias(self, ts: int, collection: str, alias: str) -> None: ...
    def drop_alias(self, ts: int, alias: str) -> None: ...
    def describe_alias(self, alias: str) -> str: ...
    def list_aliases(self, db_name: str, collection: str = "") -> list[str]: ...
    def create_partition(self, ts: int, collection: str, partition: str) -> None: ...
    def drop_partition(self, ts: int, collection: str, partition: str) -> None: ...
    def create_index(self, ts: int, collection: str, index: IndexInfo) -> IndexInfo: ...
    def drop_index(self, ts: int, collection: str, index_name: str) -> None: ...
    def truncate_collection(self, ts: int, name: str) -> None: ...
    def alter_index(
        self,
        ts: int,
        collection: str,
        index_name: str,
        properties: dict[str, str],
        delete_keys: Sequence[str] = (),
    ) -> None: ...
    def report_timetick(
        self,
        source_id: int,
        channels: dict[str, int],
        urgent: bool = False,
        ends: dict[str, int] | None = None,
        written: dict[str, int] | None = None,
        wanted: dict[str, int] | None = None,
    ) -> tuple[bool, list[Position]]: ...
    def read_fence(
        self,
        source_id: int,
        channels: dict[str, int],
        ends: dict[str, int],
        ts: int,
        written: dict[str, int] | None = None,
    ) -> list[Position]: ...


class QueryCoordPort(Protocol):
    def load_collection(
        self, collection_id: int, replica_number: int = 1, resource_groups: Sequence[str] = ()
    ) -> None: ...
    def release_collection(self, collection_id: int) -> None: ...
    def load_state(
        self, collection_id: int, partition_ids: Sequence[int] = ()
    ) -> tuple[int, int]: ...
    def replicas(self, collection_id: int) -> list[dict[str, int]]: ...
    def load_partitions(
        self,
        collection_id: int,
        partition_ids: Sequence[int],
        replica_number: int = 1,
        resource_groups: Sequence[str] = (),
    ) -> None: ...
    def release_partitions(self, collection_id: int, partition_ids: Sequence[int]) -> None: ...
    def loaded_partitions(self, collection_id: int) -> list[int] | None: ...
    def load_balance(
        self,
        collection_id: int,
        source: int,
        destinations: Sequence[int],
        segment_ids: Sequence[int],
    ) -> None: ...
    def create_resource_group(
        self, name: str, config: Mapping[str, object] | None = None
    ) -> None: ...
    def update_resource_groups(self, configs: Mapping[str, Mapping[str, object]]) -> None: ...
    def drop_resource_group(self, name: str) -> None: ...
    def transfer_node(self, source: str, target: str, count: int) -> None: ...
    def transfer_replica(
        self, source: str, target: str, collection_id: int, count: int
    ) -> None: ...
    def list_resource_groups(self) -> list[str]: ...
    def describe_resource_group(self, name: str) -> dict[str, Any]: ...
    def replica_groups(self, collection_id: int) -> list[str]: ...


class DataCoordPort(Protocol):
    def assign_segment(
        self, collection_id: int, partition_id: int, vchannel: str, rows: int
    ) -> int: ...
    def flush(self, collection_id: int) -> tuple[list[int], int]: ...
    def flushed(
        self, segment_ids: list[int], pchannels: Sequence[str] = (), flush_ts: int = 0
    ) -> bool: ...
    def segment_rows(self, collection_id: int) -> list[tuple[int, int, str, str, int, int]]: ...
    def drop_collection(self, collection_id: int) -> None: ...
    def index_progress(
        self, collection_id: int, index_id: int, needs_files: bool
    ) -> tuple[int, int, int]: ...
    # compaction (services/proxy/grpc_compaction.py)
    def compact(self, collection_id: int) -> tuple[int, int]: ...
    def compaction_state(self, job_id: int) -> JobState: ...
    def compaction_plans(self, job_id: int) -> list[tuple[list[int], int]]: ...
    # bulk import records (services/proxy/imports.py)
    def new_import(self, job: ImportJob) -> ImportJob: ...
    def save_import(self, job: ImportJob) -> None: ...
    def import_job(self, job_id: int) -> ImportJob | None: ...
    def import_jobs(self, collection_id: int = 0) -> list[ImportJob]: ...


class QueryNodePort(Protocol):
    def load_report(self) -> NodeLoad: ...
    def search(self, req: ShardSearchRequest) -> SearchHits: ...
    def query(self, req: ShardQueryRequest) -> QueryRows: ...


class QueryNodes(Protocol):
    def node(self, node_id: int) -> QueryNodePort: ...


class ChannelWriter(Protocol):
    def write(self, messages: Sequence[tuple[str, Message]]) -> list[int]: ...


@dataclass
class ProxyConfig:
    graceful_time_ms: int = 5000
    max_timestamp_lag_ms: int = 10_000
    max_concurrent_reads: int = 16
    default_shards: int = 1
    #: report period while writes flow or the rootcoord says the cluster is active
    timetick_interval_ms: int = 200
    #: report period when nothing happened for a while (see services/common/pacer.py)
    idle_timetick_interval_ms: int = 1000
    #: resource limits of requests (nq, topk, dim, filters, collections)
    quota: QuotaConfig = field(default_factory=QuotaConfig)
    #: how far back reads may travel (``data.retention_s``)
    retention: Retention = field(default_factory=Retention)

    @classmethod
    def from_config(cls, config: Config) -> ProxyConfig:
        """The proxy's settings among the process's (``query.*``, ``time.*``, ``quota.*``,
        ``data.retention_s``)."""
        q = config.query
        return cls(
            q.graceful_time_ms,
            q.max_timestamp_lag_ms,
            q.max_concurrent_reads,
            config.service.default_shards,
            config.time.timetick_interval_ms,
            config.time.idle_timetick_interval_ms,
            config.quota,
            Retention(config.data.retention_s),
        )


class TaskContext(Protocol):
    """The proxy as its tasks use it (services/proxy/core.py's ``Proxy`` is one)."""

    server_id: int
    rootcoord: RootCoordPort
    datacoord: DataCoordPort | None
    nodes: QueryNodes
    writer: ChannelWriter
    config: ProxyConfig
    meta: MetaCache
    shards: ShardLeaderCache
    ticker: ChannelsTimeTicker

    def partition_id(self, info: CollectionInfo, name: str) -> int: ...
    def readable_partitions(self, info: CollectionInfo, names: Sequence[str]) -> list[int]: ...
    def next_replica(self, replicas: int) -> int: ...
    def strong_read(self, pchannels: Iterable[str]) -> tuple[int, list[Position]]: ...
    def fences_for(self, pchannels: Iterable[str], ts: int) -> list[Position]: ...
