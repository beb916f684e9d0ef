"""Which query node serves each segment of a loaded collection, as the segment-info and
replica RPCs report it: read from the shard leaders' load reports (a sealed segment may be
served by any node; its shard's leader knows which)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from vectide.services.common.placement import NodeLoad


class Nodes(Protocol):
    def node(self, node_id: int) -> Any: ...


@dataclass(frozen=True)
class ServedSegment:
    segment: Any  # the proxy's SegmentRows
    node_id: int
    memory_mb: float


def load_reports(nodes: Nodes, leaders: Iterable[int]) -> dict[int, NodeLoad]:
    """The leaders' reports, and those of every node serving a segment for them."""
    reports = {n: nodes.node(n).load_report() for n in set(leaders)}
    holders = {h for r in list(reports.values()) for s in r.leading.values() for h in s.values()}
    for node_id in holders - set(reports):
        try:
            reports[node_id] = nodes.node(node_id).load_report()
        except Exception:  # a node going away: its segments are reported without a size
            continue
    return reports


def served_segments(
    segments: Iterable[Any], leaders: dict[str, int], reports: dict[int, NodeLoad]
) -> list[ServedSegment]:
    """Sealed segments where their leader serves them from, growing ones at the leader."""
    served = []
    for segment in segments:
        leader = reports.get(leaders.get(segment.vchannel, -1))
        if leader is None:
            continue
        if segment.state == "Growing":
            served.append(ServedSegment(segment, leader.node_id, 0.0))
            continue
        holder = leader.holder(segment.vchannel, segment.segment_id)
        if holder is None:
            continue
        held = reports.get(holder)
        memory_mb = held.segments_mb.get(segment.segment_id, 0.0) if held else 0.0
        served.append(ServedSegment(segment, holder, memory_mb))
    return served


def shard_nodes(leaders: dict[str, int], reports: dict[int, NodeLoad]) -> dict[str, list[int]]:
    """vchannel -> its leader first, then the other nodes serving its sealed segments."""
    nodes = {}
    for vchannel, leader in sorted(leaders.items()):
        report = reports.get(leader)
        holders = set(report.leading.get(vchannel, {}).values()) if report else set()
        nodes[vchannel] = [leader, *sorted(holders - {leader})]
    return nodes
