"""The root coordinator's logic, free of transport: TSO, ids, DDL, catalog and timeticks.

DDL runs one at a time and in timestamp order: each request carries the stamp its proxy gave
it, and a request older than the newest executed DDL is refused (its proxy lost a race with
another proxy; the client retries and gets a newer stamp). Collection DDL is also written to
the collection's channels, so consumers see it in order with the data; the message carries a
stamp taken here and held back from the ticker until written, since the proxy's stamp may
already lie below a tick.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from vectide.services.common import collection_properties, errors, timestamp
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.id_allocator import IDAllocator
from vectide.services.common.kv.base import MetaKV
from vectide.services.common.msgstream.channels import pchannels, vchannel
from vectide.services.common.msgstream.message import (
    CollectionDDLMsg,
    DDLOp,
    Message,
    Position,
    TimeTickMsg,
)
from vectide.services.common.names import (
    DEFAULT_DB,
    describe,
    qualified,
    split,
    validate_db_name,
    validate_name,
)
from vectide.services.common.pacer import Pacer
from vectide.services.common.schema import (
    JSON_PATH,
    CollectionInfo,
    CollectionSchema,
    ConsistencyLevel,
    DatabaseInfo,
    FieldSchema,
    IndexInfo,
    PartitionInfo,
)
from vectide.services.common.tso import TSOAllocator
from vectide.services.rootcoord.ddl_requests import RequestLog, once_per_stamp
from vectide.services.rootcoord.meta_table import MetaTable, ref_of
from vectide.services.rootcoord.timetick_sync import TimeTickSync

log = logging.getLogger(__name__)

DEFAULT_PARTITION = "_default"
MAX_SHARDS = 16
#: Milvus's ``rootCoord.maxDatabaseNum``
MAX_DATABASES = 64


class ChannelWriter(Protocol):
    """Writes to pchannels and returns each message's offset once the broker has it."""

    def write(self, messages: Sequence[tuple[str, Message]]) -> list[int]: ...


class TickIndex(Protocol):
    """Where each tick round's TimeTicks landed: {channel: (offset, stamp)} (see
    ``msgstream/tick_index.py``; the data node cuts its batches there)."""

    def publish(self, ticks: Mapping[str, tuple[int, int]]) -> None: ...


class CacheInvalidator(Protocol):
    """Tells every proxy that a collection's meta changed (InvalidateCollectionMetaCache)."""

    def invalidate(self, collection_name: str) -> None: ...

    def wake_timeticks(self, proxy_ids: list[int]) -> None:
        """Ask these proxies for a timetick report now (an urgent one)."""


