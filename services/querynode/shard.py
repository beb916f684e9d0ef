"""A shard as one query node holds it: growing rows, sealed segments, serviceable time.

The node that reads a shard's channel leads it: it applies inserts to its growing store,
deletes to every store, and knows which other nodes serve its remaining sealed segments. A
node serving sealed segments for another leader holds a shard of the same shape with an
empty growing store and no serviceable time of its own: its leader forwards the deletes and
chooses the snapshot of every read.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace

from vectide.services.common import timestamp
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.msgstream.message import CollectionDDLMsg, DDLOp, DeleteMsg, InsertMsg
from vectide.services.common.schema import CollectionInfo, FieldSchema
from vectide.services.querynode.segment import ShardStore
from vectide.services.querynode.tsafe import TSafe

#: how long (in stamp time) a shard remembers the inserts it applied, to skip duplicates
DEDUP_WINDOW_MS = 60_000
#: ... pruned once this many are remembered (then at twice what the pruning kept, so a
#: fast shard with more inserts in the window prunes now and then, not on every insert)
DEDUP_PRUNE_AT = 4096
#: how long (in stamp time) a leader keeps the removals it applied for a node that starts
#: serving one of its segments: that segment's deltalogs reach the data node's checkpoint,
#: seconds behind the channel (minutes while the data node is down); older ones are dropped,
#: else a single node that never moves a segment would keep every delete it ever met
REMOVALS_WINDOW_MS = 600_000
#: what a leader forwards to the nodes serving its sealed segments, and replays to a segment
#: loaded later: deletes, partition drops, and fields added (AddCollectionField)
Removal = DeleteMsg | CollectionDDLMsg


@dataclass
class Shard:
    collection: CollectionInfo
    vchannel: str
    store: ShardStore
    tsafe: TSafe = field(default_factory=TSafe)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: flushed segments loaded from S3 into this node, by segment id
    sealed: dict[int, ShardStore] = field(default_factory=dict)
    #: segments whose rows sealed stores serve, here or on other nodes: their own ids and
    #: those they were compacted from (inserts of these met in the channel are not applied)
    covered: set[int] = field(default_factory=set)
    #: dropped partitions and their DropPartition stamps: hidden at once, freed later
    dropped: dict[int, int] = field(default_factory=dict)
    #: dropped partitions whose sealed segments are still to be freed
    unfreed: set[int] = field(default_factory=set)
    #: sealed segments other nodes serve for this shard: segment id -> node id
    remote: dict[int, int] = field(default_factory=dict)
    #: remote segments whose node stopped answering: reads fail until they are placed again
    lost: set[int] = field(default_factory=set)
    #: deletes and partition drops applied from the channel since this node started leading
    #: the shard: a node that starts serving one of its segments gets them all (the
    #: segment's deltalogs end where the data node last persisted)
    removals: list[Removal] = field(default_factory=list)
    #: the newest stamp of a removal dropped from ``removals``: a segment whose deltalogs end
    #: before it cannot get every later delete from here (``removals_since`` refuses)
    removals_floor: int = 0
    #: inserts applied lately (``InsertMsg.identity``) -> physical ms of their stamp: the
    #: same record met again (a producer's retry stored it twice) is not applied twice
    applied: dict[tuple[int, int, int, int], int] = field(default_factory=dict)
    _prune_at: int = DEDUP_PRUNE_AT
    #: the newest delete stamp a compacted segment served here was written with: rows
    #: deleted up to it are gone, so no read may travel to an older snapshot
    purged_ts: int = 0

    def first_time(self, msg: InsertMsg) -> bool:
        """Whether ``msg`` was not applied before (and remember it, for ``DEDUP_WINDOW_MS``
        of stamps: a retried write lands right after the original)."""
        key = msg.identity()
        if key in self.applied:
            return False
        now = timestamp.physical_ms(msg.ts)
        self.applied[key] = now
        if len(self.applied) > self._prune_at:
            horizon = now - DEDUP_WINDOW_MS
            self.applied = {k: ms for k, ms in self.applied.items() if ms >= horizon}
            self._prune_at = max(DEDUP_PRUNE_AT, 2 * len(self.applied))
        return True

    def remember_removals(self, removals: list[Removal], now_ts: int) -> None:
        """Keep the removals just applied, and drop those older than ``REMOVALS_WINDOW_MS``
        before ``now_ts`` (the list is in stamp order: only its head is looked at)."""
        self.removals.extend(removals)
        horizon = timestamp.physical_ms(now_ts) - REMOVALS_WINDOW_MS
        old = 0
        while old < len(self.removals) and timestamp.physical_ms(self.removals[old].ts) < horizon:
            old += 1
        if old:
            self.removals_floor = max(self.removals_floor, self.removals[old - 1].ts)
            del self.removals[:old]

    def removals_since(self, since_ts: int) -> list[Removal]:
        """The removals stamped after ``since_ts``, for a segment whose deltalogs reach it;
        refused when some of them were dropped already (the caller plans again, with a
        newer checkpoint)."""
        if since_ts < self.removals_floor:
            raise MilvusError(
                Code.SERVICE_UNAVAILABLE,
                f"shard {self.vchannel} no longer holds the deletes after {since_ts} "
                f"(kept from {self.removals_floor}): the segment's deltalogs are too old",
            )
        return [m for m in self.removals if m.ts > since_ts]

    def stores(self) -> list[ShardStore]:
        return [self.store, *self.sealed.values()]

    def add_field(self, added: FieldSchema) -> None:
        """AddCollectionField, met in the channel (or forwarded by the leader): the schema
        and every store gain the field; rows held so far read as its default value, or null."""
        schema = self.collection.schema
        if schema.field(added.name) is None:
            self.collection = replace(self.collection, schema=schema.with_field(added))
        for store in self.stores():
            store.add_field(added)

    def memory_bytes(self) -> tuple[int, dict[int, int]]:
        """(growing rows, per sealed segment) estimated bytes held in memory."""
        row = self.collection.row_bytes()
        return self.store.num_rows * row, {s: st.num_rows * row for s, st in self.sealed.items()}


def adds_field(msg: object) -> bool:
    return isinstance(msg, CollectionDDLMsg) and msg.op == DDLOp.ADD_FIELD


def is_removal(msg: object) -> bool:
    """Whether ``msg`` changes every store of a shard (``Removal``)."""
    return isinstance(msg, DeleteMsg) or (
        isinstance(msg, CollectionDDLMsg) and msg.op in (DDLOp.DROP_PARTITION, DDLOp.ADD_FIELD)
    )


def apply_removal(shard: Shard, msg: Removal) -> int:
    """A delete, a partition drop or an added field on every store of ``shard``; returns
    the rows it hid."""
    if isinstance(msg, DeleteMsg):
        return sum(store.delete(msg) for store in shard.stores())
    if msg.op == DDLOp.ADD_FIELD:
        shard.add_field(FieldSchema.from_json(msg.schema))
        return 0
    shard.dropped[msg.partition_id] = msg.ts
    shard.unfreed.add(msg.partition_id)
    return sum(store.drop_partition(msg.partition_id, msg.ts) for store in shard.stores())


def replay_removals(store: ShardStore, removals: list[Removal]) -> None:
    """Apply ``removals`` (``Shard.removals_since``) to a newly loaded store, in order."""
    for msg in removals:
        if isinstance(msg, DeleteMsg):
            store.delete(msg)
        elif msg.op == DDLOp.ADD_FIELD:
            store.add_field(FieldSchema.from_json(msg.schema))
        else:
            store.drop_partition(msg.partition_id, msg.ts)
