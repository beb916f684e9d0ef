"""The catalog: collections, partitions and indexes, persisted in the metastore.

Layout under the cluster root: ``meta/collections/{id}`` holds the collection as JSON and
``meta/names/{name}`` its id; both change in one transaction, so a crash never leaves a name
pointing nowhere. The active rootcoord is the only writer and keeps the catalog in memory.
"""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import asdict
from typing import Any

from services.common.kv.base import MetaKV, Txn
from services.common.msgstream.message import DataType
from services.common.schema import (
    CollectionInfo,
    CollectionSchema,
    ConsistencyLevel,
    FieldSchema,
    IndexInfo,
    PartitionInfo,
)

_COLLECTIONS = "meta/collections"
_NAMES = "meta/names"


def collection_to_json(info: CollectionInfo) -> bytes:
    data = asdict(info)
    data["raw_schema"] = base64.b64encode(info.raw_schema).decode()
    return json.dumps(data).encode()


def collection_from_json(raw: bytes) -> CollectionInfo:
    data: dict[str, Any] = json.loads(raw)
    schema = data.pop("schema")
    schema["fields"] = [
        FieldSchema(**{**f, "data_type": DataType(f["data_type"])}) for f in schema["fields"]
    ]
    data["schema"] = CollectionSchema(**schema)
    data["consistency_level"] = ConsistencyLevel(data["consistency_level"])
    data["partitions"] = [PartitionInfo(**p) for p in data["partitions"]]
    data["indexes"] = [IndexInfo(**i) for i in data["indexes"]]
    data["raw_schema"] = base64.b64decode(data["raw_schema"])
    return CollectionInfo(**data)


class MetaTable:
    def __init__(self, kv: MetaKV) -> None:
        self._kv = kv
        self._lock = threading.RLock()
        self._by_id: dict[int, CollectionInfo] = {}
        self.reload()

    def reload(self) -> None:
        with self._lock:
            self._by_id = {
                info.collection_id: info
                for info in map(collection_from_json, self._kv.list_prefix(_COLLECTIONS).values())
            }

    def get(self, name: str) -> CollectionInfo | None:
        with self._lock:
            return next((c for c in self._by_id.values() if c.name == name), None)

    def get_by_id(self, collection_id: int) -> CollectionInfo | None:
        with self._lock:
            return self._by_id.get(collection_id)

    def list(self) -> list[CollectionInfo]:
        with self._lock:
            return sorted(self._by_id.values(), key=lambda c: c.create_ts)

    def add(self, info: CollectionInfo) -> bool:
        """Persist a new collection; False if the name is taken."""
        with self._lock:
            txn = Txn(
                checks={f"{_NAMES}/{info.name}": None},
                puts={
                    f"{_COLLECTIONS}/{info.collection_id}": collection_to_json(info),
                    f"{_NAMES}/{info.name}": str(info.collection_id).encode(),
                },
            )
            if not self._kv.commit(txn):
                return False
            self._by_id[info.collection_id] = info
            return True

    def update(self, info: CollectionInfo) -> None:
        with self._lock:
            self._kv.put(f"{_COLLECTIONS}/{info.collection_id}", collection_to_json(info))
            self._by_id[info.collection_id] = info

    def remove(self, info: CollectionInfo) -> None:
        with self._lock:
            self._kv.commit(
                Txn(deletes=[f"{_COLLECTIONS}/{info.collection_id}", f"{_NAMES}/{info.name}"])
            )
            self._by_id.pop(info.collection_id, None)
