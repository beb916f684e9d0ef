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
from services.common.ports import CollectionSource
from services.common.schema import CollectionInfo

log = logging.getLogger(__name__)

_LOADED = "querycoord/loaded"

#: common.proto LoadState values
LOAD_STATE_NOT_EXIST = 0
LOAD_STATE_NOT_LOAD = 1
LOAD_STATE_LOADING = 2
LOAD_STATE_LOADED = 3


class QueryNodePort(Protocol):
    def watch(self, collection: CollectionInfo, vchannel: str) -> None: ...
    def unwatch(self, vchannel: str) -> None: ...


class NodeDirectory(Protocol):
    def live_nodes(self) -> list[int]: ...
    def node(self, node_id: int) -> QueryNodePort: ...


class QueryCoord:
    def __init__(self, kv: MetaKV, collections: CollectionSource, nodes: NodeDirectory) -> None:
        self._kv = kv
        self._collections = collections
        self._nodes = nodes
        self._lock = threading.RLock()
        #: collection id -> {vchannel: node id}
        self._assignments: dict[int, dict[str, int]] = {}

    def start(self) -> None:
        with self._lock:
            self._assignments = {
                int(key.rsplit("/", 1)[1]): {k: int(v) for k, v in json.loads(raw).items()}
                for key, raw in self._kv.list_prefix(_LOADED).items()
            }
        self.rebalance()

    def load_collection(self, collection_id: int) -> None:
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
        self._nodes.node(node_id).watch(info, vchannel)
        return node_id

    def _save(self, collection_id: int, assignment: dict[str, int]) -> None:
        self._kv.put(f"{_LOADED}/{collection_id}", json.dumps(assignment).encode())
        self._assignments[collection_id] = assignment

    def release_collection(self, collection_id: int) -> None:
        with self._lock:
            assignment = self._assignments.pop(collection_id, None)
            self._kv.delete(f"{_LOADED}/{collection_id}")
        if not assignment:
            return
        live = set(self._nodes.live_nodes())
        for vchannel, node_id in assignment.items():
            if node_id in live:
                try:
                    self._nodes.node(node_id).unwatch(vchannel)
                except Exception:
                    log.exception("unwatch failed", extra={"vchannel": vchannel, "node": node_id})

    def load_state(self, collection_id: int) -> tuple[int, int]:
        """(LoadState, progress percent) as GetLoadState / GetLoadingProgress report them."""
        with self._lock:
            if collection_id in self._assignments:
                return LOAD_STATE_LOADED, 100
            return LOAD_STATE_NOT_LOAD, 0

    def shard_leaders(self, collection_id: int) -> dict[str, int]:
        with self._lock:
            assignment = self._assignments.get(collection_id)
        if assignment is None:
            raise errors.MilvusError(
                Code.COLLECTION_NOT_LOADED, f"collection not loaded[collection={collection_id}]"
            )
        return dict(assignment)

    def rebalance(self, live: Sequence[int] | None = None) -> None:
        """Move shards off nodes that are gone (called on every membership change)."""
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
                    del assignment[vchannel]
                    assignment[vchannel] = self._assign(info, vchannel, assignment)
                    log.warning(
                        "shard reassigned",
                        extra={"vchannel": vchannel, "node": assignment[vchannel]},
                    )
                self._save(collection_id, assignment)
