"""Query coordinator: which live query node serves each shard of each loaded collection.

Loading assigns every vchannel of the collection to the least-loaded live node and tells it
to watch; the assignment is persisted, so a restarted coordinator knows what is loaded. When
a node's session disappears, its shards move to live nodes (which replay them from the
collection's start offsets until segments are persisted on S3).
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Collection, Sequence
from typing import Protocol

from services.common import errors
from services.common.errors import Code, MilvusError
from services.common.kv.base import MetaKV
from services.common.msgstream.channels import pchannel_of
from services.common.msgstream.message import Position
from services.common.placement import NodeLoad
from services.common.ports import CollectionSource
from services.common.schema import CollectionInfo
from services.datacoord.segment import (
    PERSISTED,
    Deltalog,
    LoadPlan,
    SegmentInfo,
    SegmentState,
)
from services.querycoord.balance import BalanceConfig, Balancer
from services.querycoord.distribution import Distribution
from services.querynode.chunk_index import IndexSpec

log = logging.getLogger(__name__)

_LOADED = "querycoord/loaded"
#: ``{collection id}`` -> the partition ids loaded, for a collection loaded by partitions
_PARTITIONS = "querycoord/partitions"

#: common.proto LoadState values
LOAD_STATE_NOT_EXIST = 0
LOAD_STATE_NOT_LOAD = 1
LOAD_STATE_LOADING = 2
LOAD_STATE_LOADED = 3


class QueryNodePort(Protocol):
    def watch(
        self, collection: CollectionInfo, vchannel: str, plan: LoadPlan | None = None
    ) -> None: ...
    def load_segment(
        self,
        vchannel: str,
        segment: SegmentInfo,
        deltalogs: list[Deltalog] | None = None,
        since_ts: int = 0,
    ) -> bool: ...
    def host_segment(
        self,
        collection: CollectionInfo,
        vchannel: str,
        segment: SegmentInfo,
        deltalogs: list[Deltalog],
    ) -> bool: ...
    def attach_segment(
        self, vchannel: str, segment_id: int, node_id: int, since_ts: int
    ) -> None: ...
    def unwatch(self, vchannel: str) -> None: ...
    def held_segments(self) -> list[int]: ...
    def release_segments(self, vchannel: str, segment_ids: list[int]) -> int: ...
    def release_hosted(self, vchannel: str, segment_ids: list[int]) -> int: ...
    def load_report(self) -> NodeLoad: ...


class SegmentSource(Protocol):
    """The datacoord, as far as loading is concerned."""

    def segments(
        self, collection_id: int, states: tuple[SegmentState, ...] | None = None
    ) -> list[SegmentInfo]: ...
    def deltalogs(self, collection_id: int, vchannel: str) -> list[Deltalog]: ...
    def checkpoint(self, pchannel: str) -> Position | None: ...
    def segment(self, segment_id: int) -> SegmentInfo | None: ...


class NodeDirectory(Protocol):
    def live_nodes(self) -> list[int]: ...
    def node(self, node_id: int) -> QueryNodePort: ...


class QueryCoord:
    def __init__(
        self,
        kv: MetaKV,
        collections: CollectionSource,
        nodes: NodeDirectory,
        segments: SegmentSource | None = None,
        balance: BalanceConfig | None = None,
    ) -> None:
        self._segments = segments
        #: (segment, index files) already handed off: new index files go out again
        self._handed: set[tuple[int, tuple[str, ...]]] = set()
        #: where sealed segments are served (read from the nodes), and its changes
        self.distribution = (
            Distribution(nodes, segments, collections, Balancer(balance))
            if segments is not None
            else None
        )
        self._kv = kv
        self._collections = collections
        self._nodes = nodes
        self._lock = threading.RLock()
        #: collection id -> {vchannel: node id}
        self._assignments: dict[int, dict[str, int]] = {}
        #: collection id -> loaded partition ids, for collections loaded by partitions (a
        #: collection loaded whole is absent: every partition, later ones too, is loaded)
        self._partitions: dict[int, set[int]] = {}

    def start(self) -> None:
        with self._lock:
            self._assignments = {
                int(key.rsplit("/", 1)[1]): {k: int(v) for k, v in json.loads(raw).items()}
                for key, raw in self._kv.list_prefix(_LOADED).items()
            }
            self._partitions = {
                int(key.rsplit("/", 1)[1]): set(json.loads(raw))
                for key, raw in self._kv.list_prefix(_PARTITIONS).items()
            }
        self.rebalance()

    def load_collection(self, collection_id: int) -> None:
        """Load every partition, those created later included."""
        with self._lock:
            self._load_shards(collection_id)
            self._set_partitions(collection_id, None)

    def load_partitions(self, collection_id: int, partition_ids: Sequence[int]) -> None:
        """Load these partitions too (a collection loaded whole stays so). Every shard is
        watched either way, since a shard's channel carries all partitions; reads see only
        the loaded partitions' rows."""
        with self._lock:
            whole = collection_id in self._assignments and collection_id not in self._partitions
            self._load_shards(collection_id)
            if not whole:
                loaded = self._partitions.get(collection_id, set()) | set(partition_ids)
                self._set_partitions(collection_id, loaded)

    def release_partitions(self, collection_id: int, partition_ids: Sequence[int]) -> None:
        """Release these partitions; releasing the last loaded one releases the collection."""
        with self._lock:
            if collection_id not in self._assignments:
                return
            loaded = self._partitions.get(collection_id)
            if loaded is None:
                info = self._collections.describe_collection(collection_id=collection_id)
                loaded = {p.partition_id for p in info.partitions}
            left = loaded - set(partition_ids)
            if left:
                self._set_partitions(collection_id, left)
                return
        self.release_collection(collection_id)

    def loaded_partitions(self, collection_id: int) -> list[int] | None:
        """The partition ids reads may see: None when the whole collection is loaded.
        Raises COLLECTION_NOT_LOADED when nothing of it is (one call per read)."""
        with self._lock:
            if collection_id not in self._assignments:
                raise errors.MilvusError(
                    Code.COLLECTION_NOT_LOADED,
                    f"collection not loaded[collection={collection_id}]",
                )
            loaded = self._partitions.get(collection_id)
            return None if loaded is None else sorted(loaded)

    def _set_partitions(self, collection_id: int, loaded: set[int] | None) -> None:
        key = f"{_PARTITIONS}/{collection_id}"
        if loaded is None:
            if self._partitions.pop(collection_id, None) is not None:
                self._kv.delete(key)
            return
        self._kv.put(key, json.dumps(sorted(loaded)).encode())
        self._partitions[collection_id] = set(loaded)

    def _load_shards(self, collection_id: int) -> None:
        """Watch every shard of the collection (needs an index on each vector field)."""
        info = self._collections.describe_collection(collection_id=collection_id)
        missing = [f.name for f in info.schema.vector_fields if info.index_on(f.name) is None]
        if missing:
            raise MilvusError(
                Code.INDEX_NOT_FOUND,
                f"there is no vector index on field: [{', '.join(missing)}], please create "
                "index firstly",
            )
        with self._lock:
            current = self._assignments.get(collection_id, {})
            if set(current) == set(info.vchannels):
                return
            assignment = {v: n for v, n in current.items() if v in info.vchannels}
            for vchannel in info.vchannels:
                if vchannel not in assignment:
                    assignment[vchannel] = self._assign(info, vchannel, assignment)
            self._save(collection_id, assignment)
        log.info("collection loaded", extra={"collection": info.name, "shards": len(assignment)})

    def _assign(
        self,
        info: CollectionInfo,
        vchannel: str,
        pending: dict[str, int],
        exclude: Collection[int] = (),
    ) -> int:
        """Lead ``vchannel`` from the live node leading the fewest shards (counting the
        collection's assignment in progress, ``pending``), not one of ``exclude``."""
        live = [n for n in self._nodes.live_nodes() if n not in exclude]
        if not live:
            raise MilvusError(Code.SERVICE_NOT_READY, "no query node is available")
        others = [a for cid, a in self._assignments.items() if cid != info.collection_id]
        load = Counter(n for a in [*others, pending] for n in a.values())
        node_id = min(live, key=lambda n: (load[n], n))
        plan, placed = self._plan(info, vchannel, node_id)
        self._nodes.node(node_id).watch(info, vchannel, plan)
        self._handed |= {_handoff_key(s) for s in placed}
        return node_id

    def _plan(
        self, info: CollectionInfo, vchannel: str, node_id: int
    ) -> tuple[LoadPlan | None, list[SegmentInfo]]:
        """The shard's load plan for its new leader ``node_id``, and the segments it
        places: persisted segments go where memory use is lowest (segments other nodes
        hold for the shard already stay there, and get the deltalogs again), with the
        shard's deltalogs and the replay offset: the data node's checkpoint, or earlier if
        a segment not yet flushed started before it."""
        if self._segments is None or self.distribution is None:
            return None, []
        pchannel = pchannel_of(vchannel)
        mine = [s for s in self._segments.segments(info.collection_id) if s.vchannel == vchannel]
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
        remote = self._place_for(info, vchannel, node_id, persisted)
        local = [s for s in persisted if s.segment_id not in remote]
        plan = LoadPlan(local, self._segments.deltalogs(info.collection_id, vchannel), replay)
        plan.remote = remote
        return plan, persisted

    def _place_for(
        self, info: CollectionInfo, vchannel: str, node_id: int, persisted: list[SegmentInfo]
    ) -> dict[int, int]:
        """Segment id -> the other node serving it, for a shard about to be led by
        ``node_id``; the rest is loaded by the leader."""
        assert self.distribution is not None
        reports = self.distribution.reports()
        held = {s: n for n, r in reports.items() for s in r.hosted.get(vchannel, [])}
        by_id = {s.segment_id: s for s in persisted}
        targets = {s: n for s, n in held.items() if s in by_id}
        fresh = [s for s in persisted if s.segment_id not in targets]
        if fresh and reports:
            targets |= self.distribution.place(reports, fresh, info.schema.row_bytes())
        remote = {}
        for segment_id, target in targets.items():
            if target == node_id:
                continue
            try:
                self.distribution.host(info, target, by_id[segment_id])
            except Exception:
                log.exception(
                    "segment placement failed; the leader loads it",
                    extra={"segment": segment_id, "node": target},
                )
                continue
            remote[segment_id] = target
        return remote

    def handoff(self) -> int:
        """Serve newly flushed segments, placed where memory use is lowest, and send new
        index files to the node serving each segment; returns how many were handed off.

        A segment made by compaction waits for its index files when the collection has an
        approximate index, so a search never falls from the index to an exact scan (and
        back) while the swap goes on."""
        if self._segments is None or self.distribution is None:
            return 0
        handed = 0
        reports: dict[int, NodeLoad] | None = None
        with self._lock:
            assignments = {c: dict(a) for c, a in self._assignments.items()}
        for collection_id, assignment in assignments.items():
            indexed = self._needs_index_files(collection_id)
            for segment in self._segments.segments(collection_id, PERSISTED):
                leader_id = assignment.get(segment.vchannel)
                if leader_id is None or _handoff_key(segment) in self._handed:
                    continue
                if segment.compacted_from and indexed and not segment.index_files:
                    continue
                reports = self.distribution.reports() if reports is None else reports
                if leader_id not in reports:
                    continue
                try:
                    self._hand_off(segment, reports[leader_id], reports)
                except Exception:
                    log.exception(
                        "handoff failed; will retry",
                        extra={"segment": segment.segment_id, "node": leader_id},
                    )
                    continue
                self._handed.add(_handoff_key(segment))
                handed += 1
        return handed

    def _hand_off(
        self, segment: SegmentInfo, leader: NodeLoad, reports: dict[int, NodeLoad]
    ) -> None:
        assert self.distribution is not None
        vchannel = segment.vchannel
        info = self._collections.describe_collection(collection_id=segment.collection_id)
        holder = leader.holder(vchannel, segment.segment_id)
        if holder == leader.node_id:  # new index files
            self._nodes.node(holder).load_segment(vchannel, segment)
        elif holder is not None:
            self._nodes.node(holder).host_segment(info, vchannel, segment, [])
        elif segment.compacted_from:  # merged from segments served anywhere: at the leader
            self.distribution.serve(info, leader.node_id, segment, leader.node_id)
        else:
            row_bytes = info.schema.row_bytes()
            target = self.distribution.place(reports, [segment], row_bytes)[segment.segment_id]
            if target == leader.node_id:  # the growing rows' deletes move along
                self._nodes.node(target).load_segment(vchannel, segment)
            else:
                self.distribution.serve(info, leader.node_id, segment, target)
            reports[target].segments_mb[segment.segment_id] = segment.num_rows * row_bytes / 2**20
            leader.leading.setdefault(vchannel, {})[segment.segment_id] = target

    def _needs_index_files(self, collection_id: int) -> bool:
        try:
            info = self._collections.describe_collection(collection_id=collection_id)
        except MilvusError:
            return False
        return any(IndexSpec.of(index).approximate for index in info.indexes)

    # -- garbage collection ------------------------------------------------------------------

    def held_segments(self) -> set[int] | None:
        """Sealed segments any live query node serves; None if one of them did not say
        (garbage collection must then delete nothing)."""
        held: set[int] = set()
        for node_id in self._nodes.live_nodes():
            try:
                held.update(self._nodes.node(node_id).held_segments())
            except Exception:
                log.exception("held segments unknown", extra={"node": node_id})
                return None
        return held

    def release_segments(self, segment_ids: set[int]) -> None:
        """Make live nodes stop serving these (retired, nothing replaces them)."""
        if not segment_ids or self.distribution is None:
            return
        for node_id, report in self.distribution.reports().items():
            for vchannel in {*report.leading, *report.hosted}:
                held = {*report.leading.get(vchannel, {}), *report.hosted.get(vchannel, [])}
                gone = sorted(held & segment_ids)
                if not gone:
                    continue
                try:
                    self._nodes.node(node_id).release_segments(vchannel, gone)
                except Exception:
                    log.exception("releasing retired segments failed", extra={"node": node_id})

    def _save(self, collection_id: int, assignment: dict[str, int]) -> None:
        self._kv.put(f"{_LOADED}/{collection_id}", json.dumps(assignment).encode())
        self._assignments[collection_id] = assignment

    def release_collection(self, collection_id: int) -> None:
        with self._lock:
            assignment = self._assignments.pop(collection_id, None)
            self._kv.delete(f"{_LOADED}/{collection_id}")
            self._set_partitions(collection_id, None)
        if not assignment:
            return
        live = set(self._nodes.live_nodes())
        for vchannel, node_id in assignment.items():
            if node_id in live:
                try:
                    self._nodes.node(node_id).unwatch(vchannel)
                except Exception:
                    log.exception("unwatch failed", extra={"vchannel": vchannel, "node": node_id})

    def load_state(self, collection_id: int, partition_ids: Sequence[int] = ()) -> tuple[int, int]:
        """(LoadState, progress percent) as GetLoadState / GetLoadingProgress report them: of
        the collection (loaded in any part), or of these partitions (all of them loaded)."""
        with self._lock:
            loaded = collection_id in self._assignments
            partial = self._partitions.get(collection_id)
            if loaded and partial is not None and not set(partition_ids) <= partial:
                loaded = False
            return (LOAD_STATE_LOADED, 100) if loaded else (LOAD_STATE_NOT_LOAD, 0)

    def shard_leaders(self, collection_id: int) -> dict[str, int]:
        with self._lock:
            assignment = self._assignments.get(collection_id)
        if assignment is None:
            raise errors.MilvusError(
                Code.COLLECTION_NOT_LOADED, f"collection not loaded[collection={collection_id}]"
            )
        return dict(assignment)

    def rebalance(self, live: Sequence[int] | None = None) -> None:
        """Move shards off nodes that are gone or stopping, and place again the segments
        they served (on every membership change, and every few seconds, so a shard whose
        load failed, e.g. S3 briefly unavailable, is retried). A stopping node is drained:
        its shards get a new leader before it lets them go, its segments move."""
        live_set = set(self._nodes.live_nodes() if live is None else live)
        reports = self.distribution.reports() if self.distribution is not None else {}
        stopping = {n for n, r in reports.items() if r.stopping}
        serving = live_set - stopping
        with self._lock:
            for collection_id, assignment in list(self._assignments.items()):
                orphans = [v for v, n in assignment.items() if n not in serving]
                if orphans and serving:
                    self._reassign(collection_id, assignment, orphans, stopping)
        if self.distribution is not None and serving:
            self.distribution.recover()
            if stopping:
                self.distribution.balance()

    def _reassign(
        self,
        collection_id: int,
        assignment: dict[str, int],
        orphans: list[str],
        stopping: set[int],
    ) -> None:
        try:
            info = self._collections.describe_collection(collection_id=collection_id)
        except MilvusError:
            return
        for vchannel in orphans:
            old = assignment[vchannel]
            try:
                node_id = self._assign(info, vchannel, assignment, exclude=stopping)
            except Exception:
                log.exception("shard load failed; will retry", extra={"vchannel": vchannel})
                continue
            assignment[vchannel] = node_id
            self._save(collection_id, assignment)
            log.warning("shard reassigned", extra={"vchannel": vchannel, "node": node_id})
            if old in stopping:  # alive: it led the shard until the new leader was ready
                try:
                    self._nodes.node(old).unwatch(vchannel)
                except Exception:
                    log.exception("unwatch failed", extra={"vchannel": vchannel, "node": old})

    def balance(self) -> int:
        """One memory-based balancing round (every ``query.balance_interval_s``); returns
        the segments moved."""
        return self.distribution.balance() if self.distribution is not None else 0

    def load_balance(
        self,
        collection_id: int,
        source: int,
        destinations: Sequence[int],
        segment_ids: Sequence[int],
    ) -> None:
        """Milvus's LoadBalance: move these sealed segments of the collection (all it serves
        when none are named) from ``source`` to ``destinations`` (any other node when none
        are named), each to the one least used once it holds it."""
        if self.distribution is None:
            raise MilvusError(Code.SERVICE_NOT_READY, "segment placement is not available")
        with self._lock:
            assignment = dict(self._assignments.get(collection_id, {}))
        if not assignment:
            raise errors.MilvusError(
                Code.COLLECTION_NOT_LOADED, f"collection not loaded[collection={collection_id}]"
            )
        reports = self.distribution.reports()
        moves = self.distribution.plan_moves(
            reports, set(assignment), source, destinations, segment_ids
        )
        failed_before = self.distribution.moves.failed
        self.distribution.run(moves, reports)
        if self.distribution.moves.failed > failed_before:
            raise MilvusError(
                Code.UNEXPECTED, "some segments could not be moved; see the coordinator's log"
            )


def _handoff_key(segment: SegmentInfo) -> tuple[int, tuple[str, ...]]:
    return segment.segment_id, tuple(sorted(segment.index_files))
