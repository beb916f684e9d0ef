"""Where each loaded collection is served, as this proxy last learned it: the query node
leading every shard in each replica, and which partitions are loaded.

Every read needs both. Asking the query coordinator on each read cost round trips per search
in a cluster and made even Eventually reads hang while the coordinator was stalled. Like
Milvus's proxy (its shard-leader cache), an entry stays until a read through it fails because
a node died or no longer serves a shard, until a read names a partition the entry does not
have loaded, or until this proxy loads or releases the collection or its partitions; the
reader then asks again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

from vectide.services.common import errors
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.schema import CollectionInfo


class PlacementSource(Protocol):
    def loaded_partitions(self, collection_id: int) -> list[int] | None: ...
    def replicas(self, collection_id: int) -> list[dict[str, int]]: ...


@dataclass(frozen=True)
class Placement:
    #: per replica, vchannel -> the query node leading it
    replicas: list[dict[str, int]]
    #: the partition ids reads may see; None when the whole collection is loaded
    partitions: list[int] | None


class ShardLeaderCache:
    def __init__(self, source: PlacementSource) -> None:
        self._source = source
        self._lock = threading.Lock()
        self._placements: dict[int, Placement] = {}

    def get(self, info: CollectionInfo) -> Placement:
        """The collection's placement; raises collection_not_loaded when nothing is loaded."""
        with self._lock:
            cached = self._placements.get(info.collection_id)
        return cached if cached is not None else self.refresh(info)

    def refresh(self, info: CollectionInfo) -> Placement:
        """Ask the coordinator again (after a read through the cached entry failed)."""
        self.invalidate(info.collection_id)
        try:
            partitions = self._source.loaded_partitions(info.collection_id)
        except MilvusError as exc:
            if exc.code == Code.COLLECTION_NOT_LOADED:
                raise errors.collection_not_loaded(info.name) from exc
            raise
        placement = Placement(self._source.replicas(info.collection_id), partitions)
        whole = all(v in r for r in placement.replicas for v in info.vchannels)
        if placement.replicas and whole:  # a partial answer is not kept
            with self._lock:
                self._placements[info.collection_id] = placement
        return placement

    def invalidate(self, collection_id: int) -> None:
        with self._lock:
            self._placements.pop(collection_id, None)
