"""Vectide's metric families, in one place as Milvus's pkg/metrics, so names stay consistent.

Counters and histograms are updated where things happen (the proxy's gRPC interceptor).
State (tsafe lag, segments, index queue, leadership) is read when Prometheus scrapes, from
sources the roles register on the ``StateGauge``s below: nothing runs between scrapes.
Everything lands in ``prometheus_client``'s default registry, with its process collector
(``process_resident_memory_bytes``, CPU seconds) and any metric another module defines.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from vectide.services.common.observability import StateGauge

PROXY_REQUESTS = Counter(
    "vectide_proxy_requests",
    "Milvus API requests by RPC and status (the Milvus error code, or the gRPC code).",
    ["method", "status"],
)
PROXY_LATENCY = Histogram(
    "vectide_proxy_request_latency_seconds",
    "Milvus API request latency by RPC and status.",
    ["method", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
PROXY_ROWS = Counter(
    "vectide_proxy_rows",
    "Rows written through the proxy, by operation (insert, delete, upsert).",
    ["op"],
)
FILTERED_READS = Counter(
    "vectide_querynode_filtered_reads",
    "Filtered reads of one store (a shard's growing rows or a sealed segment) by how the "
    "filter was answered: index (scalar indexes; only rows not indexed yet are scanned) or "
    "scan (every row).",
    ["path"],
)
SKIPPED_MESSAGES = StateGauge(
    "vectide_querynode_skipped_messages",
    "Channel records a query node skipped since it started (poison): undecodable ones, and "
    "messages that decoded but could not be applied (invalid).",
    ("node_id", "reason"),
)
DATANODE_SKIPPED = Counter(
    "vectide_datanode_skipped_records",
    "Channel records the data node skipped (poison), counted per micro-batch that persisted "
    "them: undecodable ones, and messages that do not fit their segment's other rows.",
)
TSAFE_LAG_MS = StateGauge(
    "vectide_querynode_tsafe_lag_ms",
    "How far a query node's shard trails the wall clock: now - tsafe (ms).",
    ("node_id", "vchannel"),
)
SEGMENTS = StateGauge(
    "vectide_datacoord_segments",
    "Segments known to the datacoord, by state (Growing, Sealed, Flushed, Indexed).",
    ("state",),
)
SEGMENT_ROWS = StateGauge(
    "vectide_datacoord_segment_rows",
    "Rows in segments by state (assigned rows while growing or sealed, persisted after).",
    ("state",),
)
FLUSH_LAG_MS = StateGauge(
    "vectide_datacoord_flush_lag_ms",
    "How far the data node's checkpoint of a channel trails the wall clock (ms).",
    ("pchannel",),
)
INDEX_BUILD_QUEUE = StateGauge(
    "vectide_index_build_queue",
    "Index builds by state: pending (a persisted segment without its file), failed.",
    ("state",),
)
QUERYNODE_MEMORY = StateGauge(
    "vectide_querynode_memory_percent",
    "A query node's estimated memory use (sealed segments and growing rows) as a percentage "
    "of its limit (query.memory_limit_mb): what the coordinator balances by.",
    ("node_id",),
)
QUERYNODE_SEGMENTS = StateGauge(
    "vectide_querynode_sealed_segments",
    "Sealed segments a query node holds in memory (its shards' own and those it serves for "
    "other leaders).",
    ("node_id",),
)
QUERYNODE_HELD_BYTES = StateGauge(
    "vectide_querynode_held_bytes",
    "Bytes a query node's stores hold, counted from their arrays, by store (growing, sealed, "
    "hosted) and kind (vectors, vector_index, fields, rows): what its RSS is spent on.",
    ("node_id", "store", "kind"),
)
QUERYNODE_ROWS = StateGauge(
    "vectide_querynode_rows",
    "Rows a query node holds in memory, growing and sealed.",
    ("node_id",),
)
SEGMENT_MOVES = StateGauge(
    "vectide_querycoord_segment_moves",
    "Sealed segments moved between query nodes since the coordinator started (balancing and "
    "LoadBalance), by outcome: done or failed.",
    ("outcome",),
)
LEADER = StateGauge(
    "vectide_leader",
    "1 when this process is the active one of its role, 0 while it waits as standby.",
    ("role",),
)
