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
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from services.common import binlog, errors
from services.common.errors import Code, MilvusError
from services.common.expr import ExprError, evaluate, parse
from services.common.grouping import as_values, merge_groups
from services.common.msgstream.channels import pchannel_of
from services.common.msgstream.message import (
    CollectionDDLMsg,
    DataType,
    DDLOp,
    DeleteMsg,
    InsertMsg,
    MsgPack,
)
from services.common.requests import ShardQueryRequest, ShardSearchRequest
from services.common.results import QueryRows, SearchHits, merge_hits, merge_rows, pk_order, take
from services.common.schema import CollectionInfo
from services.common.search_range import ScoreBand, band_of, distances
from services.datacoord.segment import LoadPlan, SegmentInfo
from services.querynode.chunk_index import DEFAULT_CHUNK_ROWS
from services.querynode.grouped_search import search_groups
from services.querynode.sealed import install_index_files, load_sealed, read_deltalogs
from services.querynode.segment import ShardStore
from services.querynode.tsafe import TSafe

log = logging.getLogger(__name__)

#: how long a handoff of a compacted segment waits for the shard to reach the deletes the
#: segment was written with (then it fails, and querycoord retries it)
SWAP_WAIT_S = 5.0


class ChannelSubscriber(Protocol):
    def subscribe(self, vchannel: str, pchannel: str, start_offset: int) -> None:
        """Start delivering packs of ``pchannel`` from ``start_offset`` to ``apply``."""

    def unsubscribe(self, vchannel: str) -> None: ...

    def hurry(self, vchannel: str) -> None:
        """A read of ``vchannel`` is about to wait: deliver its channel's ticks fast."""


@dataclass
class Shard:
    collection: CollectionInfo
    vchannel: str
    store: ShardStore
    tsafe: TSafe = field(default_factory=TSafe)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: flushed segments loaded from S3, by segment id
    sealed: dict[int, ShardStore] = field(default_factory=dict)
    #: segments whose rows the sealed stores serve: their own ids and those they were
    #: compacted from (inserts of these met in the channel are not applied again)
    covered: set[int] = field(default_factory=set)
    #: dropped partitions and their DropPartition stamps: hidden at once, freed later
    dropped: dict[int, int] = field(default_factory=dict)
    #: dropped partitions whose sealed segments are still to be freed
    unfreed: set[int] = field(default_factory=set)

    def stores(self) -> list[ShardStore]:
        return [self.store, *self.sealed.values()]


class _StoreColumns:
    """The expression engine's view of a shard's columns."""

    def __init__(self, store: ShardStore) -> None:
        self._store = store
        self.num_rows = store.num_rows
        dynamic = store.schema.dynamic_field
        self.dynamic_field = dynamic.name if dynamic else None

    def field_type(self, name: str) -> DataType | None:
        f = self._store.schema.field(name)
        return f.data_type if f else None

    def column(self, name: str) -> np.ndarray | list:
        if name == self._store.schema.primary.name:
            return self._store.pks()
        return self._store.column(name)

    def valid(self, name: str) -> np.ndarray | None:
        return self._store.valid(name)


