"""Sealed segments a query node serves for shards that other nodes lead.

This is how one shard uses more than one node's memory and CPU: the coordinator places a
sealed segment on any node, the shard's leader sends that node every delete it applies
(``forward``), and scatters reads to it at the snapshot the leader waited for. A segment
is loaded here first and only then announced to the leader (``QueryNode.attach_segment``),
so no read meets a half-loaded segment; a read that arrives after a move released it here
is told which segments are missing, and the leader asks their new node.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from vectide.services.common import binlog
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.memory import release_freed
from vectide.services.common.requests import ShardQueryRequest, ShardSearchRequest
from vectide.services.common.results import QueryRows, SearchHits, TermStats
from vectide.services.common.schema import CollectionInfo
from vectide.services.common.search_range import band_of
from vectide.services.common.segment import Deltalog, SegmentInfo
from vectide.services.querynode import bm25
from vectide.services.querynode.reads import (
    ensure_indexes,
    merge_query,
    parse_filter,
    query_store,
    reduce_hits,
    search_store,
    visible,
)
from vectide.services.querynode.sealed import install_index_files, load_sealed, read_deltalogs
from vectide.services.querynode.segment import ShardStore
from vectide.services.querynode.shard import Removal, Shard, apply_removal

log = logging.getLogger(__name__)


class HostedSegments:
    def __init__(self, binlogs: Callable[[], binlog.Store], chunk_rows: int) -> None:
        self._binlogs = binlogs
        self._chunk_rows = chunk_rows
        self._lock = threading.Lock()
        self._shards: dict[str, Shard] = {}

    def host(
        self,
        collection: CollectionInfo,
        vchannel: str,
        segment: SegmentInfo,
        deltalogs: list[Deltalog],
    ) -> bool:
        """Load ``segment`` with the shard's persisted deletes; returns whether anything
        changed. Reads reach it once the leader attached it. Asked again for a segment held
        here, it installs new index files and applies ``deltalogs`` again: a new leader
        replays its channel only from the data node's checkpoint, and deletes persisted
        before it that the old leader never forwarded must not be missed."""
        shard = self._shard_for(collection, vchannel)
        held = shard.sealed.get(segment.segment_id)
        store = held or load_sealed(collection, segment, self._binlogs(), self._chunk_rows)
        for pks, stamps in read_deltalogs(deltalogs, self._binlogs()):
            with shard.lock:
                store.delete_keys(pks, stamps)
        if held is not None:
            return install_index_files(collection, segment, held, self._binlogs()) > 0
        with shard.lock:
            for partition_id, ts in shard.dropped.items():
                store.drop_partition(partition_id, ts)
            shard.sealed[segment.segment_id] = store
        release_freed()  # the binlogs' read buffers
        log.info(
            "segment hosted",
            extra={"vchannel": vchannel, "segment": segment.segment_id, "rows": store.num_rows},
        )
        return True

    def forward(self, vchannel: str, removals: list[Removal]) -> None:
        """The leader's deletes and partition drops, applied to every segment held for it."""
        shard = self._held(vchannel)
        with shard.lock:
            for msg in removals:
                apply_removal(shard, msg)

    def search(
        self, req: ShardSearchRequest, vchannel: str, segment_ids: list[int], snapshot: int
    ) -> tuple[SearchHits | None, list[int]]:
        """The best hits among these segments at ``snapshot`` (None: none is held here), and
        the ids not held here."""
        tree = parse_filter(req.expr, req.expr_params, req.timezone)
        band = band_of(req.metric_type, req.search_params)
        stores, missing = self._stores(vchannel, segment_ids)
        ensure_indexes(stores, req.scalar_indexes)
        parts = [search_store(s, req, tree, band, snapshot) for s in stores]
        return (reduce_hits(parts, req) if parts else None), missing

    def term_stats(
        self, req: ShardSearchRequest, vchannel: str, segment_ids: list[int], snapshot: int
    ) -> tuple[TermStats | None, list[int]]:
        """BM25's statistics of these segments' rows visible at ``snapshot`` (None: none is
        held here), and the ids not held here."""
        stores, missing = self._stores(vchannel, segment_ids)
        if not stores:
            return None, missing
        seen = [(s, visible(s, snapshot, [], None, req.expire_ts)) for s in stores]
        return bm25.corpus_stats(req, seen), missing

    def query(
        self, req: ShardQueryRequest, vchannel: str, segment_ids: list[int], snapshot: int
    ) -> tuple[QueryRows | None, list[int]]:
        tree = parse_filter(req.expr, req.expr_params, req.timezone)
        stores, missing = self._stores(vchannel, segment_ids)
        ensure_indexes(stores, req.scalar_indexes)
        parts = [query_store(s, req, tree, snapshot) for s in stores]
        return (merge_query(parts, req) if parts else None), missing

    def release(self, vchannel: str, segment_ids: list[int]) -> int:
        """Stop holding these (moved away or retired); returns how many were held."""
        with self._lock:
            shard = self._shards.get(vchannel)
        if shard is None:
            return 0
        with shard.lock:
            released = sum(shard.sealed.pop(s, None) is not None for s in segment_ids)
            empty = not shard.sealed
        release_freed()
        if empty:
            with self._lock:
                if not shard.sealed:
                    self._shards.pop(vchannel, None)
        return released

    def take(self, vchannel: str) -> dict[int, ShardStore]:
        """Hand the segments held for ``vchannel`` to this node's new leadership of it."""
        with self._lock:
            shard = self._shards.pop(vchannel, None)
        return {} if shard is None else shard.sealed

    def segments(self) -> dict[str, dict[int, ShardStore]]:
        with self._lock:
            shards = list(self._shards.values())
        return {s.vchannel: dict(s.sealed) for s in shards}

    def release_collection(self, collection_id: int) -> None:
        with self._lock:
            for vchannel, shard in list(self._shards.items()):
                if shard.collection.collection_id == collection_id:
                    del self._shards[vchannel]

    def _stores(self, vchannel: str, segment_ids: list[int]) -> tuple[list[ShardStore], list[int]]:
        with self._lock:
            shard = self._shards.get(vchannel)
        if shard is None:
            return [], list(segment_ids)
        with shard.lock:
            held = [s for s in segment_ids if s in shard.sealed]
            stores = [shard.sealed[s] for s in held]
        return stores, [s for s in segment_ids if s not in held]

    def _held(self, vchannel: str) -> Shard:
        with self._lock:
            shard = self._shards.get(vchannel)
        if shard is None:
            raise MilvusError(Code.SERVICE_NOT_READY, f"no segment of shard {vchannel} held here")
        return shard

    def _shard_for(self, collection: CollectionInfo, vchannel: str) -> Shard:
        with self._lock:
            shard = self._shards.get(vchannel)
            if shard is None:
                store = ShardStore(collection.schema, collection.indexes, self._chunk_rows)
                shard = self._shards[vchannel] = Shard(collection, vchannel, store)
            return shard