class RootCoord:
    def __init__(
        self,
        kv: MetaKV,
        writer: ChannelWriter,
        cluster: str,
        dml_channels: int,
        server_id: int = 0,
        tso_window_ms: int = 3000,
        invalidator: CacheInvalidator | None = None,
        tick_pacer: Pacer | None = None,
        clock_ms: Callable[[], int] = timestamp.now_ms,
        tick_index: TickIndex | None = None,
    ) -> None:
        self.server_id = server_id
        self._writer = writer
        self._tick_index = tick_index
        self._invalidator = invalidator
        self.pchannels = pchannels(cluster, dml_channels)
        self.tso = TSOAllocator(kv, window_ms=tso_window_ms, clock=clock_ms)
        self.ids = IDAllocator(kv)
        self.meta = MetaTable(kv)
        self._dd_lock = threading.Lock()
        #: allocation of a stamp and its registration as in-flight are one step for the ticker
        self._stamp_lock = threading.Lock()
        self._last_ddl_ts = 0
        #: DDL outcomes by stamp: a retried request is answered, not run twice
        self.requests = RequestLog()
        #: called after an urgent proxy report or an own DDL write (wakes the tick loop)
        self.on_report: Callable[[], None] = lambda: None
        #: told the live proxies' session ids whenever they change (datacoord's imports)
        self.on_live_proxies: Callable[[Sequence[int]], None] = lambda ids: None
        #: the tick loop's period: fast while reports are urgent, backing off when idle
        self.tick_pacer = tick_pacer or Pacer(0.05, 0.05)
        #: while active, only channels that need a tick get one; each at least per idle period
        self.ticks = TimeTickSync(self.pchannels, max_quiet_s=self.tick_pacer.idle_s)
        self._next_pchannel = 0

    def start(self) -> None:
        """Take over as the active coordinator: TSO above every stamp ever given out."""
        self.tso.initialize()
        self.meta.reload()
        self._last_ddl_ts = max((c.create_ts for c in self.meta.list()), default=0)

    # -- allocation ------------------------------------------------------------------------

    def alloc_timestamp(self, count: int = 1) -> int:
        return self.tso.alloc(count)

    def alloc_ids(self, count: int = 1) -> tuple[int, int]:
        return self.ids.alloc(count)

    # -- timeticks -------------------------------------------------------------------------

    def report_timetick(
        self,
        source_id: int,
        channels: dict[str, int],
        urgent: bool = False,
        ends: dict[str, int] | None = None,
        written: dict[str, int] | None = None,
        wanted: dict[str, int] | None = None,
    ) -> tuple[bool, list[Position]]:
        """Record a proxy's promise (where its acknowledged writes end, the stamp of its
        latest finished write per channel, the ticks its readers wait for). An urgent one (a
        reader waits: a finished write) ticks at once and keeps the ticks fast for a while;
        a periodic one waits for the next paced tick. Returns whether the cluster is active,
        so that idle proxies report at the fast period too while another proxy's writes need
        their promises, and the fences every promise covers now: Bounded and Session reads
        carry them, so they need no TimeTick that recent (the idle broadcast is slow)."""
        self.ticks.report(source_id, channels, ends, written)
        if wanted:
            self.ticks.want(wanted)
        now = time.monotonic()
        if urgent:
            self.tick_pacer.activity(now)
            # twice the fast period: a proxy reporting at that pace is not woken by jitter
            stale = self.ticks.stale(source_id, now, 2 * self.tick_pacer.fast_s)
            if stale and self._invalidator is not None:
                # another proxy's old promise would hold this tick back by up to its idle
                # period: ask it for a fresh one (the service does this off this thread)
                self._invalidator.wake_timeticks(stale)
            self.on_report()
        return self.tick_pacer.active(now), self.ticks.fences(None, self.pchannels)

    def read_fence(
        self,
        source_id: int,
        channels: dict[str, int],
        ends: dict[str, int],
        ts: int,
        written: dict[str, int] | None = None,
    ) -> list[Position]:
        """Record a proxy's promise, taken after it stamped a Strong read ``ts``, and answer
        with a fence at ``ts`` for every channel whose writers all promised that far (see
        ``TimeTickSync``). The other channels need a TimeTick: the proxy asks for one."""
        self.ticks.report(source_id, channels, ends, written)
        return self.ticks.fences(ts, self.pchannels)

    def want_ticks(self, stamps: dict[str, int]) -> None:
        """Something waits for TimeTicks reaching these stamps on these channels (a sealed
        segment's flush): tick them now, though nothing may have been written there."""
        self.ticks.want(stamps)
        self.tick_pacer.activity(time.monotonic())
        self.on_report()

    def set_live_proxies(self, source_ids: Sequence[int]) -> None:
        self.ticks.set_live(source_ids)
        self.on_live_proxies(source_ids)

    def broadcast_ticks(self) -> dict[str, int]:
        """Write the TimeTicks that became safe (the service calls this every interval): to
        every channel when idle, only where needed while active."""
        everywhere = not self.tick_pacer.active(time.monotonic())
        with self._stamp_lock:
            ticks = self.ticks.next_ticks(self.tso.alloc(), everywhere)
        if ticks:
            msg_id = self.ids.alloc_one()
            offsets = self._writer.write(
                [(ch, TimeTickMsg(msg_id, ts, self.server_id)) for ch, ts in ticks.items()]
            )
            self.ticks.written({ch: o + 1 for ch, o in zip(ticks, offsets, strict=True)})
            if self._tick_index is not None:
                # after the acknowledgement: an entry never names a tick not yet written
                self._tick_index.publish(
                    {
                        ch: (offset, ts)
                        for (ch, ts), offset in zip(ticks.items(), offsets, strict=True)
                    }
                )
        return ticks

    def update_tso(self) -> None:
        self.tso.update()

    # -- DDL ---------------------------------------------------------------------------------

    def _begin_ddl(self, ts: int) -> None:
        if ts <= self._last_ddl_ts:
            raise MilvusError(
                Code.DDL_OUT_OF_ORDER,
                f"DDL stamped {ts} is older than the last executed DDL ({self._last_ddl_ts}); "
                "retry the request",
            )
        self._last_ddl_ts = ts

    def _broadcast_ddl(
        self,
        info: CollectionInfo,
        op: DDLOp,
        partition: PartitionInfo | None = None,
        field: FieldSchema | None = None,
    ) -> tuple[int, list[int]]:
        """Stamp a DDL message and write it to the collection's channels: (stamp, offsets)."""
        channels = list(dict.fromkeys(info.pchannels))
        with self._stamp_lock:
            msg = CollectionDDLMsg(
                msg_id=self.ids.alloc_one(),
                ts=self.tso.alloc(),
                source_id=self.server_id,
                op=op,
                collection_id=info.collection_id,
                collection_name=info.name,
                partition_id=partition.partition_id if partition else -1,
                partition_name=partition.name if partition else "",
                schema=_ddl_payload(info, op, field),
            )
            for ch in channels:
                self.ticks.begin_own(ch, msg.ts)
        ends: dict[str, int] = {}
        try:
            offsets = self._writer.write([(ch, msg) for ch in channels])
            ends = {ch: o + 1 for ch, o in zip(channels, offsets, strict=True)}
            return msg.ts, offsets
        finally:
            for ch in channels:
                self.ticks.end_own(ch, msg.ts, ends.get(ch))
            self.tick_pacer.activity(time.monotonic())
            self.on_report()  # readers of the collection wait for a tick past the DDL

    # -- databases -------------------------------------------------------------------------

    @once_per_stamp
    def create_database(
        self, ts: int, name: str, properties: dict[str, str] | None = None
    ) -> DatabaseInfo:
        validate_db_name(name)
        collection_properties.check(properties or {})
        with self._dd_lock:
            if self.meta.database(name) is not None:
                raise MilvusError(Code.UNEXPECTED, f"database already exist: {name}")
            if len(self.meta.databases()) >= MAX_DATABASES:
                raise MilvusError(
                    Code.DATABASE_NUM_LIMIT_EXCEEDED,
                    f"exceeded the limit number of database[limit={MAX_DATABASES}]",
                )
            self._begin_ddl(ts)
            db = DatabaseInfo(self.ids.alloc_one(), name, ts, dict(properties or {}))
            if not self.meta.add_database(db):
                raise MilvusError(Code.UNEXPECTED, f"database already exist: {name}")
            return db

    @once_per_stamp
    def drop_database(self, ts: int, name: str) -> None:
        """As Milvus: ``default`` stays, a database with collections stays, and dropping a
        missing database succeeds (the drop is idempotent)."""
        if name == DEFAULT_DB:
            raise MilvusError(Code.UNEXPECTED, "can not drop default database")
        with self._dd_lock:
            if self.meta.database(name) is None:
                return
            if self.meta.list(name):
                raise MilvusError(
                    Code.UNEXPECTED,
                    f"database:{name} not empty, must drop all collections before drop database",
                )
            self._begin_ddl(ts)
            self.meta.remove_database(name)

    @once_per_stamp
    def alter_database(
        self, ts: int, name: str, properties: dict[str, str], delete_keys: Sequence[str] = ()
    ) -> DatabaseInfo:
        """Set or delete properties (one or the other per call, as Milvus requires). They are
        stored and described; ``timezone`` is the one collections created later inherit."""
        collection_properties.check(properties)
        with self._dd_lock:
            db = self._require_db(name)
            kept = collection_properties.merged(
                "alter database", db.properties, properties, delete_keys
            )
            altered = replace(db, properties=kept)
            self._begin_ddl(ts)
            self.meta.update_database(altered)
            return altered

    def list_databases(self) -> list[DatabaseInfo]:
        return self.meta.databases()

    def describe_database(self, name: str) -> DatabaseInfo:
        return self._require_db(name)

    def _require_db(self, name: str) -> DatabaseInfo:
        db = self.meta.database(name)
        if db is None:
            raise errors.database_not_found(name)
        return db

    # -- collections -----------------------------------------------------------------------

    @once_per_stamp
    def create_collection(
        self,
        ts: int,
        schema: CollectionSchema,
        shards_num: int,
        consistency_level: ConsistencyLevel,
        properties: dict[str, str] | None = None,
        raw_schema: bytes = b"",
        db_name: str = DEFAULT_DB,
    ) -> CollectionInfo:
        shards_num = shards_num or 1
        if not 1 <= shards_num <= MAX_SHARDS:
            raise errors.invalid(f"shard_num must be in [1, {MAX_SHARDS}], got {shards_num}")
        collection_properties.check(properties or {})
        validate_name(schema.name)
        db_name = db_name or DEFAULT_DB
        ref = qualified(db_name, schema.name)
        with self._dd_lock:
            db = self._require_db(db_name)
            properties = collection_properties.inherited(db.properties, properties or {})
            if self.meta.get(ref) is not None:
                raise errors.invalid(f"collection {schema.name} already exists")
            if self.meta.alias_target(ref) is not None:
                raise MilvusError(
                    Code.ALIAS_COLLECTION_NAME_CONFLICT,
                    f"collection name [{schema.name}] conflicts with an existing alias, "
                    "please choose a unique name",
                )
            self._begin_ddl(ts)
            collection_id = self.ids.alloc_one()
            chosen = [self._pick_pchannel() for _ in range(shards_num)]
            info = CollectionInfo(
                collection_id=collection_id,
                name=schema.name,
                schema=schema,
                shards_num=shards_num,
                vchannels=[vchannel(p, collection_id, k) for k, p in enumerate(chosen)],
                pchannels=chosen,
                consistency_level=consistency_level,
                create_ts=ts,
                partitions=[PartitionInfo(self.ids.alloc_one(), DEFAULT_PARTITION, ts)],
                properties=dict(properties or {}),
                raw_schema=raw_schema,
                db_name=db_name,
            )
            info.create_ts, offsets = self._broadcast_ddl(info, DDLOp.CREATE_COLLECTION)
            info.start_offsets = dict(zip(dict.fromkeys(info.pchannels), offsets, strict=True))
            if not self.meta.add(info):
                raise errors.invalid(f"collection {schema.name} already exists")
            log.info("collection created", extra={"collection": schema.name, "id": collection_id})
            return info

    def _pick_pchannel(self) -> str:
        channel = self.pchannels[self._next_pchannel % len(self.pchannels)]
        self._next_pchannel += 1
        return channel

    @once_per_stamp
    def drop_collection(self, ts: int, name: str) -> None:
        """As Milvus: not through an alias, and not while aliases name the collection."""
        with self._dd_lock:
            if self.meta.alias_target(name) is not None:
                raise MilvusError(
                    Code.UNEXPECTED, f"cannot drop the collection via alias = {split(name)[1]}"
                )
            info = self._require(name)
            aliases = [split(a)[1] for a in self.meta.aliases_of(info.collection_id)]
            if aliases:
                raise MilvusError(
                    Code.UNEXPECTED,
                    f"unable to drop the collection [{info.name}] because it has associated "
                    f"aliases {aliases}, please remove all aliases before dropping the collection",
                )
            self._begin_ddl(ts)
            self._broadcast_ddl(info, DDLOp.DROP_COLLECTION)
            self.meta.remove(info)
        self._invalidate(name)

    def truncate_collection(self, ts: int, name: str) -> None:
        """Every row inserted before ``ts`` goes (TruncateCollection): reads at or after it
        skip them, compaction and garbage collection remove them; the schema, indexes,
        partitions, aliases and load state stay."""
        with self._dd_lock:
            info = self._require(name)
            self._begin_ddl(ts)
            self.meta.update(replace(info, truncated_ts=ts))
        self._invalidate_collection(info)
        log.info("collection truncated", extra={"collection": info.name, "ts": ts})

    @once_per_stamp
    def rename_collection(self, ts: int, old: str, new_db: str, new_name: str) -> None:
        """Rename a collection, possibly into another database, with Milvus's checks: not
        through an alias, not onto an alias or a taken name, and not across databases while
        aliases name it (they would be left in the old one). Ids, channels and data stay."""
        validate_name(new_name)
        new = qualified(new_db, new_name)
        with self._dd_lock:
            if self.meta.database(new_db) is None:
                raise MilvusError(Code.UNEXPECTED, f"target database:{new_db} not found")
            if self.meta.alias_target(old) is not None:
                raise MilvusError(
                    Code.UNEXPECTED,
                    f"unsupported use an alias to rename collection, alias:{split(old)[1]}",
                )
            if self.meta.alias_target(new) is not None:
                raise MilvusError(
                    Code.UNEXPECTED, f"cannot rename collection to an existing alias: {new_name}"
                )
            if self.meta.get(new) is not None:
                raise MilvusError(
                    Code.UNEXPECTED,
                    f"duplicated new collection name {new_db}:{new_name} with other collection "
                    "name or alias",
                )
            info = self._require(old)
            aliases = self.meta.aliases_of(info.collection_id)
            if aliases and new_db != info.db_name:
                raise MilvusError(
                    Code.UNEXPECTED,
                    "fail to rename db name, must drop all aliases of this collection before "
                    "rename",
                )
            self._begin_ddl(ts)
            if not self.meta.rename(info, replace(info, name=new_name, db_name=new_db)):
                raise MilvusError(Code.UNEXPECTED, f"collection name {new_name} is taken")
        for ref in [old, *aliases]:
            self._invalidate(ref)

    @once_per_stamp
    def alter_collection(
        self, ts: int, name: str, properties: dict[str, str], delete_keys: Sequence[str] = ()
    ) -> CollectionInfo:
        """Set or delete properties (one or the other per call, as Milvus requires), through
        an alias too. Proxies are told at once: a new TTL bounds the next read
        (``collection_properties``)."""
        collection_properties.check(properties)
        with self._dd_lock:
            info = self._require(name)
            kept = collection_properties.merged(
                "alter collection", info.properties, properties, delete_keys
            )
            altered = replace(info, properties=kept)
            self._begin_ddl(ts)
            self.meta.update(altered)
        self._invalidate_collection(info)
        log.info("collection altered", extra={"collection": info.name, "properties": properties})
        return altered

    @once_per_stamp
    def add_collection_field(self, ts: int, name: str, added: FieldSchema) -> CollectionInfo:
        """AddCollectionField: ``added`` (checked by the proxy) joins the schema under the next
        field id, and an ADD_FIELD message on every channel of the collection tells its
        readers where in the stream it begins: rows written before lack it (null, or its
        default value, when read)."""
        with self._dd_lock:
            info = self._require(name)
            if info.schema.field(added.name) is not None:
                raise errors.invalid(f"duplicate field name {added.name} in collection {info.name}")
            field_id = max(f.field_id for f in info.schema.fields) + 1
            new = replace(added, field_id=field_id)
            altered = replace(info, schema=info.schema.with_field(new))
            self._begin_ddl(ts)
            added_ts, _ = self._broadcast_ddl(altered, DDLOp.ADD_FIELD, field=new)
            altered = replace(altered, update_ts=added_ts)
            self.meta.update(altered)
        self._invalidate_collection(info)
        log.info("collection field added", extra={"collection": info.name, "field": new.name})
        return altered

    @once_per_stamp
    def alter_collection_field(
        self,
        ts: int,
        name: str,
        field_name: str,
        properties: dict[str, str],
        delete_keys: Sequence[str] = (),
    ) -> CollectionInfo:
        """A field's ``max_length``, ``max_capacity`` or ``mmap.enabled``
        (``collection_properties.altered_field`` says which fields take which)."""
        with self._dd_lock:
            info = self._require(name)
            fields = {f.name: f for f in info.schema.fields if not f.is_dynamic}
            if field_name not in fields:
                raise errors.invalid(f"field {field_name} does not exist in collection {info.name}")
            new = collection_properties.altered_field(fields[field_name], properties, delete_keys)
            schema = replace(
                info.schema, fields=[new if f.name == field_name else f for f in info.schema.fields]
            )
            altered = replace(info, schema=schema, update_ts=ts)
            self._begin_ddl(ts)
            self.meta.update(altered)
        self._invalidate_collection(info)
        log.info("collection field altered", extra={"collection": info.name, "field": field_name})
        return altered

    def describe_collection(
        self, name: str | None = None, collection_id: int = 0
    ) -> CollectionInfo:
        """By reference (a name qualified by its database) or by id."""
        if not name:
            info = self.meta.get_by_id(collection_id)
            if info is None:
                raise errors.collection_not_found(str(collection_id))
            return info
        return self._require(name)

    def show_collections(self, db_name: str | None = None) -> list[CollectionInfo]:
        """Every collection (the coordinators' view), or one database's (ShowCollections)."""
        if db_name is not None:
            self._require_db(db_name)
        return self.meta.list(db_name)

    @once_per_stamp
    def create_partition(self, ts: int, collection: str, partition: str) -> None:
        with self._dd_lock:
            info = self._require(collection)
            if info.partition(partition) is not None:
                raise errors.invalid(f"partition {partition} already exists")
            self._begin_ddl(ts)
            part = PartitionInfo(self.ids.alloc_one(), partition, ts)
            self._broadcast_ddl(info, DDLOp.CREATE_PARTITION, part)
            self.meta.update(replace(info, partitions=[*info.partitions, part]))
        self._invalidate_collection(info)

    @once_per_stamp
    def drop_partition(self, ts: int, collection: str, partition: str) -> None:
        if partition == DEFAULT_PARTITION:
            raise errors.invalid("the default partition cannot be dropped")
        with self._dd_lock:
            info = self._require(collection)
            part = info.partition(partition)
            if part is None:
                raise errors.partition_not_found(partition)
            self._begin_ddl(ts)
            self._broadcast_ddl(info, DDLOp.DROP_PARTITION, part)
            parts = [p for p in info.partitions if p.name != partition]
            self.meta.update(replace(info, partitions=parts))
        self._invalidate_collection(info)

    @once_per_stamp
    def create_index(self, ts: int, collection: str, index: IndexInfo) -> IndexInfo:
        with self._dd_lock:
            info = self._require(collection)
            field = info.schema.field(index.field_name)
            if field is None:
                raise errors.invalid(f"field {index.field_name} not exist")
            current = _index_like(info, index)
            if current is not None:
                same = (current.index_type, current.metric_type, current.params) == (
                    index.index_type,
                    index.metric_type,
                    index.params,
                )
                if same:
                    return current
                raise MilvusError(
                    Code.INDEX_DUPLICATE,
                    f"at most one distinct index is allowed per field: {index.field_name} "
                    f"has {current.index_type}/{current.metric_type}",
                )
            name = index.index_name or index.field_name
            if any(i.index_name == name for i in info.indexes):
                raise MilvusError(
                    Code.INDEX_DUPLICATE,
                    f"index name {name} is taken in collection {collection}: each JSON path "
                    "index of a field needs its own index_name",
                )
            self._begin_ddl(ts)
            created = replace(index, index_id=self.ids.alloc_one(), create_ts=ts, index_name=name)
            self.meta.update(replace(info, indexes=[*info.indexes, created]))
        self._invalidate_collection(info)
        return created

    @once_per_stamp
    def drop_index(self, ts: int, collection: str, index_name: str) -> None:
        with self._dd_lock:
            info = self._require(collection)
            kept = [i for i in info.indexes if index_name not in ("", i.index_name)]
            if len(kept) == len(info.indexes):
                raise MilvusError(Code.INDEX_NOT_FOUND, f"index not found[index={index_name}]")
            self._begin_ddl(ts)
            self.meta.update(replace(info, indexes=kept))
        self._invalidate_collection(info)

    def alter_index(
        self,
        ts: int,
        collection: str,
        index_name: str,
        properties: dict[str, str],
        delete_keys: Sequence[str] = (),
    ) -> None:
        """An index's ``mmap.enabled`` (AlterIndex)."""
        with self._dd_lock:
            info = self._require(collection)
            found = [i for i in info.indexes if i.index_name == index_name]
            if not found:
                raise MilvusError(Code.INDEX_NOT_FOUND, f"index not found[index={index_name}]")
            new = collection_properties.altered_index(found[0], properties, delete_keys)
            self._begin_ddl(ts)
            indexes = [new if i is found[0] else i for i in info.indexes]
            self.meta.update(replace(info, indexes=indexes, update_ts=ts))
        self._invalidate_collection(info)

    def reset_channel_offsets(self) -> int:
        """The channels were recreated empty (a broker that lost its log): every collection
        is now read from the start of its channels. Returns how many collections changed."""
        changed = 0
        with self._dd_lock:
            for info in self.meta.list():
                self.meta.update(replace(info, start_offsets=dict.fromkeys(info.start_offsets, 0)))
                changed += 1
        return changed

    # -- aliases ---------------------------------------------------------------------------

    @once_per_stamp
    def create_alias(self, ts: int, collection: str, alias: str) -> None:
        """``collection`` and ``alias`` are references in the same database. Creating an
        alias that already names this collection succeeds, as in Milvus."""
        validate_name(split(alias)[1], "alias")
        with self._dd_lock:
            info = self._alias_target(collection, alias)
            current = self.meta.alias_target(alias)
            if current == info.collection_id:
                return
            if current is not None:
                other = self.meta.get_by_id(current)
                raise MilvusError(
                    Code.ALIAS_ALREADY_EXIST,
                    f"alias already exist{_alias_desc(alias)}: {split(alias)[1]} is alias to "
                    f"another collection: {other.name if other else current}",
                )
            self._begin_ddl(ts)
            self.meta.put_alias(alias, info.collection_id)
        self._invalidate(alias)

    @once_per_stamp
    def alter_alias(self, ts: int, collection: str, alias: str) -> None:
        """Point an existing alias at another collection (a blue-green switch)."""
        with self._dd_lock:
            info = self._alias_target(collection, alias)
            if self.meta.alias_target(alias) is None:
                raise MilvusError(Code.ALIAS_NOT_FOUND, f"alias not found{_alias_desc(alias)}")
            self._begin_ddl(ts)
            self.meta.put_alias(alias, info.collection_id)
        self._invalidate(alias)

    @once_per_stamp
    def drop_alias(self, ts: int, alias: str) -> None:
        """Dropping a missing alias succeeds, as Milvus's meta table does."""
        with self._dd_lock:
            self._require_db(split(alias)[0])
            self._begin_ddl(ts)
            self.meta.remove_alias(alias)
        self._invalidate(alias)

    def describe_alias(self, alias: str) -> str:
        """The name of the collection the alias names."""
        self._require_db(split(alias)[0])
        target = self.meta.alias_target(alias)
        info = self.meta.get_by_id(target) if target is not None else None
        if info is None:
            raise MilvusError(Code.ALIAS_NOT_FOUND, f"alias not found{_alias_desc(alias)}")
        return info.name

    def list_aliases(self, db_name: str, collection: str = "") -> list[str]:
        """Alias names in a database, or those of one collection (a reference)."""
        self._require_db(db_name)
        if not collection:
            refs = self.meta.aliases_in(db_name)
        else:
            info = self.meta.get(collection)
            if info is None:
                raise errors.collection_not_found(split(collection)[1])
            refs = self.meta.aliases_of(info.collection_id)
        return [split(ref)[1] for ref in refs]

    def _alias_target(self, collection: str, alias: str) -> CollectionInfo:
        """The collection an alias may name: an existing collection (not an alias), and the
        alias must not be a collection's name."""
        self._require_db(split(alias)[0])
        if self.meta.get(alias) is not None:
            raise MilvusError(
                Code.ALIAS_COLLECTION_NAME_CONFLICT,
                f"alias and collection name conflict{_alias_desc(alias)}",
            )
        info = self.meta.get(collection)
        if info is None:
            raise MilvusError(
                Code.COLLECTION_NOT_FOUND, f"collection not found{describe(collection)}"
            )
        return info

    # -- lookups ---------------------------------------------------------------------------

    def _require(self, ref: str) -> CollectionInfo:
        """The collection ``ref`` names, directly or through an alias."""
        info = self.meta.get(ref)
        target = self.meta.alias_target(ref) if info is None else None
        if target is not None:
            info = self.meta.get_by_id(target)
        if info is None:
            db_name, _ = split(ref)
            self._require_db(db_name)
            raise MilvusError(Code.COLLECTION_NOT_FOUND, f"can't find collection{describe(ref)}")
        return info

    def _invalidate_collection(self, info: CollectionInfo) -> None:
        """A collection's meta changed: drop it from proxy caches under every name."""
        for ref in [ref_of(info), *self.meta.aliases_of(info.collection_id)]:
            self._invalidate(ref)

    def _invalidate(self, name: str) -> None:
        if self._invalidator is not None:
            try:
                self._invalidator.invalidate(name)
            except Exception:
                log.exception("cache invalidation failed", extra={"collection": name})


def _ddl_payload(info: CollectionInfo, op: DDLOp, field: FieldSchema | None) -> bytes:
    """What a DDL message carries in ``schema``: the collection's schema as created, or the
    field added."""
    if op == DDLOp.CREATE_COLLECTION:
        return info.raw_schema
    if op == DDLOp.ADD_FIELD and field is not None:
        return field.to_json()
    return b""


def _alias_desc(alias: str) -> str:
    """How Milvus's alias errors name one: ``[database=default][alias=a]``."""
    db_name, name = split(alias)
    return f"[database={db_name}][alias={name}]"


def _index_like(info: CollectionInfo, index: IndexInfo) -> IndexInfo | None:
    """The index a new one would duplicate: the field's, or for a JSON path index the one
    on the same path (a JSON field holds one per path, each with its own name)."""
    path = index.params.get(JSON_PATH)
    return next(
        (
            i
            for i in info.indexes
            if i.field_name == index.field_name and i.params.get(JSON_PATH) == path
        ),
        None,
    )
