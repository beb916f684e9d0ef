"""Where each loaded collection's shards are served, as this proxy last learned it.

Every read needs the shard leaders. Asking the query coordinator on each read cost two round
trips per search in a cluster (load state, then leaders) and made even Eventually reads hang
while the coordinator was stalled. Like Milvus's proxy (its shard-leader cache), an entry
stays until a read through it fails because a node died or no longer serves a shard, or until
the collection is loaded or released through this proxy; the reader then asks again.
"""

from __future__ import annotations

import threading
from typing import Protocol

from services.common import errors
from services.common.schema import CollectionInfo
from services.querycoord.core import LOAD_STATE_LOADED


class PlacementSource(Protocol):
    def load_state(self, collection_id: int) -> tuple[int, int]: ...
    def shard_leaders(self, collection_id: int) -> dict[str, int]: ...


class ShardLeaderCache:
    def __init__(self, source: PlacementSource) -> None:
        self._source = source
        self._lock = threading.Lock()
        self._leaders: dict[int, dict[str, int]] = {}

    def leaders(self, info: CollectionInfo) -> dict[str, int]:
        """vchannel -> query node id; raises collection_not_loaded when it is not loaded."""
        with self._lock:
            cached = self._leaders.get(info.collection_id)
        if cached is not None:
            return cached
        return self.refresh(info)

    def refresh(self, info: CollectionInfo) -> dict[str, int]:
        """Ask the coordinator again (after a read through the cached entry failed)."""
        self.invalidate(info.collection_id)
        if self._source.load_state(info.collection_id)[0] != LOAD_STATE_LOADED:
            raise errors.collection_not_loaded(info.name)
        leaders = dict(self._source.shard_leaders(info.collection_id))
        if all(v in leaders for v in info.vchannels):  # a partial answer is not kept
            with self._lock:
                self._leaders[info.collection_id] = leaders
        return leaders

    def invalidate(self, collection_id: int) -> None:
        with self._lock:
            self._leaders.pop(collection_id, None)
