"""What a query node reports of the data it holds: the query coordinator balances by it.

Sealed segments of a shard may live on any query node; the shard's leader (the node reading
its channel) knows where each one is served and scatters reads there. The coordinator reads
these reports instead of keeping a copy of the placement, so a restarted coordinator, a
restarted node or a move half done can never leave two views of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class NodeLoad:
    node_id: int
    #: the node's memory limit (``query.memory_limit_mb``, else its cgroup's or machine's)
    memory_limit_mb: float
    #: sealed segments held in this node's memory (its shards' own and those it holds for
    #: other leaders): segment id -> estimated MB
    segments_mb: dict[int, float] = field(default_factory=dict)
    #: growing rows of the shards it leads, estimated MB
    growing_mb: float = 0.0
    #: rows held, growing and sealed
    rows: int = 0
    #: the process's resident memory, MB (shared by every node of a standalone process)
    rss_mb: float = 0.0
    #: per shard it leads: sealed segment id -> the node serving it (its own id for its own)
    leading: dict[str, dict[int, int]] = field(default_factory=dict)
    #: per shard another node leads: the sealed segments held here for it
    hosted: dict[str, list[int]] = field(default_factory=dict)
    #: segments of its shards whose node stopped answering (reads of them fail until placed)
    lost: list[int] = field(default_factory=list)
    #: shutting down: its shards and segments are to be handed to other nodes first
    stopping: bool = False

    @property
    def memory_used_mb(self) -> float:
        return sum(self.segments_mb.values()) + self.growing_mb

    @property
    def memory_percentage(self) -> float:
        return 100.0 * self.memory_used_mb / self.memory_limit_mb if self.memory_limit_mb else 0.0

    def holder(self, vchannel: str, segment_id: int) -> int | None:
        """Where this leader serves ``segment_id`` of ``vchannel`` from (None: nowhere)."""
        return self.leading.get(vchannel, {}).get(segment_id)
