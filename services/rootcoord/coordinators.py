"""The coordinator cores of one process, built from config over a MetaKV, a channel writer and
an object store (Milvus's mixcoord: rootcoord, datacoord, querycoord, index builds, GC).

No ZooKeeper, Kafka or S3 here: the coordinator service (service.py) passes the ZooKeeper KV,
the Kafka writer and S3; the fault harness (services/testing.py) passes memory ones and its
own clock. Both then start the same cores the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from vectide.services.common import collection_properties, timestamp
from vectide.services.common.config import Config
from vectide.services.common.kv.base import MetaKV
from vectide.services.common.pacer import Pacer
from vectide.services.common.time_travel import PURGE_SLACK_MS, Retention
from vectide.services.datacoord.compaction import CompactionPolicy
from vectide.services.datacoord.core import DataCoord, DataCoordConfig
from vectide.services.datacoord.gc import GarbageCollector, ObjectLister
from vectide.services.indexnode.core import IndexBuilder, ObjectStorePort
from vectide.services.querycoord.balance import BalanceConfig
from vectide.services.querycoord.core import NodeDirectory, QueryCoord
from vectide.services.rootcoord.core import CacheInvalidator, ChannelWriter, RootCoord, TickIndex


@dataclass
class Coordinators:
    rootcoord: RootCoord
    datacoord: DataCoord
    querycoord: QueryCoord
    indexes: IndexBuilder
    gc: GarbageCollector

    def start(self) -> None:
        """Take over: the TSO above every stamp handed out, then the catalog, the segment
        meta and the shard assignments, in that order (each needs the one before)."""
        self.rootcoord.start()
        self.datacoord.start()
        self.querycoord.start()


def live_partitions(rootcoord: RootCoord) -> set[tuple[int, int]]:
    """(collection, partition) ids that exist: segments of others are garbage."""
    return {
        (info.collection_id, part.partition_id)
        for info in rootcoord.show_collections()
        for part in info.partitions
    }


class CoordinatorStore(ObjectStorePort, ObjectLister, Protocol):
    """The object store as index builds and garbage collection use it."""


def build_coordinators(
    config: Config,
    kv: MetaKV,
    writer: ChannelWriter,
    nodes: NodeDirectory,
    store: CoordinatorStore,
    invalidator: CacheInvalidator | None = None,
    datanode_alive: Callable[[], bool] = lambda: True,
    clock_ms: Callable[[], int] = timestamp.now_ms,
    tick_index: TickIndex | None = None,
) -> Coordinators:
    """The cores, configured from ``config``, not started. ``clock_ms`` is the wall clock in
    milliseconds of the TSO and of the datacoord's idle sealing (a test injects its own)."""
    rootcoord = RootCoord(
        kv,
        writer,
        config.cluster.name,
        config.cluster.dml_channels,
        tso_window_ms=config.time.tso_window_ms,
        invalidator=invalidator,
        tick_pacer=Pacer(
            config.time.timetick_interval_ms / 1000,
            config.time.idle_broadcast_interval_ms / 1000,
            # fast for as long as the proxies' reports stay fast, then the long back-off
            hold_s=config.time.idle_timetick_interval_ms / 1000,
        ),
        clock_ms=clock_ms,
        tick_index=tick_index,
    )
    data = config.data
    datacoord = DataCoord(
        kv,
        rootcoord.alloc_timestamp,
        rootcoord.ids.alloc_one,
        DataCoordConfig(
            data.segment_max_rows,
            data.segment_idle_seal_s,
            CompactionPolicy(
                data.segment_max_rows,
                data.compaction_small_fraction,
                data.compaction_delete_ratio,
                Retention(data.retention_s),
            ),
            data.compaction_timeout_s,
            data.compaction_job_retention_s,
        ),
        datanode_alive=datanode_alive,
        clock=lambda: clock_ms() / 1000,
    )
    datacoord.on_seal = lambda pchannel, ts: rootcoord.want_ticks({pchannel: ts})
    rootcoord.on_live_proxies = datacoord.proxies_changed
    querycoord = QueryCoord(
        kv, rootcoord, nodes, datacoord, BalanceConfig.from_query_config(config.query)
    )
    # rows go (whole segments in garbage collection, single rows in compaction) once they
    # are past the TTL for every read a proxy may still serve: later than the slack a
    # proxy's clock may lag by, and than the time-travel window
    keep_ms = PURGE_SLACK_MS + int(data.retention_s * 1000)

    def expiries() -> dict[int, int]:
        return collection_properties.expiries(rootcoord.meta.list(), clock_ms() - keep_ms)

    datacoord.expiries = expiries
    gc = GarbageCollector(
        datacoord, store, querycoord, lambda: live_partitions(rootcoord), data.gc_delay_s, expiries
    )
    return Coordinators(
        rootcoord, datacoord, querycoord, IndexBuilder(datacoord, rootcoord, store), gc
    )
