"""The query coordinator's balancing decisions, by memory use: pure, no I/O.

Cluster state in (each query node's memory use and limit, the sealed segments it holds and
their memory sizes), decisions out (moves, placements). Nothing here talks to a node: the
caller measures, executes and measures again, so every rule is testable with plain numbers.
Not used by the running query coordinator yet (it still assigns whole shards, see core.py);
wiring it in is the next step of issue 18.

The rules are the seeds' memory-based balancing (Milvus 2.0's queryCoord):

* a round is triggered when a node uses more than ``overloaded_memory_threshold_percentage``
  of its limit, or two nodes differ by more than ``memory_usage_max_difference_percentage``;
* a segment moves from a source to a destination only if the destination stays at or under
  the threshold and the two nodes' difference shrinks;
* a stopping node hands every segment off, whatever the trigger;
* a segment's replicas (copies with the same segment id) never share a node.

Why a round can never oscillate: weigh each node's squared usage percentage by its memory
limit, ``P = sum(limit * pct**2)``. Moving ``s`` MB from a node at ``x`` % to one at ``y`` %
changes P by ``100 * s * (a + b - 2 * (x - y))``, where ``a`` and ``b`` are what ``s`` is in
percent of each node's limit; "the difference shrinks" is exactly ``0 < a + b < 2 * (x - y)``.
So every balancing move lowers P, no state comes back, and a round ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from vectide.services.common.config import QueryConfig

#: Milvus's queryCoord defaults, which the seeds' design names.
DEFAULT_OVERLOADED_PERCENTAGE = 90.0
DEFAULT_MAX_DIFFERENCE_PERCENTAGE = 30.0


class PlacementError(ValueError):
    """Segments cannot be placed as asked (too few nodes for the replicas, or no room)."""


@dataclass(frozen=True)
class BalanceConfig:
    overloaded_memory_threshold_percentage: float = DEFAULT_OVERLOADED_PERCENTAGE
    memory_usage_max_difference_percentage: float = DEFAULT_MAX_DIFFERENCE_PERCENTAGE
    #: A triggered round keeps moving until the spread is at most this fraction of the max
    #: difference. Stopping just under the trigger would let the next small growth trigger
    #: another round; settling at half leaves room (hysteresis).
    settle_ratio: float = 0.5

    @property
    def settled_difference(self) -> float:
        return self.memory_usage_max_difference_percentage * self.settle_ratio

    @classmethod
    def from_query_config(cls, query: QueryConfig) -> BalanceConfig:
        """The typed config's ``query`` keys of the same names."""
        return cls(
            overloaded_memory_threshold_percentage=query.overloaded_memory_threshold_percentage,
            memory_usage_max_difference_percentage=query.memory_usage_max_difference_percentage,
        )


@dataclass(frozen=True)
class SegmentLoad:
    """A sealed segment to place, and the memory a node needs to serve it."""

    segment_id: int
    memory_mb: float


@dataclass(frozen=True)
class NodeState:
    """One query node as measured: ``memory_used_mb`` is the whole process (segments, growing
    data, indexes, overhead), ``segments`` the sealed ones that can move (id -> MB)."""

    node_id: int
    memory_used_mb: float
    memory_limit_mb: float
    segments: Mapping[int, float] = field(default_factory=dict)
    stopping: bool = False

    def __post_init__(self) -> None:
        if self.memory_limit_mb <= 0:
            raise ValueError(f"query node {self.node_id}: memory limit must be positive")
        if self.memory_used_mb < 0:
            raise ValueError(f"query node {self.node_id}: memory used cannot be negative")

    @property
    def usage_percentage(self) -> float:
        return self.memory_used_mb * 100.0 / self.memory_limit_mb

    def percentage_of(self, memory_mb: float) -> float:
        return memory_mb * 100.0 / self.memory_limit_mb

    def with_segment(self, segment_id: int, memory_mb: float) -> NodeState:
        return replace(
            self,
            memory_used_mb=self.memory_used_mb + memory_mb,
            segments={**self.segments, segment_id: memory_mb},
        )

    def without_segment(self, segment_id: int) -> NodeState:
        segments = dict(self.segments)
        memory_mb = segments.pop(segment_id)
        return replace(self, memory_used_mb=self.memory_used_mb - memory_mb, segments=segments)


