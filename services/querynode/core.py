"""The query node's logic: shards fed by tick-aligned packs, reads at a safe snapshot.

Per watched shard (vchannel) the pipeline is filter -> insert -> delete: a pack's messages of
other shards sharing the pchannel are dropped, inserts are applied before deletes (so an
upsert's delete, stamped like its insert, removes only older rows), then tsafe moves to the
pack's end. A read waits until tsafe reaches its guarantee timestamp and reads at the tsafe
it found: never older than asked, never a half-applied pack.

No transport here: a :class:`ChannelSubscriber` delivers packs (Kafka in a deployment,
direct calls in unit tests).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any, Protocol

import numpy as np

from vectide.services.common import binlog
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.index_spec import InterimIndex
from vectide.services.common.memory import add_bytes, release_freed
from vectide.services.common.msgstream.channels import pchannel_of
from vectide.services.common.msgstream.message import (
    CollectionDDLMsg,
    InsertMsg,
    MsgPack,
    Position,
)
from vectide.services.common.placement import NodeLoad
from vectide.services.common.requests import ShardQueryRequest, ShardSearchRequest
from vectide.services.common.results import QueryRows, SearchHits, TermStats
from vectide.services.common.schema import CollectionInfo
from vectide.services.common.search_range import ScoreBand, band_of
from vectide.services.common.segment import Deltalog, LoadPlan, SegmentInfo
from vectide.services.querynode import bm25
from vectide.services.querynode.chunk_index import DEFAULT_CHUNK_ROWS, ChunkIndexes
from vectide.services.querynode.hosting import HostedSegments
from vectide.services.querynode.reads import (
    SealedVisibility,
    ensure_indexes,
    merge_query,
    parse_filter,
    query_store,
    reduce_hits,
    search_store,
    visible,
)
from vectide.services.querynode.scatter import PeerNode, Peers, Scatter, by_node
from vectide.services.querynode.sealed import (
    build_stand_in,
    install_index_files,
    load_sealed,
    read_deltalogs,
)
from vectide.services.querynode.segment import ShardStore
from vectide.services.querynode.shard import (
    Removal,
    Shard,
    adds_field,
    apply_removal,
    is_removal,
    replay_removals,
)

log = logging.getLogger(__name__)

#: how long a handoff of a compacted segment waits for the shard to reach the deletes the
#: segment was written with (then it fails, and querycoord retries it)
SWAP_WAIT_S = 5.0
_MB = 1024 * 1024


class ChannelSubscriber(Protocol):
    def subscribe(self, vchannel: str, pchannel: str, start_offset: int) -> None:
        """Start delivering packs of ``pchannel`` from ``start_offset`` to ``apply``."""

    def unsubscribe(self, vchannel: str) -> None: ...

    def hurry(self, vchannel: str, fence: Position | None = None) -> None:
        """A read of ``vchannel`` is about to wait: deliver its channel's ticks fast, and
        apply ``fence`` (a tick nobody wrote) once the channel was read up to it."""


class QueryNode:
    def __init__(
        self,
        node_id: int,
        subscriber: ChannelSubscriber | None = None,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
        binlogs: binlog.Store | None = None,
        peers: Peers | None = None,
        memory_limit_mb: float = 0.0,
        interim: InterimIndex | None = None,
    ) -> None:
        self.node_id = node_id
        #: the index each full chunk of growing rows gets (query.interim_index)
        self._interim = interim or InterimIndex()
        self.memory_limit_mb = memory_limit_mb
        #: shutting down gracefully: the coordinator moves what this node serves elsewhere
        self.stopping = False
        self._binlogs = binlogs
        self._chunk_rows = chunk_rows
        self._subscriber = subscriber
        self._shards: dict[str, Shard] = {}
        self._lock = threading.Lock()
        #: sealed segments held for shards other nodes lead
        self._hosted = HostedSegments(self._require_binlogs, chunk_rows)
        #: calls to the nodes serving segments of the shards led here
        self._scatter = Scatter(peers)
        #: messages skipped because they could not be applied (poison), since start
        self.skipped_messages = 0
        #: the rows of sealed segments the last snapshot read sees
        self._sealed_seen = SealedVisibility()

    def set_subscriber(self, subscriber: ChannelSubscriber) -> None:
        self._subscriber = subscriber

    def set_peers(self, peers: Peers) -> None:
        self._scatter.peers = peers

    # -- assignment (from querycoord) ------------------------------------------------------

    def watch(
        self, collection: CollectionInfo, vchannel: str, plan: LoadPlan | None = None
    ) -> None:
        """Lead ``vchannel``: load the persisted segments the plan places here (reusing
        those this node holds for the shard already) and their deletes, note where the
        others are served, then replay the channel from the plan's offset (or the
        collection's start)."""
        if vchannel in self._shards:
            return
        shard = Shard(
            collection,
            vchannel,
            ShardStore(collection.schema, collection.indexes, self._chunk_rows, self._interim),
        )
        pchannel = pchannel_of(vchannel)
        start_offset = collection.start_offsets[pchannel]
        if plan is not None:
            held = self._hosted.take(vchannel)
            for segment in plan.segments:
                reused = held.pop(segment.segment_id, None)
                shard.sealed[segment.segment_id] = reused or self._load(collection, segment)
                shard.covered |= {segment.segment_id, *segment.compacted_from}
                shard.purged_ts = max(shard.purged_ts, segment.deletes_applied_ts)
            shard.remote = {s: n for s, n in plan.remote.items() if s not in shard.sealed}
            shard.covered |= set(shard.remote)
            for pks, stamps in read_deltalogs(plan.deltalogs, self._require_binlogs()):
                for sealed in shard.sealed.values():
                    sealed.delete_keys(pks, stamps)
                shard.store.remember_deletes(pks, stamps)
            start_offset = max(start_offset, plan.replay_offset)
        with self._lock:
            if vchannel in self._shards:
                return
            self._shards[vchannel] = shard
        if self._subscriber is not None:
            self._subscriber.subscribe(vchannel, pchannel, start_offset)
        log.info(
            "watching shard",
            extra={
                "node": self.node_id,
                "vchannel": vchannel,
                "sealed": len(shard.sealed),
                "remote": len(shard.remote),
                "from": start_offset,
            },
        )

    def load_segment(
        self,
        vchannel: str,
        segment: SegmentInfo,
        deltalogs: list[Deltalog] | None = None,
        since_ts: int = 0,
    ) -> bool:
        """Serve a sealed segment of a shard led here from this node.

        Handoff: a newly flushed segment replaces the growing rows it covers, and a
        compacted one the segments it was merged from. A move: a segment another node
        served comes here. The swap happens under the shard lock, so no read sees the rows
        twice or not at all. With ``deltalogs`` (a move, or a compaction of segments served
        elsewhere) the segment gets the shard's persisted deletes, then the ones applied
        here since ``since_ts`` (the data node's checkpoint those deltalogs reach).

        Called again once the segment has index files, it installs them (until then the
        sealed segment is searched through an interim stand-in the builder makes, or exactly
        before that). Returns whether anything changed.
        """
        shard = self._shard(vchannel)
        if segment.partition_id in shard.dropped:  # flushed after its partition was dropped
            return False
        if segment.segment_id in shard.sealed:
            loaded = shard.sealed[segment.segment_id]
            return (
                install_index_files(shard.collection, segment, loaded, self._require_binlogs()) > 0
            )
        moving = segment.segment_id in shard.remote
        if segment.segment_id in shard.covered and not moving:
            return False  # a compacted segment loaded already serves its rows
        if (
            segment.compacted_from
            and shard.tsafe.wait(segment.deletes_applied_ts, SWAP_WAIT_S) is None
        ):
            # its deleted rows are gone: a read older than those deletes must not meet it
            raise MilvusError(
                Code.TIMETICK_LAG,
                f"shard {vchannel} has not reached the deletes segment {segment.segment_id} "
                "was compacted with yet",
            )
        if deltalogs is not None:
            shard.removals_since(since_ts)  # refused before the load, not after it
        sealed = self._load(shard.collection, segment)
        for pks, stamps in read_deltalogs(deltalogs or [], self._require_binlogs()):
            sealed.delete_keys(pks, stamps)
        with shard.lock:
            if deltalogs is not None:
                later = shard.removals_since(since_ts)
                replay_removals(sealed, later)
                # the older ones are in every deltalog read from now on: a load whose
                # deltalogs end before them is refused (planned again) by removals_since
                shard.removals = later
                shard.removals_floor = max(shard.removals_floor, since_ts)
            replaced = [shard.sealed.pop(s) for s in segment.compacted_from if s in shard.sealed]
            for s in (segment.segment_id, *segment.compacted_from):
                shard.remote.pop(s, None)
                shard.lost.discard(s)
            for old in [shard.store, *replaced]:
                for covered_id in (segment.segment_id, *segment.compacted_from):
                    rows = old.segment_rows(covered_id)
                    sealed.delete_keys(*old.deletes_of(rows))
                    if old is shard.store:
                        old.hide(rows)
            shard.sealed[segment.segment_id] = sealed
            shard.covered |= {segment.segment_id, *segment.compacted_from}
            shard.purged_ts = max(shard.purged_ts, segment.deletes_applied_ts)
            shard.store.free_hidden_head()
        release_freed()  # the growing copy, and the binlogs' read buffers
        log.info(
            "segment moved here" if moving else "segment handed off",
            extra={
                "vchannel": vchannel,
                "segment": segment.segment_id,
                "rows": sealed.num_rows,
                "replaced": len(replaced),
            },
        )
        return True

    def attach_segment(
        self, vchannel: str, segment_id: int, node_id: int, since_ts: int, purged_ts: int = 0
    ) -> None:
        """Serve ``segment_id`` of a shard led here from ``node_id``, which holds it loaded
        with the deletes persisted up to ``since_ts``: it gets the later ones applied here,
        and from now on every new one (``forward``). Its growing rows here are hidden, or
        the copy this node served is dropped (a move away). ``purged_ts``: the deletes it
        was compacted with (no read may travel before them)."""
        shard = self._shard(vchannel)
        peer = self._scatter.peer(node_id)
        with shard.lock:
            later = shard.removals_since(since_ts)
            if later:
                peer.forward(vchannel, later)
            shard.removals = later  # the older ones are in every deltalog read from now on
            shard.removals_floor = max(shard.removals_floor, since_ts)
            shard.sealed.pop(segment_id, None)
            if segment_id not in shard.covered:  # a handoff: the growing rows go
                shard.store.hide(shard.store.segment_rows(segment_id))
                shard.covered.add(segment_id)
                shard.store.free_hidden_head()
            shard.remote[segment_id] = node_id
            shard.lost.discard(segment_id)
            shard.purged_ts = max(shard.purged_ts, purged_ts)
        release_freed()
        log.info(
            "segment served by another node",
            extra={"vchannel": vchannel, "segment": segment_id, "node": node_id},
        )

    def release_segments(self, vchannel: str, segment_ids: list[int]) -> int:
        """Stop serving these sealed segments (retired with nothing replacing them: their
        rows were all deleted, or their partition dropped), here or from other nodes;
        returns how many this node held. Segments held here for other leaders go too."""
        released = self._hosted.release(vchannel, segment_ids)
        shard = self._shards.get(vchannel)
        if shard is None:
            return released
        with shard.lock:
            for segment_id in segment_ids:
                shard.remote.pop(segment_id, None)
                shard.lost.discard(segment_id)
            released += sum(shard.sealed.pop(s, None) is not None for s in segment_ids)
        release_freed()
        return released

    def held_segments(self) -> list[int]:
        """Every sealed segment this node serves (garbage collection keeps their files)."""
        with self._lock:
            shards = list(self._shards.values())
        held = {s for shard in shards for s in shard.sealed}
        held |= {s for segments in self._hosted.segments().values() for s in segments}
        return sorted(held)

    def sealed_segments(self, vchannel: str) -> list[int]:
        return sorted(self._shard(vchannel).sealed)

    def _load(self, collection: CollectionInfo, segment: SegmentInfo) -> ShardStore:
        return load_sealed(collection, segment, self._require_binlogs(), self._chunk_rows)

    def _require_binlogs(self) -> binlog.Store:
        if self._binlogs is None:
            raise MilvusError(Code.SERVICE_NOT_READY, "this query node has no object store")
        return self._binlogs

    def unwatch(self, vchannel: str) -> None:
        with self._lock:
            shard = self._shards.pop(vchannel, None)
        if shard is None:
            return
        if self._subscriber is not None:
            self._subscriber.unsubscribe(vchannel)
        shard.tsafe.close()

    def release(self, collection_id: int) -> None:
        for vchannel in self.watched(collection_id):
            self.unwatch(vchannel)
        self._hosted.release_collection(collection_id)

    def watched(self, collection_id: int | None = None) -> list[str]:
        with self._lock:
            return [
                v
                for v, s in self._shards.items()
                if collection_id is None or s.collection.collection_id == collection_id
            ]

    def drained(self) -> bool:
        """Nothing is served here any more (a stopping node may exit)."""
        return not self._shards and not self._hosted.segments()

    def tsafe(self, vchannel: str) -> int:
        return self._shard(vchannel).tsafe.get()

    # -- segments held for other leaders ------------------------------------------------------

    def host_segment(
        self,
        collection: CollectionInfo,
        vchannel: str,
        segment: SegmentInfo,
        deltalogs: list[Deltalog],
    ) -> bool:
        return self._hosted.host(collection, vchannel, segment, deltalogs)

    def forward(self, vchannel: str, removals: list[Removal]) -> None:
        self._hosted.forward(vchannel, removals)

    def search_segments(
        self, req: ShardSearchRequest, vchannel: str, segment_ids: list[int], snapshot: int
    ) -> tuple[SearchHits | None, list[int]]:
        return self._hosted.search(req, vchannel, segment_ids, snapshot)

    def query_segments(
        self, req: ShardQueryRequest, vchannel: str, segment_ids: list[int], snapshot: int
    ) -> tuple[QueryRows | None, list[int]]:
        return self._hosted.query(req, vchannel, segment_ids, snapshot)

    def release_hosted(self, vchannel: str, segment_ids: list[int]) -> int:
        return self._hosted.release(vchannel, segment_ids)

    def load_report(self) -> NodeLoad:
        """What this node holds, for the coordinator's placement and balancing."""
        report = NodeLoad(self.node_id, self.memory_limit_mb, stopping=self.stopping)
        with self._lock:
            shards = list(self._shards.values())
        growing = 0
        for shard in shards:
            with shard.lock:
                grow_bytes, sealed_bytes = shard.memory_bytes()
                report.leading[shard.vchannel] = {
                    **{s: self.node_id for s in shard.sealed},
                    **shard.remote,
                }
                report.lost.extend(sorted(shard.lost))
                report.rows += shard.store.num_rows + sum(s.num_rows for s in shard.sealed.values())
            growing += grow_bytes
            report.segments_mb.update({s: b / _MB for s, b in sealed_bytes.items()})
        for vchannel, stores in self._hosted.segments().items():
            report.hosted[vchannel] = sorted(stores)
            for segment_id, store in stores.items():
                row = store.row_bytes()
                report.segments_mb[segment_id] = store.num_rows * row / _MB
                report.rows += store.num_rows
        report.growing_mb = growing / _MB
        return report

    def held_bytes(self) -> dict[tuple[str, str], int]:
        """(store kind, array kind) -> bytes held: growing rows, sealed segments of shards
        led here, segments hosted for other leaders (``ShardStore.held_bytes``)."""
        with self._lock:
            shards = list(self._shards.values())
        total: Counter[str] = Counter()
        for shard in shards:
            with shard.lock:
                stores = [("growing", shard.store)]
                stores += [("sealed", s) for s in shard.sealed.values()]
            for kind, store in stores:
                add_bytes(total, store.held_bytes(), f"{kind}.")
        for stores in self._hosted.segments().values():
            for store in stores.values():
                add_bytes(total, store.held_bytes(), "hosted.")
        return {tuple(k.split(".", 1)): v for k, v in total.items()}  # type: ignore[misc]

    # -- the pipeline --------------------------------------------------------------------------

    def apply(self, vchannel: str, pack: MsgPack) -> None:
        shard = self._shards.get(vchannel)
        if shard is None:
            return
        mine = [m for m in pack.msgs if self._is_for(shard, m)]
        # fields added first: a pack's inserts that carry one are stamped after its
        # AddCollectionField; those that lack it get its default, or nulls, either way
        added = [m for m in mine if adds_field(m)]
        inserts = [m for m in mine if isinstance(m, InsertMsg)]
        rest = [m for m in mine if not isinstance(m, InsertMsg) and not adds_field(m)]
        removals: list[Removal] = []
        with shard.lock:
            for msg in [*added, *inserts, *rest]:
                try:
                    self._apply_one(shard, msg)
                except Exception:  # a malformed message must not stop the shard
                    self.skipped_messages += 1
                    log.exception(
                        "skipping message that cannot be applied",
                        extra={"vchannel": vchannel, "msg_id": msg.msg_id, "ts": msg.ts},
                    )
                    continue
                if is_removal(msg):
                    removals.append(msg)
            shard.remember_removals(removals, pack.end_ts)
            remote = by_node(shard.remote) if removals else {}
        if remote:
            self._scatter.forward(shard, removals, remote)
        shard.tsafe.advance(pack.end_ts)
        if shard.unfreed:
            self._free_dropped(shard)

    @staticmethod
    def _apply_one(shard: Shard, msg: Any) -> None:
        if isinstance(msg, InsertMsg):
            # else served from its binlogs already, or met before (a duplicated record)
            if msg.segment_id not in shard.covered and shard.first_time(msg):
                shard.store.insert(msg)
        elif is_removal(msg):
            hidden = apply_removal(shard, msg)
            if adds_field(msg):
                log.info("field added", extra={"vchannel": shard.vchannel})
            elif isinstance(msg, CollectionDDLMsg):
                log.info(
                    "partition dropped",
                    extra={
                        "vchannel": shard.vchannel,
                        "partition": msg.partition_id,
                        "rows": hidden,
                    },
                )

    @staticmethod
    def _free_dropped(shard: Shard) -> None:
        """Unload sealed segments holding only dropped partitions' rows, once tsafe passed
        the drops: every read from then on is at a later snapshot, none can see them."""
        safe = shard.tsafe.get()
        due = {p for p in shard.unfreed if shard.dropped[p] <= safe}
        if not due:
            return
        gone = {p for p, ts in shard.dropped.items() if ts <= safe}
        with shard.lock:
            shard.unfreed -= due
            for segment_id, store in list(shard.sealed.items()):
                if store.partitions() <= gone:
                    del shard.sealed[segment_id]
                    log.info("dropped partition's segment freed", extra={"segment": segment_id})

    @staticmethod
    def _is_for(shard: Shard, msg: Any) -> bool:
        if isinstance(msg, CollectionDDLMsg):
            return msg.collection_id == shard.collection.collection_id
        return msg.shard == shard.vchannel

    # -- interim indexes -------------------------------------------------------------------

    def build_pending_indexes(self) -> int:
        """Build one pending chunk index and one due merge of blocks per shard and field;
        returns how many were built (the service calls it until none is).

        Runs off the ingest path (the service calls it periodically): building takes the
        vectors of full chunks, which never change, so no lock is held while faiss works.
        Sealed segments get their vector index files from the index node, and their scalar
        indexes as they load; one still waiting for its file gets an interim stand-in here
        (``build_stand_in``), so it is not scanned exactly meanwhile. Scalar indexes of
        growing chunks are built here too.
        """
        built = 0
        for shard in list(self._shards.values()):
            store = shard.store
            for field_name, indexes in store.indexes.items():
                built += self._build_chunk(shard, field_name, indexes)
                built += self._merge_blocks(shard, field_name, indexes)
            with shard.lock:
                sealed = list(shard.sealed.values())
            for segment in sealed:  # one stand-in a round: a growing chunk may be due
                if stand_ins := build_stand_in(segment, self._interim, self._chunk_rows):
                    built += stand_ins
                    break
            for scalar, chunk in store.scalar.pending(store.num_rows):
                with shard.lock:
                    values, valid = store.scalar_chunk(scalar, chunk)
                scalar.install(chunk, scalar.spec.build(values, valid))
                built += 1
        return built

    @staticmethod
    def _build_chunk(shard: Shard, field_name: str, indexes: ChunkIndexes) -> int:
        """Index the next full chunk of a growing field, if any; returns how many (0, 1)."""
        store = shard.store
        with shard.lock:
            chunk = indexes.next_chunk(store.num_rows)
            if chunk is None:
                return 0
            start = chunk * indexes.chunk_rows
            vectors, held = store.index_input(field_name, start, start + indexes.chunk_rows)
        indexes.install(chunk, indexes.spec.build(vectors, held))
        return 1

    @staticmethod
    def _merge_blocks(shard: Shard, field_name: str, indexes: ChunkIndexes) -> int:
        """Merge the first run of interim blocks due (``ChunkIndexes.next_merge``) into one,
        built from the rows (unchanging: full chunks) and the blocks' lists with no lock
        held; returns how many merges were built (0, 1)."""
        with shard.lock:
            merge = indexes.next_merge()
            if merge is None:
                return 0
            vectors, held = shard.store.index_input(field_name, *merge.rows(indexes.chunk_rows))
        parts = [block.index for block in merge.blocks]
        indexes.install_merge(merge, merge.spec.merge_of(vectors, parts, held))
        return 1

    # -- reads ---------------------------------------------------------------------------------

    def search(self, req: ShardSearchRequest) -> SearchHits:
        shards = self._hurry(req)
        tree = parse_filter(req.expr, req.expr_params, req.timezone)
        band = band_of(req.metric_type, req.search_params)
        parts = [self._search_shard(shard, req, tree, band) for shard in shards]
        return reduce_hits(parts, req)

    def query(self, req: ShardQueryRequest) -> QueryRows:
        shards = self._hurry(req)
        tree = parse_filter(req.expr, req.expr_params, req.timezone)
        parts = [self._query_shard(shard, req, tree) for shard in shards]
        return merge_query(parts, req)

    def _hurry(self, req: ShardSearchRequest | ShardQueryRequest) -> list[Shard]:
        """The read's shards; those whose tsafe is behind its guarantee are about to wait,
        and their consumers may be reading slowly (idle): they read fast from now on. A read
        that waits for nothing (Bounded, Eventually: tsafe is past) leaves the pace alone:
        fast fetches cost this process and the broker CPU every search competes with."""
        shards = [self._shard(v) for v in req.vchannels]
        if self._subscriber is not None:
            fences = {f.channel: f for f in req.fences}
            for shard in shards:
                if shard.tsafe.get() < req.guarantee_ts:
                    fence = fences.get(pchannel_of(shard.vchannel))
                    self._subscriber.hurry(shard.vchannel, fence)
        return shards

    def _shard(self, vchannel: str) -> Shard:
        shard = self._shards.get(vchannel)
        if shard is None:
            raise MilvusError(
                Code.SERVICE_NOT_READY, f"node {self.node_id} does not serve shard {vchannel}"
            )
        return shard

    def _snapshot(self, shard: Shard, req: ShardSearchRequest | ShardQueryRequest) -> int:
        """The snapshot a read of ``shard`` is at, once tsafe reached the guarantee: the
        travel stamp if the read travels, else the tsafe found."""
        ts = self._wait_tsafe(shard, req.guarantee_ts, req.wait_timeout_s)
        return req.travel_ts or ts

    @staticmethod
    def _kept(shard: Shard, req: ShardSearchRequest | ShardQueryRequest, snapshot: int) -> int:
        """Under the shard lock, a snapshot the stores still hold exactly. A compacted
        segment holds no row deleted up to ``purged_ts``: an ordinary read whose snapshot
        a swap overtook reads at the tsafe (the swap waited for it to pass that stamp), as
        does an iterator's page; a read travelling further back is refused."""
        if snapshot >= shard.purged_ts:
            return snapshot
        if not req.travel_ts or not req.strict_travel:
            return shard.tsafe.get()
        raise MilvusError(
            Code.PARAMETER_INVALID,
            f"shard {shard.vchannel} was compacted with the deletes up to {shard.purged_ts}: "
            f"it cannot be read as of {req.travel_ts} (data.retention_s keeps older snapshots)",
        )

    def _wait_tsafe(self, shard: Shard, guarantee_ts: int, timeout_s: float) -> int:
        ts = shard.tsafe.wait(guarantee_ts, timeout_s)
        if ts is None:
            if shard.tsafe.closed:
                raise MilvusError(Code.SERVICE_NOT_READY, f"shard {shard.vchannel} was released")
            raise MilvusError(
                Code.TIMETICK_LAG,
                f"shard {shard.vchannel} is serviceable up to {shard.tsafe.get()}, the read "
                f"needs {guarantee_ts}: not reached within {timeout_s:.1f}s (a stalled channel "
                "or writer); retry, or read with Bounded/Eventually consistency",
            )
        return ts

    def _search_shard(
        self, shard: Shard, req: ShardSearchRequest, tree: Any, band: ScoreBand | None
    ) -> SearchHits:
        found = self._snapshot(shard, req)
        if req.metric_type == "BM25" and bm25.AVGDL not in req.search_params:
            req = self._bm25_weighted(shard, req, found)
        with shard.lock:
            snapshot = self._kept(shard, req, found)

            def remote(peer: PeerNode, ids: list[int]) -> tuple[SearchHits | None, list[int]]:
                return peer.search_segments(req, shard.vchannel, ids, snapshot)

            pending = self._scatter.start(shard, remote)
            ensure_indexes(shard.stores(), req.scalar_indexes)
            growing, sealed = shard.store, [s for s in shard.sealed.values() if s.num_rows]
            # an empty growing store (everything sealed) adds no hit
            parts = (
                [search_store(growing, req, tree, band, snapshot)]
                if growing.num_rows or not sealed
                else []
            )
            # sealed rows change only by deletes (under this lock): which rows the read sees
            # is fixed here, and faiss runs after the lock, beside ingest and other reads
            seeing = self._sealed_seen.visible
            bounds = (snapshot, req.partition_ids, tree, req.expire_ts)
            seen = [(s, seeing(s, *bounds)) for s in sealed]
        parts += [search_store(s, req, tree, band, snapshot, mask) for s, mask in seen]
        parts += self._scatter.gather(shard, remote, pending)
        return reduce_hits(parts, req)

    def _bm25_weighted(
        self, shard: Shard, req: ShardSearchRequest, found: int
    ) -> ShardSearchRequest:
        """``req`` weighted by the shard's BM25 statistics: this node's stores' and those of
        the sealed segments other nodes serve for the shard, at the read's snapshot."""
        with shard.lock:
            snapshot = self._kept(shard, req, found)

            def remote(peer: PeerNode, ids: list[int]) -> tuple[TermStats | None, list[int]]:
                return peer.segment_term_stats(req, shard.vchannel, ids, snapshot)

            pending = self._scatter.start(shard, remote)
            local = bm25.corpus_stats(req, self._corpus(shard, snapshot, req.expire_ts))
        return bm25.weighted(req, sum(self._scatter.gather(shard, remote, pending), local))

    def segment_term_stats(
        self, req: ShardSearchRequest, vchannel: str, segment_ids: list[int], snapshot: int
    ) -> tuple[TermStats | None, list[int]]:
        return self._hosted.term_stats(req, vchannel, segment_ids, snapshot)

    def _corpus(
        self, shard: Shard, snapshot: int, expire_ts: int
    ) -> list[tuple[ShardStore, np.ndarray]]:
        """Every store of ``shard`` with the rows a read at ``snapshot`` sees whatever its
        filter and partitions: what BM25's statistics count (under the shard lock)."""
        growing = [(shard.store, visible(shard.store, snapshot, [], None, expire_ts))]
        seeing = self._sealed_seen.visible
        sealed = [(s, seeing(s, snapshot, [], None, expire_ts)) for s in shard.sealed.values()]
        return growing + sealed

    def _query_shard(self, shard: Shard, req: ShardQueryRequest, tree: Any) -> QueryRows:
        found = self._snapshot(shard, req)
        with shard.lock:
            snapshot = self._kept(shard, req, found)

            def remote(peer: PeerNode, ids: list[int]) -> tuple[QueryRows | None, list[int]]:
                return peer.query_segments(req, shard.vchannel, ids, snapshot)

            pending = self._scatter.start(shard, remote)
            ensure_indexes(shard.stores(), req.scalar_indexes)
            parts = [query_store(s, req, tree, snapshot) for s in shard.stores()]
        parts += self._scatter.gather(shard, remote, pending)
        return merge_query(parts, req)
