"""The ingest role's two ways into the proxy: the core in this process, or a live proxy's RPC.

Either way a row takes the same path as a pymilvus insert: TSO stamp, segment assignment,
hashing to its channel, timeticks.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.msgstream.message import FieldColumn
from vectide.services.common.schema import CollectionInfo


class LocalWriter:
    """The proxy core of this process (standalone mode)."""

    def __init__(self, proxy: Any) -> None:
        self._proxy = proxy

    def _target(self) -> Any:
        return self._proxy

    def describe_collection(self, name: str) -> CollectionInfo:
        return self._target().describe_collection(name)

    def insert(
        self, collection: str, partition: str, columns: dict[str, FieldColumn], num_rows: int
    ) -> Any:
        return self._target().insert(collection, partition, columns, num_rows)

    def upsert(
        self, collection: str, partition: str, columns: dict[str, FieldColumn], num_rows: int
    ) -> Any:
        return self._target().upsert(collection, partition, columns, num_rows)

    def delete_pks(self, collection: str, partition: str, pks: Any) -> Any:
        return self._target().delete_pks(collection, partition, pks)


class RemoteWriter(LocalWriter):
    """Any live proxy of the cluster, over the internal RPC: successive calls rotate over the
    proxies, and a proxy that went away is skipped from the next call on."""

    def __init__(self, proxies: Any) -> None:
        super().__init__(None)
        self._proxies = proxies
        self._turn = itertools.count()
        self._lock = threading.Lock()

    def _target(self) -> Any:
        live = self._proxies.live_nodes()
        if not live:
            raise MilvusError(Code.SERVICE_NOT_READY, "no live proxy to write through")
        with self._lock:
            turn = next(self._turn)
        return self._proxies.node(live[turn % len(live)])