@dataclass(frozen=True)
class Move:
    """Load ``segment_id`` on ``destination``, then release it on ``source``."""

    segment_id: int
    source: int
    destination: int
    memory_mb: float


@dataclass(frozen=True)
class Placement:
    """Where a new segment's copies go: one node per replica, all distinct."""

    segment_id: int
    node_ids: tuple[int, ...]


@dataclass(frozen=True)
class BalancePlan:
    """The moves of one round, in order, and the segments of stopping nodes that no other node
    can take (each holds a copy already or lacks the memory): stopping the node loses them."""

    moves: tuple[Move, ...]
    stranded: tuple[int, ...] = ()


def spread(nodes: Iterable[NodeState]) -> float:
    """Max minus min usage percentage (0 for fewer than two nodes)."""
    usages = [n.usage_percentage for n in nodes]
    return max(usages) - min(usages) if len(usages) > 1 else 0.0


def apply_moves(nodes: Sequence[NodeState], moves: Iterable[Move]) -> list[NodeState]:
    """The cluster after ``moves``, as the balancer expects it (segment memory moves with the
    segment; nothing else changes). The simulation and the tests replay plans with it."""
    by_id = {n.node_id: n for n in nodes}
    for move in moves:
        _move(by_id, move.segment_id, move.source, move.destination)
    return [by_id[n.node_id] for n in nodes]


