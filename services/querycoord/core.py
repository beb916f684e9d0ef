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
from collections.abc import Sequence
from typing import Protocol

from services.common import errors
from services.common.errors import Code, MilvusError
from services.common.kv.base import MetaKV
from services.common.msgstream.channels import pchannel_of
from services.common.msgstream.message import Position
from services.common.ports import CollectionSource
from services.common.schema import CollectionInfo
from services.datacoord.segment import (
    PERSISTED,
    Deltalog,
    LoadPlan,
    SegmentInfo,
    SegmentState,
)
from services.querynode.chunk_index import is_interim

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
    def load_segment(self, vchannel: str, segment: SegmentInfo) -> bool: ...
    def unwatch(self, vchannel: str) -> None: ...
    def watched(self, collection_id: int | None = None) -> list[str]: ...
    def sealed_segments(self, vchannel: str) -> list[int]: ...
    def held_segments(self) -> list[int]: ...
    def release_segments(self, vchannel: str, segment_ids: list[int]) -> int: ...


class SegmentSource(Protocol):
    """The datacoord, as far as loading is concerned."""

    def segments(
        self, collection_id: int, states: tuple[SegmentState, ...] | None = None
    ) -> list[SegmentInfo]: ...
    def deltalogs(self, collection_id: int, vchannel: str) -> list[Deltalog]: ...
    def checkpoint(self, pchannel: str) -> Position | None: ...


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
    ) -> None:
        self._segments = segments
        #: (segment, node, index files) already handed off: new index files go out again
        self._handed: set[tuple[int, int, tuple[str, ...]]] = set()
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

    def _assign(self, info: CollectionInfo, vchannel: str, pending: dict[str, int]) -> int:
        """Watch ``vchannel`` on the live node serving the fewest shards (counting the
        collection's assignment in progress, ``pending``)."""
        live = self._nodes.live_nodes()
        if not live:
            raise MilvusError(Code.SERVICE_NOT_READY, "no query node is available")
        others = [a for cid, a in self._assignments.items() if cid != info.collection_id]
        load = Counter(n for a in [*others, pending] for n in a.values())
        node_id = min(live, key=lambda n: (load[n], n))
        plan = self._plan(info, vchannel)
        self._nodes.node(node_id).watch(info, vchannel, plan)
        if plan is not None:
            self._handed |= {_handoff_key(s, node_id) for s in plan.segments}
        return node_id

    def _plan(self, info: CollectionInfo, vchannel: str) -> LoadPlan | None:
        """Persisted segments of the shard, its deltalogs, and the replay offset: the data
        node's checkpoint, or earlier if a segment not yet flushed started before it."""
        if self._segments is None:
            return None
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
        return LoadPlan(
            [s for s in mine if s.state in PERSISTED],
            self._segments.deltalogs(info.collection_id, vchannel),
            replay,
        )

    def handoff(self) -> int:
        """Tell each shard's node about its newly flushed segments; returns how many.

        A segment made by compaction waits for its index files when the collection has an
        approximate index, so a search never falls from the index to an exact scan (and
        back) while the swap goes on."""
        if self._segments is None:
            return 0
        handed = 0
        with self._lock:
            assignments = {c: dict(a) for c, a in self._assignments.items()}
        for collection_id, assignment in assignments.items():
            indexed = self._needs_index_files(collection_id)
            for segment in self._segments.segments(collection_id, PERSISTED):
                node_id = assignment.get(segment.vchannel)
                if node_id is None or _handoff_key(segment, node_id) in self._handed:
                    continue
                if segment.compacted_from and indexed and not segment.index_files:
                    continue
                try:
                    self._nodes.node(node_id).load_segment(segment.vchannel, segment)
                except Exception:
                    log.exception(
                        "handoff failed; will retry",
                        extra={"segment": segment.segment_id, "node": node_id},
                    )
                    continue
                self._handed.add(_handoff_key(segment, node_id))
                handed += 1
        return handed

    def _needs_index_files(self, collection_id: int) -> bool:
        try:
            info = self._collections.describe_collection(collection_id=collection_id)
        except MilvusError:
            return False
        return any(is_interim(index, info.schema) for index in info.indexes)

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
        if not segment_ids:
            return
        for node_id in self._nodes.live_nodes():
            node = self._nodes.node(node_id)
            try:
                for vchannel in node.watched():
                    gone = sorted(set(node.sealed_segments(vchannel)) & segment_ids)
                    if gone:
                        node.release_segments(vchannel, gone)
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
        """Move shards off nodes that are gone (on every membership change, and every few
        seconds, so a shard whose load failed, e.g. S3 briefly unavailable, is retried)."""
        live_set = set(self._nodes.live_nodes() if live is None else live)
        with self._lock:
            for collection_id, assignment in list(self._assignments.items()):
                orphans = [v for v, n in assignment.items() if n not in live_set]
                if not orphans or not live_set:
                    continue
                try:
                    info = self._collections.describe_collection(collection_id=collection_id)
                except MilvusError:
                    continue
                for vchannel in orphans:
                    try:
                        node_id = self._assign(info, vchannel, assignment)
                    except Exception:
                        log.exception("shard load failed; will retry", extra={"vchannel": vchannel})
                        continue
                    assignment[vchannel] = node_id
                    log.warning("shard reassigned", extra={"vchannel": vchannel, "node": node_id})
                self._save(collection_id, assignment)


def _handoff_key(segment: SegmentInfo, node_id: int) -> tuple[int, int, tuple[str, ...]]:
    return segment.segment_id, node_id, tuple(sorted(segment.index_files))
