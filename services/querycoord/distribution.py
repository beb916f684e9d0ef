"""Where sealed segments are served, and the ways that changes: placed, moved, placed again.

A shard's leader (the query node reading its channel) serves its growing rows; each sealed
segment is served by one node, the leader or any other, which the leader knows and the
nodes report (``NodeLoad``). The coordinator keeps no copy of this: every decision starts
from fresh reports, so a restart or a half-done move cannot leave two views.

Every change follows one order, so no read sees a gap or a duplicate: the destination
loads the segment with the shard's persisted deletes (deltalogs, up to the data node's
checkpoint read just before), the leader then switches its reads to it under its shard
lock and sends it the deletes applied since that checkpoint, and only then does the
source let its copy go.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.msgstream.channels import pchannel_of
from vectide.services.common.placement import NodeLoad
from vectide.services.common.schema import CollectionInfo
from vectide.services.common.segment import Deltalog, SegmentInfo
from vectide.services.querycoord.balance import (
    Balancer,
    Move,
    NodeState,
    PlacementError,
    SegmentLoad,
)

log = logging.getLogger(__name__)

#: a copy of a sealed segment: (segment id, the node serving it)
Copy = tuple[int, int]


@dataclass(frozen=True)
class Group:
    """A balancing group: its nodes (None: every node), the copies it may move (None: all),
    and nodes it must empty as if they were stopping (they left the group's resource group
    but still serve some of its copies)."""

    nodes: Collection[int] | None = None
    movable: set[Copy] | None = None
    draining: frozenset[int] = frozenset()


class Segments(Protocol):
    """The datacoord, as far as placing segments is concerned."""

    def segment(self, segment_id: int) -> SegmentInfo | None: ...
    def deltalogs(self, collection_id: int, vchannel: str) -> list[Deltalog]: ...
    def checkpoint(self, pchannel: str): ...


class Collections(Protocol):
    def describe_collection(self, *, collection_id: int) -> CollectionInfo: ...


@dataclass
class MoveCounts:
    done: int = 0
    failed: int = 0


class Distribution:
    def __init__(
        self, nodes, segments: Segments, collections: Collections, balancer: Balancer
    ) -> None:
        self._nodes = nodes
        self._segments = segments
        self._collections = collections
        self.balancer = balancer
        self.moves = MoveCounts()
        #: the nodes a leader's shard may place segments on (its replica's); None: any
        self.scope: Callable[[int, str], Collection[int] | None] = lambda leader, vchannel: None

    # -- what the nodes hold ---------------------------------------------------------------

    def reports(self) -> dict[int, NodeLoad]:
        """Every live node's report; a node that does not answer is left out (it holds
        nothing new until it does)."""
        reports = {}
        for node_id in self._nodes.live_nodes():
            try:
                reports[node_id] = self._nodes.node(node_id).load_report()
            except Exception as exc:
                log.warning("no load report", extra={"node": node_id, "error": str(exc)})
        return reports

    @staticmethod
    def states(
        reports: dict[int, NodeLoad],
        nodes: Collection[int] | None = None,
        movable: set[Copy] | None = None,
        draining: Collection[int] = (),
    ) -> list[NodeState]:
        """The balancer's view of ``nodes`` (None: every one): memory used and limit, and
        the sealed segments that may move: those a leader reads there (not a copy of a move
        half done; lost ones are placed again instead), of ``movable`` if given. Nodes in
        ``draining`` count as stopping: their segments move to the others."""
        lost = {s for r in reports.values() for s in r.lost}
        served = served_copies(reports) if movable is None else served_copies(reports) & movable
        return [
            NodeState(
                r.node_id,
                r.memory_used_mb,
                r.memory_limit_mb,
                {
                    s: mb
                    for s, mb in r.segments_mb.items()
                    if s not in lost and (s, r.node_id) in served
                },
                stopping=r.stopping or r.node_id in draining,
            )
            for r in reports.values()
            if nodes is None or r.node_id in nodes or r.node_id in draining
        ]

    def place(
        self,
        reports: dict[int, NodeLoad],
        segments: Sequence[SegmentInfo],
        row_bytes: int,
        nodes: Collection[int] | None = None,
    ) -> dict[int, int]:
        """Segment id -> the node to serve it, of ``nodes``: the least used once it holds it."""
        loads = [SegmentLoad(s.segment_id, s.num_rows * row_bytes / 2**20) for s in segments]
        states = self.states(reports, nodes)
        try:
            return {p.segment_id: p.node_ids[0] for p in self.balancer.place(states, loads)}
        except PlacementError as exc:
            return self._place_over_limit(states, loads, exc)

    @staticmethod
    def _place_over_limit(
        states: list[NodeState], loads: list[SegmentLoad], exc: PlacementError
    ) -> dict[int, int]:
        """No node has room under the limit: the data is served anyway (growing rows held it
        already), each segment on the node least used once it holds it, and a warning says
        the query nodes need more memory."""
        active = {n.node_id: n for n in states if not n.stopping}
        if not active:
            raise MilvusError(Code.SERVICE_NOT_READY, "no query node is available") from exc
        log.warning("query nodes over their memory limit; placing anyway", extra={"why": str(exc)})
        placed = {}
        for load in loads:
            free = [n for n in active.values() if load.segment_id not in n.segments] or list(
                active.values()
            )
            node = min(
                free, key=lambda n: (n.percentage_of(n.memory_used_mb + load.memory_mb), n.node_id)
            )
            placed[load.segment_id] = node.node_id
            active[node.node_id] = node.with_segment(load.segment_id, load.memory_mb)
        return placed

    def plan_moves(
        self,
        reports: dict[int, NodeLoad],
        vchannels: set[str],
        source: int,
        destinations: Sequence[int],
        segment_ids: Sequence[int],
        nodes: Collection[int] | None = None,
    ) -> list[Move]:
        """LoadBalance's moves: the named sealed segments of these shards (all that
        ``source`` serves of them when none are named), each to the destination least used
        once it holds it (when none are named: any other node of ``nodes``, the source's
        replica's), never to a node holding a copy already."""
        if source not in reports:
            raise MilvusError(Code.NODE_NOT_FOUND, f"node not found[node={source}]")
        missing = [n for n in destinations if n not in reports or n == source]
        if missing:
            raise MilvusError(Code.NODE_NOT_FOUND, f"node not found[node={missing[0]}]")
        mine = sorted(
            s
            for r in reports.values()
            for v, shard in r.leading.items()
            if v in vchannels
            for s, n in shard.items()
            if n == source
        )
        wanted = list(segment_ids) or mine
        unknown = [s for s in wanted if s not in mine]
        if unknown:
            raise MilvusError(
                Code.SEGMENT_NOT_FOUND,
                f"segment not found[segment={unknown[0]}]: node {source} does not serve it",
            )
        states = {s.node_id: s for s in self.states(reports, nodes)}
        targets = [states[n] for n in destinations or states if n != source and n in states]
        if not targets:
            raise MilvusError(Code.NODE_NOT_FOUND, "no other query node to move segments to")
        moves = []
        for segment_id in wanted:
            memory_mb = reports[source].segments_mb.get(segment_id, 0.0)
            free = [t for t in targets if segment_id not in t.segments]
            if not free:
                raise MilvusError(
                    Code.PARAMETER_INVALID,
                    f"segment {segment_id}: every destination holds a copy already",
                )
            target = min(
                free, key=lambda t: (t.percentage_of(t.memory_used_mb + memory_mb), t.node_id)
            )
            moves.append(Move(segment_id, source, target.node_id, memory_mb))
            targets = [t.with_segment(segment_id, memory_mb) if t is target else t for t in targets]
        return moves

    # -- changes ---------------------------------------------------------------------------

    def host(self, info: CollectionInfo, node_id: int, segment: SegmentInfo) -> int:
        """Load ``segment`` on ``node_id`` for its shard's leader; returns the checkpoint
        stamp its deletes reach (the leader sends the later ones when it attaches it)."""
        since, deltalogs = self._persisted_deletes(info.collection_id, segment.vchannel)
        self._nodes.node(node_id).host_segment(info, segment.vchannel, segment, deltalogs)
        return since

    def serve(
        self, info: CollectionInfo, leader_id: int, segment: SegmentInfo, node_id: int
    ) -> None:
        """Serve a sealed segment of ``leader_id``'s shard from ``node_id``: a handoff, a
        move, or a lost segment placed again."""
        vchannel = segment.vchannel
        leader = self._nodes.node(leader_id)
        if node_id == leader_id:
            since, deltalogs = self._persisted_deletes(info.collection_id, vchannel)
            leader.load_segment(vchannel, segment, deltalogs, since)
            return
        since = self.host(info, node_id, segment)
        leader.attach_segment(
            vchannel, segment.segment_id, node_id, since, segment.deletes_applied_ts
        )

    def move(self, move: Move, reports: dict[int, NodeLoad]) -> None:
        """One balancing move (or LoadBalance's), done in the order that leaves no gap."""
        leader_id, vchannel = self._leader_of(move.segment_id, move.source, reports)
        segment = self._segments.segment(move.segment_id)
        if segment is None:
            raise LookupError(f"segment {move.segment_id} is unknown")
        info = self._collections.describe_collection(collection_id=segment.collection_id)
        self.serve(info, leader_id, segment, move.destination)
        if move.source != leader_id:  # the leader let its own copy go when it switched
            self._nodes.node(move.source).release_hosted(vchannel, [move.segment_id])

    def run(self, moves: Iterable[Move], reports: dict[int, NodeLoad]) -> int:
        """Carry out moves in order; one that fails is logged and skipped."""
        done = 0
        for move in moves:
            try:
                self.move(move, reports)
            except Exception as exc:
                self.moves.failed += 1
                log.warning(
                    "segment move failed",
                    extra={"segment": move.segment_id, "to": move.destination, "error": str(exc)},
                )
                continue
            self.moves.done += 1
            done += 1
            log.info(
                "segment moved",
                extra={"segment": move.segment_id, "from": move.source, "to": move.destination},
            )
        return done

    def balance(self, groups: Iterable[Group]) -> int:
        """The design's memory-based balancing, a round per group of nodes (a replica's, or
        every node for collections with one replica) over the copies that group may move;
        returns the moves made."""
        done = 0
        for group in groups:
            reports = self.reports()
            states = self.states(reports, group.nodes, group.movable, group.draining)
            plan = self.balancer.plan(states)
            done += self.run(plan.moves, reports)
        return done

    def recover(self) -> int:
        """Place again the segments whose node is gone or missed deletes; returns how many."""
        reports = self.reports()
        placed = 0
        for leader in reports.values():
            for vchannel, served in leader.leading.items():
                for segment_id, holder in served.items():
                    if holder in reports and segment_id not in leader.lost:
                        continue
                    try:
                        self._replace(leader.node_id, holder, segment_id, vchannel, reports)
                    except Exception as exc:
                        log.warning(
                            "placing a lost segment failed; will retry",
                            extra={"segment": segment_id, "error": str(exc)},
                        )
                        continue
                    placed += 1
        return placed

    def _replace(
        self,
        leader_id: int,
        holder: int,
        segment_id: int,
        vchannel: str,
        reports: dict[int, NodeLoad],
    ) -> None:
        segment = self._segments.segment(segment_id)
        if segment is None:
            return
        info = self._collections.describe_collection(collection_id=segment.collection_id)
        if holder in reports:  # alive but missed deletes: its copy is stale
            self._nodes.node(holder).release_hosted(vchannel, [segment_id])
        nodes = self.scope(leader_id, vchannel)
        target = self.place(reports, [segment], info.row_bytes(), nodes)[segment_id]
        self.serve(info, leader_id, segment, target)
        log.warning(
            "lost segment placed again",
            extra={"segment": segment_id, "was": holder, "node": target},
        )

    def _persisted_deletes(self, collection_id: int, vchannel: str) -> tuple[int, list[Deltalog]]:
        """The checkpoint's stamp, read before the deltalogs: they hold every delete up to it."""
        checkpoint = self._segments.checkpoint(pchannel_of(vchannel))
        return (checkpoint.ts if checkpoint else 0), self._segments.deltalogs(
            collection_id, vchannel
        )

    @staticmethod
    def _leader_of(segment_id: int, holder: int, reports: dict[int, NodeLoad]) -> tuple[int, str]:
        """The leader reading ``segment_id`` from ``holder``, and the shard."""
        for report in reports.values():
            for vchannel, served in report.leading.items():
                if served.get(segment_id) == holder:
                    return report.node_id, vchannel
        raise LookupError(f"no live query node reads segment {segment_id} from node {holder}")


def served_copies(reports: dict[int, NodeLoad]) -> set[Copy]:
    """(segment, node) for every copy a leader reads."""
    return {
        (s, n) for r in reports.values() for served in r.leading.values() for s, n in served.items()
    }
