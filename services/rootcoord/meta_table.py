"""The catalog: collections, partitions and indexes, persisted in the metastore.

Layout under the cluster root: ``meta/collections/{id}`` holds the collection as JSON and
``meta/names/{ref}`` its id, where ``ref`` is the name qualified by its database
(services/common/names.py: bare in ``default``); both change in one transaction, so a crash
never leaves a name pointing nowhere. ``meta/databases/{name}`` holds each created database
(``default`` is implicit and never stored), ``meta/aliases/{ref}`` the id of the collection
an alias names. The active rootcoord is the only writer and keeps
the catalog in memory.
"""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import asdict
from typing import Any

from vectide.services.common.kv.base import MetaKV, Txn
from vectide.services.common.names import DEFAULT_DB, qualified, split
from vectide.services.common.schema import (
    CollectionInfo,
    CollectionSchema,
    ConsistencyLevel,
    DatabaseInfo,
    FieldSchema,
    FunctionSchema,
    IndexInfo,
    PartitionInfo,
)

_COLLECTIONS = "meta/collections"
_NAMES = "meta/names"
_DATABASES = "meta/databases"
_ALIASES = "meta/aliases"
#: the implicit default database (Milvus gives it id 1 and creation time 0)
DEFAULT_DATABASE = DatabaseInfo(db_id=1, name=DEFAULT_DB, create_ts=0)


def ref_of(info: CollectionInfo) -> str:
    """The collection's reference: its name qualified by its database."""
    return qualified(info.db_name, info.name)


def collection_to_json(info: CollectionInfo) -> bytes:
    data = asdict(info)
    data["raw_schema"] = base64.b64encode(info.raw_schema).decode()
    return json.dumps(data).encode()


def collection_from_json(raw: bytes) -> CollectionInfo:
    data: dict[str, Any] = json.loads(raw)
    schema = data.pop("schema")
    schema["fields"] = [FieldSchema.from_dict(f) for f in schema["fields"]]
    schema["functions"] = [FunctionSchema.from_dict(f) for f in schema.get("functions", [])]
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
        self._databases: dict[str, DatabaseInfo] = {}
        #: alias reference -> collection id
        self._aliases: dict[str, int] = {}
        self.reload()

    def reload(self) -> None:
        with self._lock:
            self._by_id = {
                info.collection_id: info
                for info in map(collection_from_json, self._kv.list_prefix(_COLLECTIONS).values())
            }
            stored = (
                DatabaseInfo(**json.loads(raw)) for raw in self._kv.list_prefix(_DATABASES).values()
            )
            self._databases = {DEFAULT_DB: DEFAULT_DATABASE} | {d.name: d for d in stored}
            aliases = self._kv.list_prefix(_ALIASES)
            self._aliases = {key.rsplit("/", 1)[-1]: int(raw) for key, raw in aliases.items()}

    # -- databases -------------------------------------------------------------------------

    def database(self, name: str) -> DatabaseInfo | None:
        with self._lock:
            return self._databases.get(name or DEFAULT_DB)

    def databases(self) -> list[DatabaseInfo]:
        with self._lock:
            return sorted(self._databases.values(), key=lambda d: d.create_ts)

    def add_database(self, db: DatabaseInfo) -> bool:
        """Persist a new database; False if the name is taken."""
        with self._lock:
            key = f"{_DATABASES}/{db.name}"
            txn = Txn(checks={key: None}, puts={key: json.dumps(asdict(db)).encode()})
            if db.name in self._databases or not self._kv.commit(txn):
                return False
            self._databases[db.name] = db
            return True

    def update_database(self, db: DatabaseInfo) -> None:
        """Store a database's new properties (``default`` too, once altered)."""
        with self._lock:
            self._kv.put(f"{_DATABASES}/{db.name}", json.dumps(asdict(db)).encode())
            self._databases[db.name] = db

    def remove_database(self, name: str) -> None:
        with self._lock:
            self._kv.commit(Txn(deletes=[f"{_DATABASES}/{name}"]))
            self._databases.pop(name, None)

    # -- aliases ---------------------------------------------------------------------------

    def alias_target(self, ref: str) -> int | None:
        """The id of the collection the alias ``ref`` names, None if it is no alias."""
        with self._lock:
            return self._aliases.get(ref)

    def aliases_of(self, collection_id: int) -> list[str]:
        """The references of the aliases naming this collection, sorted."""
        with self._lock:
            return sorted(ref for ref, cid in self._aliases.items() if cid == collection_id)

    def aliases_in(self, db_name: str) -> list[str]:
        """The references of every alias in a database, sorted."""
        with self._lock:
            found = (ref for ref in self._aliases if split(ref)[0] == db_name)
            return sorted(found)

    def put_alias(self, ref: str, collection_id: int) -> None:
        """Create or move an alias."""
        with self._lock:
            self._kv.put(f"{_ALIASES}/{ref}", str(collection_id).encode())
            self._aliases[ref] = collection_id

    def remove_alias(self, ref: str) -> None:
        with self._lock:
            if self._aliases.pop(ref, None) is not None:
                self._kv.commit(Txn(deletes=[f"{_ALIASES}/{ref}"]))

    # -- collections -----------------------------------------------------------------------

    def get(self, ref: str) -> CollectionInfo | None:
        """The collection ``ref`` (a name qualified by its database) names."""
        with self._lock:
            return next((c for c in self._by_id.values() if ref_of(c) == ref), None)

    def get_by_id(self, collection_id: int) -> CollectionInfo | None:
        with self._lock:
            return self._by_id.get(collection_id)

    def list(self, db_name: str | None = None) -> list[CollectionInfo]:
        """Every collection, or those of one database, oldest first."""
        with self._lock:
            chosen = [c for c in self._by_id.values() if db_name in (None, c.db_name)]
            return sorted(chosen, key=lambda c: c.create_ts)

    def add(self, info: CollectionInfo) -> bool:
        """Persist a new collection; False if the name is taken."""
        with self._lock:
            txn = Txn(
                checks={f"{_NAMES}/{ref_of(info)}": None},
                puts={
                    f"{_COLLECTIONS}/{info.collection_id}": collection_to_json(info),
                    f"{_NAMES}/{ref_of(info)}": str(info.collection_id).encode(),
                },
            )
            if not self._kv.commit(txn):
                return False
            self._by_id[info.collection_id] = info
            return True

    def rename(self, old: CollectionInfo, new: CollectionInfo) -> bool:
        """Move a collection to a new name (and database) in one transaction; False if the
        new name is taken."""
        with self._lock:
            txn = Txn(
                checks={f"{_NAMES}/{ref_of(new)}": None},
                puts={
                    f"{_COLLECTIONS}/{new.collection_id}": collection_to_json(new),
                    f"{_NAMES}/{ref_of(new)}": str(new.collection_id).encode(),
                },
                deletes=[f"{_NAMES}/{ref_of(old)}"],
            )
            if not self._kv.commit(txn):
                return False
            self._by_id[new.collection_id] = new
            return True

    def update(self, info: CollectionInfo) -> None:
        with self._lock:
            self._kv.put(f"{_COLLECTIONS}/{info.collection_id}", collection_to_json(info))
            self._by_id[info.collection_id] = info

    def remove(self, info: CollectionInfo) -> None:
        with self._lock:
            self._kv.commit(
                Txn(deletes=[f"{_COLLECTIONS}/{info.collection_id}", f"{_NAMES}/{ref_of(info)}"])
            )
            self._by_id.pop(info.collection_id, None)