class Balancer:
    """Decides moves and placements for a cluster state; holds only its configuration."""

    def __init__(self, config: BalanceConfig | None = None) -> None:
        self.config = config or BalanceConfig()

    def needs_balance(self, nodes: Iterable[NodeState]) -> bool:
        """The design's trigger, over the nodes that are not stopping."""
        active = [n for n in nodes if not n.stopping]
        threshold = self.config.overloaded_memory_threshold_percentage
        return any(n.usage_percentage > threshold for n in active) or (
            spread(active) > self.config.memory_usage_max_difference_percentage
        )

    def plan(self, nodes: Sequence[NodeState]) -> BalancePlan:
        """One round: drain stopping nodes, then, if triggered, even out the others; again
        while draining makes progress, since evening out can make room for a segment that fit
        nowhere. A second round on the result has nothing to do."""
        _check_unique(nodes)
        state = {n.node_id: n for n in nodes}
        moves: list[Move] = []
        while True:
            drained, stranded = self._drain(state)
            moves += drained
            if self.needs_balance(state.values()):
                moves += self._even_out(state)
            if not drained or not stranded:
                return BalancePlan(tuple(moves), tuple(stranded))

    def place(
        self, nodes: Sequence[NodeState], segments: Iterable[SegmentLoad], replicas: int = 1
    ) -> list[Placement]:
        """Where new segments go when a collection loads: largest first, each copy on the node
        whose usage is lowest once it holds it (ties by node id), never two copies on a node."""
        if replicas < 1:
            raise PlacementError(f"replica number must be at least 1, got {replicas}")
        _check_unique(nodes)
        active = {n.node_id: n for n in nodes if not n.stopping}
        if len(active) < replicas:
            raise PlacementError(
                f"{replicas} replicas need {replicas} query nodes, {len(active)} available"
            )
        placements = []
        for segment in sorted(segments, key=lambda s: (-s.memory_mb, s.segment_id)):
            chosen = [self._place_copy(active, segment) for _ in range(replicas)]
            placements.append(Placement(segment.segment_id, tuple(chosen)))
        return placements

    def _place_copy(self, active: dict[int, NodeState], segment: SegmentLoad) -> int:
        candidates = [n for n in active.values() if segment.segment_id not in n.segments]
        if not candidates:
            raise PlacementError(f"segment {segment.segment_id}: every query node holds a copy")
        best = min(candidates, key=lambda n: (_usage_with(n, segment.memory_mb), n.node_id))
        if _usage_with(best, segment.memory_mb) > 100.0:
            raise PlacementError(
                f"segment {segment.segment_id} ({segment.memory_mb:.0f} MB) fits on no query "
                f"node: the emptiest would reach {_usage_with(best, segment.memory_mb):.0f}% "
                "of its memory limit"
            )
        active[best.node_id] = best.with_segment(segment.segment_id, segment.memory_mb)
        return best.node_id

    def _drain(self, state: dict[int, NodeState]) -> tuple[list[Move], list[int]]:
        """Every segment of a stopping node goes to the active node whose usage is lowest once
        it holds it (so under the threshold if any node can stay there). A leaving node's
        segments must go somewhere, so past the threshold if no node stays under it; but never
        past a node's limit (an out-of-memory kill loses all of its segments) nor to a node
        holding a copy: such segments are stranded."""
        moves: list[Move] = []
        stranded: list[int] = []
        for node in sorted((n for n in state.values() if n.stopping), key=lambda n: n.node_id):
            for segment_id, memory_mb in _largest_first(node.segments):
                candidates = [
                    n
                    for n in state.values()
                    if not n.stopping
                    and segment_id not in n.segments
                    and _usage_with(n, memory_mb) <= 100.0
                ]
                if not candidates:
                    stranded.append(segment_id)
                    continue
                best = min(candidates, key=lambda n: (_usage_with(n, memory_mb), n.node_id))
                moves.append(_move(state, segment_id, node.node_id, best.node_id))
        return moves, stranded

    def _even_out(self, state: dict[int, NodeState]) -> list[Move]:
        """Moves, one at a time, until no node is overloaded and the spread is settled, or no
        move is allowed. Each move is the best one between the fullest and the emptiest pair
        that has an allowed move at all."""
        moves: list[Move] = []
        while self._unsettled(state):
            move = self._next_move(state)
            if move is None:
                break
            moves.append(_move(state, move.segment_id, move.source, move.destination))
        return moves

    def _unsettled(self, state: dict[int, NodeState]) -> bool:
        active = [n for n in state.values() if not n.stopping]
        threshold = self.config.overloaded_memory_threshold_percentage
        return any(n.usage_percentage > threshold for n in active) or (
            spread(active) > self.config.settled_difference
        )

    def _next_move(self, state: dict[int, NodeState]) -> Move | None:
        active = sorted(
            (n for n in state.values() if not n.stopping),
            key=lambda n: (-n.usage_percentage, n.node_id),
        )
        for source in active:
            for destination in reversed(active):
                if destination.usage_percentage >= source.usage_percentage:
                    break
                move = self._best_between(source, destination)
                if move is not None:
                    return move
        return None

    def _best_between(self, source: NodeState, destination: NodeState) -> Move | None:
        """The allowed move from ``source`` to ``destination`` that leaves the two closest."""
        best: tuple[float, int] | None = None
        for segment_id, memory_mb in sorted(source.segments.items()):
            if segment_id in destination.segments:
                continue
            gap = self._gap_after(source, destination, memory_mb)
            if gap is not None and (best is None or gap < best[0]):
                best = (gap, segment_id)
        if best is None:
            return None
        segment_id = best[1]
        return Move(segment_id, source.node_id, destination.node_id, source.segments[segment_id])

    def _gap_after(
        self, source: NodeState, destination: NodeState, memory_mb: float
    ) -> float | None:
        """The pair's difference after moving ``memory_mb``, or None if the design forbids it:
        the destination would pass the threshold, or the difference would not shrink."""
        after_destination = _usage_with(destination, memory_mb)
        if after_destination > self.config.overloaded_memory_threshold_percentage:
            return None
        after_source = source.usage_percentage - source.percentage_of(memory_mb)
        before = source.usage_percentage - destination.usage_percentage
        gap = abs(after_source - after_destination)
        return gap if gap < before else None


def _usage_with(node: NodeState, memory_mb: float) -> float:
    return (node.memory_used_mb + memory_mb) * 100.0 / node.memory_limit_mb


def _largest_first(segments: Mapping[int, float]) -> list[tuple[int, float]]:
    return sorted(segments.items(), key=lambda item: (-item[1], item[0]))


def _move(state: dict[int, NodeState], segment_id: int, source: int, destination: int) -> Move:
    """Record a move in ``state`` (so later decisions of the round see it) and return it."""
    memory_mb = state[source].segments[segment_id]
    state[source] = state[source].without_segment(segment_id)
    state[destination] = state[destination].with_segment(segment_id, memory_mb)
    return Move(segment_id, source, destination, memory_mb)


def _check_unique(nodes: Sequence[NodeState]) -> None:
    ids = [n.node_id for n in nodes]
    if len(ids) != len(set(ids)):
        raise ValueError(f"query node ids repeat: {sorted(ids)}")
