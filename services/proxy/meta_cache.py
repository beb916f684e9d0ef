"""Collection meta cached by name; the rootcoord invalidates entries after each DDL."""

from __future__ import annotations

import threading

from vectide.services.common.ports import CollectionSource
from vectide.services.common.schema import CollectionInfo


class MetaCache:
    def __init__(self, source: CollectionSource) -> None:
        self._source = source
        self._lock = threading.Lock()
        self._by_name: dict[str, CollectionInfo] = {}

    def get(self, name: str) -> CollectionInfo:
        """The collection's meta; raises the source's CollectionNotFound when absent."""
        with self._lock:
            cached = self._by_name.get(name)
        if cached is not None:
            return cached
        info = self._source.describe_collection(name)
        with self._lock:
            self._by_name[name] = info
        return info

    def invalidate(self, name: str) -> None:
        with self._lock:
            self._by_name.pop(name, None)

    def clear(self) -> None:
        with self._lock:
            self._by_name.clear()
