"""Read requests the proxy sends to the query nodes serving a collection's shards."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from vectide.services.common.msgstream.message import Position

if TYPE_CHECKING:
    from vectide.services.common.aggregation import Aggregation
    from vectide.services.common.order_by import OrderKey


@dataclass
class ShardSearchRequest:
    collection_id: int
    vchannels: list[str]
    anns_field: str
    vectors: np.ndarray
    metric_type: str
    #: per query, the best ``topk`` (limit + offset) hits of each shard
    topk: int
    guarantee_ts: int
    #: give up waiting for serviceable time after this long
    wait_timeout_s: float
    expr: str = ""
    expr_params: dict[str, Any] = field(default_factory=dict)
    partition_ids: list[int] = field(default_factory=list)
    output_fields: list[str] = field(default_factory=list)
    search_params: dict[str, Any] = field(default_factory=dict)
    #: grouping search: the scalar field hits are grouped by ("" for none); ``topk`` then
    #: counts groups of up to ``group_size`` hits each
    group_by: str = ""
    group_size: int = 1
    #: the collection's scalar indexes (field -> index type): a node serving segments
    #: loaded before one was created builds it on its first read
    scalar_indexes: dict[str, str] = field(default_factory=dict)
    #: read at exactly this snapshot (time travel; 0: at the tsafe found)
    travel_ts: int = 0
    #: a ``travel_ts`` a compaction overtook (deletes purged) refuses the read; False: the
    #: read is at the tsafe instead (an iterator's pages: its snapshot is best effort)
    strict_travel: bool = True
    #: a Strong read's fences (see ``tick_aligner``): ticks nobody wrote, one per pchannel
    fences: list[Position] = field(default_factory=list)
    #: rows inserted before this stamp have expired (the collection's TTL): the read skips
    #: them (0: none has)
    expire_ts: int = 0
    #: the zone of the filter's ISO literals without an offset (the proxy resolved it)
    timezone: str = "UTC"


@dataclass
class ShardQueryRequest:
    collection_id: int
    vchannels: list[str]
    guarantee_ts: int
    wait_timeout_s: float
    expr: str = ""
    expr_params: dict[str, Any] = field(default_factory=dict)
    partition_ids: list[int] = field(default_factory=list)
    output_fields: list[str] = field(default_factory=list)
    #: rows per shard, in primary-key order or ``order_by``'s (None: all)
    limit: int | None = None
    count_only: bool = False
    #: as ShardSearchRequest's
    scalar_indexes: dict[str, str] = field(default_factory=dict)
    #: read at exactly this snapshot (time travel; 0: at the tsafe found)
    travel_ts: int = 0
    #: as ShardSearchRequest's
    strict_travel: bool = True
    #: as ShardSearchRequest's
    fences: list[Position] = field(default_factory=list)
    #: as ShardSearchRequest's
    expire_ts: int = 0
    #: as ShardSearchRequest's
    timezone: str = "UTC"
    #: ORDER BY keys (services/common/order_by.py): a shard's first ``limit`` rows in their
    #: order, ties by primary key (empty: primary-key order)
    order_by: tuple[OrderKey, ...] = ()
    #: GROUP BY and aggregates (services/common/aggregation.py): a shard answers one partial
    #: row per group of its matching rows instead of the rows (``limit`` then unused)
    aggregation: Aggregation | None = None
