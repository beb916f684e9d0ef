"""Prometheus metrics of the ingest role (served by the process's /metrics endpoint)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

APPLIED = Counter(
    "vectide_ingest_applied_records",
    "Kafka records applied through the proxy (upserts and tombstones)",
    ["mapping"],
)
FAILED = Counter(
    "vectide_ingest_failed_records", "Kafka records sent to the dead-letter topic", ["mapping"]
)
LAG = Gauge(
    "vectide_ingest_lag_records",
    "Records of the mapping's topic not yet applied, over the partitions this worker owns",
    ["mapping"],
)
BATCH_SECONDS = Histogram(
    "vectide_ingest_batch_seconds",
    "Time to apply one batch: decode, proxy write, dead letters and progress",
    ["mapping"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
