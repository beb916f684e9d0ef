"""The query side of `vectide status`: each query node's memory use, sealed segments and
rows, and the segment moves the coordinator made, read from the roles' /metrics (the same
figures Prometheus scrapes, so the two never disagree)."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families

_NODE_GAUGES = {
    "vectide_querynode_memory_percent": "memory_percent",
    "vectide_querynode_sealed_segments": "sealed_segments",
    "vectide_querynode_rows": "rows",
}
_MOVES = "vectide_querycoord_segment_moves"


def query_status(metrics_urls: Iterable[str], timeout_s: float = 1.0) -> dict[str, object]:
    """``{"nodes": [{node_id, memory_percent, sealed_segments, rows}], "segment_moves":
    {"done": n, "failed": n}}`` over the roles that answer."""
    nodes: dict[str, dict[str, float]] = {}
    moves: dict[str, int] = {}
    for url in metrics_urls:
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as reply:
                text = reply.read().decode()
        except (OSError, ValueError):
            continue
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in _NODE_GAUGES:
                    node = nodes.setdefault(sample.labels["node_id"], {})
                    node[_NODE_GAUGES[sample.name]] = round(sample.value, 1)
                elif sample.name == _MOVES:
                    moves[sample.labels["outcome"]] = int(sample.value)
    return {
        "nodes": [{"node_id": int(n), **figures} for n, figures in sorted(nodes.items())],
        "segment_moves": moves,
    }
