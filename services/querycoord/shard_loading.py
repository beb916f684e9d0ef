"""What a shard's leader loads, and where newly flushed segments go.

A new leader gets a load plan: the shard's persisted segments placed by memory use over its
replica's nodes (copies other nodes hold for the shard already stay there), the shard's
deltalogs, and the channel offset to replay from. Afterwards the handoff loop serves every
newly flushed segment, once per replica, from the least used node, and sends new index
files to whichever node serves a segment.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from vectide.services.common.errors import MilvusError
from vectide.services.common.index_spec import is_interim
from vectide.services.common.msgstream.channels import pchannel_of
from vectide.services.common.placement import NodeLoad
from vectide.services.common.ports import CollectionSource
from vectide.services.common.schema import CollectionInfo
from vectide.services.common.segment import PERSISTED, LoadPlan, SegmentInfo, SegmentState
from vectide.services.querycoord.distribution import Distribution

log = logging.getLogger(__name__)

#: (collection, segment, replica, index files)
_HandoffKey = tuple[int, int, int, tuple[str, ...]]


@dataclass(frozen=True)
class ShardLeaders:
    """One replica of a loaded collection, as the handoff loop walks it."""

    collection_id: int
    replica: int
    #: vchannel -> leader node
    shards: dict[str, int]
    #: the nodes its segments may go to (None: any)
    nodes: Collection[int] | None


class ShardLoader:
    def __init__(
        self, nodes, collections: CollectionSource, segments, distribution: Distribution
    ) -> None:
        self._nodes = nodes
        self._collections = collections
        self._segments = segments
        self._distribution = distribution
        #: what was handed off: new index files go out again
        self._handed: set[_HandoffKey] = set()
        #: a plan and a handoff never run at once: a handoff working from an older view of
        #: the replicas would place a segment the new leader's plan placed already
        self._lock = threading.Lock()
        #: (collection, replica, vchannel) -> the shard's leader now (None: not loaded);
        #: must not take the coordinator's lock (which is held around ``plan``)
        self.leader_now: Callable[[int, int, str], int | None] = lambda c, r, v: None

    # -- a new leader ----------------------------------------------------------------------

    def plan(
        self,
        info: CollectionInfo,
        vchannel: str,
        node_id: int,
        replica: int,
        nodes: Collection[int] | None,
    ) -> LoadPlan:
        """The shard's load plan for its new leader ``node_id`` in ``replica``: segments
        placed over ``nodes``, the shard's deltalogs, and the replay offset: the data
        node's checkpoint, or earlier if a segment not yet flushed started before it."""
        with self._lock:  # not beside a handoff (see _hand_off_once)
            pchannel = pchannel_of(vchannel)
            mine = [
                s for s in self._segments.segments(info.collection_id) if s.vchannel == vchannel
            ]
            checkpoint = self._segments.checkpoint(pchannel)
            replay = info.start_offsets[pchannel]
            if checkpoint is not None:
                unflushed = [
                    s.start_position.offset
                    for s in mine
                    if s.state in (SegmentState.GROWING, SegmentState.SEALED)
                    and s.start_position is not None
                ]
                replay = max(replay, min([checkpoint.offset, *unflushed]))
            persisted = [s for s in mine if s.state in PERSISTED]
            remote = self._place(info, vchannel, node_id, persisted, nodes)
            plan = LoadPlan(
                [s for s in persisted if s.segment_id not in remote],
                self._segments.deltalogs(info.collection_id, vchannel),
                replay,
                remote,
            )
            self._handed |= {_handoff_key(s, replica) for s in persisted}
            return plan

    def _place(
        self,
        info: CollectionInfo,
        vchannel: str,
        node_id: int,
        persisted: list[SegmentInfo],
        nodes: Collection[int] | None,
    ) -> dict[int, int]:
        """Segment id -> the other node serving it; the leader loads the rest. A copy a
        node holds for the shard and no live leader reads (its leader died) is reused."""
        reports = self._distribution.reports()
        read = {(s, n) for r in reports.values() for m in r.leading.values() for s, n in m.items()}
        by_id = {s.segment_id: s for s in persisted}
        targets = {
            s: n
            for n, r in reports.items()
            if nodes is None or n in nodes
            for s in r.hosted.get(vchannel, [])
            if s in by_id and (s, n) not in read
        }
        fresh = [s for s in persisted if s.segment_id not in targets]
        if fresh and reports:
            targets |= self._distribution.place(reports, fresh, info.row_bytes(), nodes)
        remote = {}
        for segment_id, target in targets.items():
            if target == node_id:
                continue
            try:
                self._distribution.host(info, target, by_id[segment_id])
            except Exception:
                log.exception(
                    "segment placement failed; the leader loads it",
                    extra={"segment": segment_id, "node": target},
                )
                continue
            remote[segment_id] = target
        return remote

    # -- handoff ---------------------------------------------------------------------------

    def handoff(self, replicas: Iterable[ShardLeaders]) -> int:
        """Serve newly flushed segments in every replica, placed where memory use is
        lowest, and send new index files to the node serving each copy; returns how many
        copies were handed off.

        A segment made by compaction waits for its index files when the collection has an
        approximate index, so a search never falls from the index to an exact scan (and
        back) while the swap goes on."""
        handed = 0
        reports: dict[int, NodeLoad] | None = None
        with self._lock:
            before = set(self._handed)
        walked: set[int] = set()
        current: set[_HandoffKey] = set()
        for replica in replicas:
            walked.add(replica.collection_id)
            indexed = self._needs_index_files(replica.collection_id)
            for segment in self._segments.segments(replica.collection_id, PERSISTED):
                leader_id = replica.shards.get(segment.vchannel)
                key = _handoff_key(segment, replica.replica)
                current.add(key)
                if leader_id is None or key in self._handed:
                    continue
                if segment.compacted_from and indexed and not segment.index_files:
                    continue
                reports = self._distribution.reports() if reports is None else reports
                if leader_id in reports and self._hand_off_once(
                    replica, segment, reports[leader_id], reports
                ):
                    handed += 1
        with self._lock:
            # forget the retired segments and replaced index files of the collections walked
            # (not what a plan added meanwhile: it may be of a replica this walk did not see)
            self._handed -= {k for k in before - current if k[0] in walked}
        return handed

    def _hand_off_once(
        self,
        replica: ShardLeaders,
        segment: SegmentInfo,
        leader: NodeLoad,
        reports: dict[int, NodeLoad],
    ) -> bool:
        """Hand ``segment`` off to its shard's leader in ``replica``, unless a plan placed it
        meanwhile or the shard has another leader now (the collection was released and
        loaded again while this round walked it)."""
        key = _handoff_key(segment, replica.replica)
        with self._lock:
            now = self.leader_now(replica.collection_id, replica.replica, segment.vchannel)
            if key in self._handed or now != leader.node_id:
                return False
            try:
                self._hand_off(segment, leader, reports, replica.nodes)
            except Exception:
                log.exception(
                    "handoff failed; will retry",
                    extra={"segment": segment.segment_id, "node": leader.node_id},
                )
                return False
            self._handed.add(key)
            return True

    def _hand_off(
        self,
        segment: SegmentInfo,
        leader: NodeLoad,
        reports: dict[int, NodeLoad],
        nodes: Collection[int] | None,
    ) -> None:
        vchannel = segment.vchannel
        info = self._collections.describe_collection(collection_id=segment.collection_id)
        holder = leader.holder(vchannel, segment.segment_id)
        if holder == leader.node_id:  # new index files
            self._nodes.node(holder).load_segment(vchannel, segment)
        elif holder is not None:
            self._nodes.node(holder).host_segment(info, vchannel, segment, [])
        elif segment.compacted_from:  # merged from segments served anywhere: at the leader
            self._distribution.serve(info, leader.node_id, segment, leader.node_id)
        else:
            row_bytes = info.row_bytes()
            target = self._distribution.place(reports, [segment], row_bytes, nodes)[
                segment.segment_id
            ]
            if target == leader.node_id:  # the growing rows' deletes move along
                self._nodes.node(target).load_segment(vchannel, segment)
            else:
                self._distribution.serve(info, leader.node_id, segment, target)
            reports[target].segments_mb[segment.segment_id] = segment.num_rows * row_bytes / 2**20
            leader.leading.setdefault(vchannel, {})[segment.segment_id] = target

    def _needs_index_files(self, collection_id: int) -> bool:
        try:
            info = self._collections.describe_collection(collection_id=collection_id)
        except MilvusError:
            return False
        return any(is_interim(index, info.schema) for index in info.indexes)


def _handoff_key(segment: SegmentInfo, replica: int) -> _HandoffKey:
    return segment.collection_id, segment.segment_id, replica, tuple(sorted(segment.index_files))