class QueryNode:
    def __init__(
        self,
        node_id: int,
        subscriber: ChannelSubscriber | None = None,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
        binlogs: binlog.Store | None = None,
    ) -> None:
        self.node_id = node_id
        self._binlogs = binlogs
        self._chunk_rows = chunk_rows
        self._subscriber = subscriber
        self._shards: dict[str, Shard] = {}
        self._lock = threading.Lock()
        #: messages skipped because they could not be applied (poison), since start
        self.skipped_messages = 0

    def set_subscriber(self, subscriber: ChannelSubscriber) -> None:
        self._subscriber = subscriber

    # -- assignment (from querycoord) ------------------------------------------------------

    def watch(
        self, collection: CollectionInfo, vchannel: str, plan: LoadPlan | None = None
    ) -> None:
        """Serve ``vchannel``: load its persisted segments and deletes (``plan``), then
        replay its channel from the plan's offset (or the collection's start)."""
        if vchannel in self._shards:
            return
        shard = Shard(
            collection,
            vchannel,
            ShardStore(collection.schema, collection.indexes, self._chunk_rows),
        )
        pchannel = pchannel_of(vchannel)
        start_offset = collection.start_offsets[pchannel]
        if plan is not None:
            for segment in plan.segments:
                shard.sealed[segment.segment_id] = self._load(collection, segment)
                shard.covered |= {segment.segment_id, *segment.compacted_from}
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
                "from": start_offset,
            },
        )

    def load_segment(self, vchannel: str, segment: SegmentInfo) -> bool:
        """Handoff: serve a newly flushed segment from its binlogs instead of the rows it
        covers: its own growing rows, and for a compacted segment the sealed segments (or
        growing rows) it was merged from. The swap happens under the shard lock, so no read
        sees the rows twice or not at all; deletes already applied move along.

        Called again once the segment has index files, it installs them (until then the
        sealed segment is searched exactly). Returns whether anything changed.
        """
        shard = self._shard(vchannel)
        if segment.partition_id in shard.dropped:  # flushed after its partition was dropped
            return False
        if segment.segment_id in shard.sealed:
            loaded = shard.sealed[segment.segment_id]
            return (
                install_index_files(shard.collection, segment, loaded, self._require_binlogs()) > 0
            )
        if segment.segment_id in shard.covered:
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
        sealed = self._load(shard.collection, segment)
        with shard.lock:
            replaced = [shard.sealed.pop(s) for s in segment.compacted_from if s in shard.sealed]
            for old in [shard.store, *replaced]:
                for covered_id in (segment.segment_id, *segment.compacted_from):
                    rows = old.segment_rows(covered_id)
                    sealed.delete_keys(*old.deletes_of(rows))
                    if old is shard.store:
                        old.hide(rows)
            shard.sealed[segment.segment_id] = sealed
            shard.covered |= {segment.segment_id, *segment.compacted_from}
        log.info(
            "segment handed off",
            extra={
                "vchannel": vchannel,
                "segment": segment.segment_id,
                "rows": sealed.num_rows,
                "replaced": len(replaced),
            },
        )
        return True

    def release_segments(self, vchannel: str, segment_ids: list[int]) -> int:
        """Stop serving these sealed segments (retired with nothing replacing them: their
        rows were all deleted, or their partition dropped); returns how many were held."""
        shard = self._shard(vchannel)
        with shard.lock:
            return sum(shard.sealed.pop(s, None) is not None for s in segment_ids)

    def held_segments(self) -> list[int]:
        """Every sealed segment this node serves (garbage collection keeps their files)."""
        with self._lock:
            shards = list(self._shards.values())
        return sorted(s for shard in shards for s in shard.sealed)

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

    def watched(self, collection_id: int | None = None) -> list[str]:
        with self._lock:
            return [
                v
                for v, s in self._shards.items()
                if collection_id is None or s.collection.collection_id == collection_id
            ]

    def tsafe(self, vchannel: str) -> int:
        return self._shard(vchannel).tsafe.get()

    # -- the pipeline --------------------------------------------------------------------------

    def apply(self, vchannel: str, pack: MsgPack) -> None:
        shard = self._shards.get(vchannel)
        if shard is None:
            return
        mine = [m for m in pack.msgs if self._is_for(shard, m)]
        inserts = [m for m in mine if isinstance(m, InsertMsg)]
        with shard.lock:
            for msg in [*inserts, *(m for m in mine if not isinstance(m, InsertMsg))]:
                try:
                    self._apply_one(shard, msg)
                except Exception:  # a malformed message must not stop the shard
                    self.skipped_messages += 1
                    log.exception(
                        "skipping message that cannot be applied",
                        extra={"vchannel": vchannel, "msg_id": msg.msg_id, "ts": msg.ts},
                    )
        shard.tsafe.advance(pack.end_ts)
        if shard.unfreed:
            self._free_dropped(shard)

    @staticmethod
    def _apply_one(shard: Shard, msg: Any) -> None:
        if isinstance(msg, InsertMsg):
            if msg.segment_id not in shard.covered:  # else served from its binlogs already
                shard.store.insert(msg)
        elif isinstance(msg, DeleteMsg):
            for store in shard.stores():
                store.delete(msg)
        elif isinstance(msg, CollectionDDLMsg) and msg.op == DDLOp.DROP_PARTITION:
            shard.dropped[msg.partition_id] = msg.ts
            shard.unfreed.add(msg.partition_id)
            hidden = sum(store.drop_partition(msg.partition_id, msg.ts) for store in shard.stores())
            log.info(
                "partition dropped",
                extra={"vchannel": shard.vchannel, "partition": msg.partition_id, "rows": hidden},
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
        """Build one pending chunk index per shard and field; returns how many were built.

        Runs off the ingest path (the service calls it periodically): building takes the
        vectors of a full chunk, which never change, so no lock is held while faiss works.
        Sealed segments are not built here: the index node writes their index files.
        """
        built = 0
        for shard in list(self._shards.values()):
            for store in [shard.store]:
                for field_name, indexes in store.indexes.items():
                    with shard.lock:
                        chunk = indexes.next_chunk(store.num_rows)
                        if chunk is None:
                            continue
                        start = chunk * indexes.chunk_rows
                        vectors = store.vectors(field_name, start, start + indexes.chunk_rows)
                    indexes.install(chunk, indexes.spec.build(vectors))
                    built += 1
        return built

    # -- reads ---------------------------------------------------------------------------------

    def search(self, req: ShardSearchRequest) -> SearchHits:
        self._hurry(req.vchannels)
        tree = _parse(req.expr, req.expr_params)
        band = band_of(req.metric_type, req.search_params)
        parts = [self._search_shard(self._shard(v), req, tree, band) for v in req.vchannels]
        return _reduce(parts, req)

    def query(self, req: ShardQueryRequest) -> QueryRows:
        self._hurry(req.vchannels)
        tree = _parse(req.expr, req.expr_params)
        parts = [self._query_shard(self._shard(v), req, tree) for v in req.vchannels]
        return merge_rows(parts, 0, req.limit)

    def _hurry(self, vchannels: list[str]) -> None:
        """Before waiting on any shard: its consumer may be reading slowly (idle)."""
        if self._subscriber is not None:
            for vchannel in vchannels:
                self._subscriber.hurry(vchannel)

    def _shard(self, vchannel: str) -> Shard:
        shard = self._shards.get(vchannel)
        if shard is None:
            raise MilvusError(
                Code.SERVICE_NOT_READY, f"node {self.node_id} does not serve shard {vchannel}"
            )
        return shard

    def _snapshot(self, shard: Shard, guarantee_ts: int, timeout_s: float) -> int:
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

    @staticmethod
    def _mask(store: ShardStore, snapshot: int, partition_ids: list[int], tree: Any) -> np.ndarray:
        mask = store.candidates(snapshot, partition_ids or None).mask
        if tree is not None and mask.any():
            try:
                mask &= evaluate(tree, _StoreColumns(store))
            except ExprError as exc:
                raise errors.invalid(str(exc)) from exc
        return mask

    def _search_shard(
        self, shard: Shard, req: ShardSearchRequest, tree: Any, band: ScoreBand | None
    ) -> SearchHits:
        snapshot = self._snapshot(shard, req.guarantee_ts, req.wait_timeout_s)
        with shard.lock:
            parts = [self._search_store(s, req, tree, band, snapshot) for s in shard.stores()]
        return _reduce(parts, req)

    def _search_store(
        self,
        store: ShardStore,
        req: ShardSearchRequest,
        tree: Any,
        band: ScoreBand | None,
        snapshot: int,
    ) -> SearchHits:
        mask = self._mask(store, snapshot, req.partition_ids, tree)
        if req.group_by:
            scores, rows = search_groups(store, req, mask)
        else:
            scores, rows = self._search_band(store, req, mask, band)
        valid = rows >= 0  # -1 rows (fewer matches than topk) sort last in each query
        flat = rows[valid]
        return SearchHits(
            req.metric_type,
            valid.sum(axis=1).tolist() if len(req.vectors) else [],
            take(store.pks(), flat),
            scores[valid].astype(np.float32),
            {name: store.output(name, flat) for name in req.output_fields},
            as_values(store.output(req.group_by, flat)) if req.group_by else None,
        )

    @staticmethod
    def _search_band(
        store: ShardStore, req: ShardSearchRequest, mask: np.ndarray, band: ScoreBand | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The best ``topk`` hits per query, inside ``band`` when there is one: the search
        goes deeper (4x each round) while a query has too few hits inside the band and the
        store may hold more (a range's inner edge or an iterator's last page skips the best)."""
        k, candidates = req.topk, int(mask.sum())
        while True:
            scores, rows = store.search(
                req.anns_field, req.vectors, req.metric_type, k, mask, req.search_params
            )
            if band is None:
                return scores, rows
            inside = (rows >= 0) & band.keep(distances(req.metric_type, scores))
            exhausted = (rows >= 0).sum(axis=1) < k
            if k >= candidates or ((inside.sum(axis=1) >= req.topk) | exhausted).all():
                break
            k = min(k * 4, candidates)
        first = np.argsort(~inside, axis=1, kind="stable")[:, : req.topk]  # keeps the order
        rows = np.where(
            np.take_along_axis(inside, first, axis=1), np.take_along_axis(rows, first, axis=1), -1
        )
        return np.take_along_axis(scores, first, axis=1), rows

    def _query_shard(self, shard: Shard, req: ShardQueryRequest, tree: Any) -> QueryRows:
        snapshot = self._snapshot(shard, req.guarantee_ts, req.wait_timeout_s)
        with shard.lock:
            parts = [self._query_store(s, req, tree, snapshot) for s in shard.stores()]
        return merge_rows(parts, 0, req.limit)

    def _query_store(
        self, store: ShardStore, req: ShardQueryRequest, tree: Any, snapshot: int
    ) -> QueryRows:
        mask = self._mask(store, snapshot, req.partition_ids, tree)
        if req.count_only:
            return QueryRows(pks=[], count=int(mask.sum()))
        rows = np.flatnonzero(mask)
        rows = rows[pk_order(take(store.pks(), rows))[: req.limit]]
        return QueryRows(
            take(store.pks(), rows),
            {name: store.output(name, rows) for name in req.output_fields},
        )


def _reduce(parts: list[SearchHits], req: ShardSearchRequest) -> SearchHits:
    """Stores' or shards' hits as one: the best groups of a grouping search, else the best
    ``topk`` hits."""
    if req.group_by:
        return merge_groups(parts, req.topk, req.group_size)
    return merge_hits(parts, req.topk)


def _parse(expr: str, params: dict[str, Any]) -> Any:
    if not expr.strip():
        return None
    try:
        return parse(expr, params or None)
    except ExprError as exc:
        raise errors.invalid(str(exc)) from exc
