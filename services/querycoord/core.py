"""Query coordinator: which query nodes serve each loaded collection, in how many replicas.

Loading gives every shard of every replica a leader (the live node of the replica leading
the fewest shards), which reads the shard's channel; the shard's sealed segments go where
memory use is lowest (``shard_loading.py``, ``distribution.py``). The leaders are
persisted, so a restarted coordinator knows what is loaded. When a node's session
disappears or the node is stopping, its shards get new leaders and its segments new nodes.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from vectide.services.common import errors
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.kv.base import MetaKV
from vectide.services.common.load_state import LOAD_STATE_LOADED, LOAD_STATE_NOT_LOAD
from vectide.services.common.msgstream.message import Position
from vectide.services.common.placement import NodeLoad
from vectide.services.common.ports import CollectionSource
from vectide.services.common.schema import CollectionInfo
from vectide.services.common.segment import Deltalog, LoadPlan, SegmentInfo, SegmentState
from vectide.services.querycoord import replicas as replica_codec
from vectide.services.querycoord.balance import BalanceConfig, Balancer
from vectide.services.querycoord.distribution import Distribution, Group
from vectide.services.querycoord.replicas import Replica, assign_nodes, new_replicas
from vectide.services.querycoord.resource_groups import (
    DEFAULT_RESOURCE_GROUP,
    GroupConfig,
    ResourceGroups,
)
from vectide.services.querycoord.shard_loading import ShardLeaders, ShardLoader

log = logging.getLogger(__name__)

_LOADED = "querycoord/loaded"
#: ``{collection id}`` -> the partition ids loaded, for a collection loaded by partitions
_PARTITIONS = "querycoord/partitions"
#: ``{name}`` -> a resource group's config and nodes
_GROUPS = "querycoord/resource_groups"


class QueryNodePort(Protocol):
    def watch(
        self, collection: CollectionInfo, vchannel: str, plan: LoadPlan | None = None
    ) -> None: ...
    def load_segment(
        self,
        vchannel: str,
        segment: SegmentInfo,
        deltalogs: list[Deltalog] | None = None,
        since_ts: int = 0,
    ) -> bool: ...
    def host_segment(
        self,
        collection: CollectionInfo,
        vchannel: str,
        segment: SegmentInfo,
        deltalogs: list[Deltalog],
    ) -> bool: ...
    def attach_segment(
        self, vchannel: str, segment_id: int, node_id: int, since_ts: int, purged_ts: int = 0
    ) -> None: ...
    def unwatch(self, vchannel: str) -> None: ...
    def release(self, collection_id: int) -> None: ...
    def held_segments(self) -> list[int]: ...
    def release_segments(self, vchannel: str, segment_ids: list[int]) -> int: ...
    def release_hosted(self, vchannel: str, segment_ids: list[int]) -> int: ...
    def load_report(self) -> NodeLoad: ...


class SegmentSource(Protocol):
    """The datacoord, as far as loading is concerned."""

    def segments(
        self, collection_id: int, states: tuple[SegmentState, ...] | None = None
    ) -> list[SegmentInfo]: ...
    def deltalogs(self, collection_id: int, vchannel: str) -> list[Deltalog]: ...
    def checkpoint(self, pchannel: str) -> Position | None: ...
    def segment(self, segment_id: int) -> SegmentInfo | None: ...


class NodeDirectory(Protocol):
    def live_nodes(self) -> list[int]: ...
    def node(self, node_id: int) -> QueryNodePort: ...
    def labels(self, node_id: int) -> Mapping[str, str]: ...


class QueryCoord:
    def __init__(
        self,
        kv: MetaKV,
        collections: CollectionSource,
        nodes: NodeDirectory,
        segments: SegmentSource | None = None,
        balance: BalanceConfig | None = None,
    ) -> None:
        self._kv = kv
        self._collections = collections
        self._nodes = nodes
        self._lock = threading.RLock()
        #: where sealed segments are served (read from the nodes), and its changes
        self.distribution: Distribution | None = None
        self._loader: ShardLoader | None = None
        if segments is not None:
            self.distribution = Distribution(nodes, segments, collections, Balancer(balance))
            self.distribution.scope = self._scope
            self._loader = ShardLoader(nodes, collections, segments, self.distribution)
            self._loader.leader_now = self._leader_now
        #: collection id -> its replicas (leaders per shard, node sets)
        self._replicas: dict[int, list[Replica]] = {}
        #: collection id -> loaded partition ids, for collections loaded by partitions (a
        #: collection loaded whole is absent: every partition, later ones too, is loaded)
        self._partitions: dict[int, set[int]] = {}
        #: which query nodes each resource group's replicas run on
        self._rgs = ResourceGroups()

    def start(self) -> None:
        with self._lock:
            self._rgs = ResourceGroups(
                ResourceGroups.loads(key.rsplit("/", 1)[1], raw)
                for key, raw in self._kv.list_prefix(_GROUPS).items()
            )
            self._replicas = {
                int(key.rsplit("/", 1)[1]): replica_codec.loads(raw)
                for key, raw in self._kv.list_prefix(_LOADED).items()
            }
            self._partitions = {
                int(key.rsplit("/", 1)[1]): set(json.loads(raw))
                for key, raw in self._kv.list_prefix(_PARTITIONS).items()
            }
        self.rebalance()

    # -- loading -----------------------------------------------------------------------------

    def load_collection(
        self, collection_id: int, replica_number: int = 1, resource_groups: Sequence[str] = ()
    ) -> None:
        """Load every partition, those created later included, in ``replica_number``
        copies on distinct nodes (of ``resource_groups``: one for all replicas, or one per
        replica; none: the default group)."""
        with self._lock:
            self._load_shards(collection_id, replica_number, resource_groups)
            self._set_partitions(collection_id, None)

    def load_partitions(
        self,
        collection_id: int,
        partition_ids: Sequence[int],
        replica_number: int = 1,
        resource_groups: Sequence[str] = (),
    ) -> None:
        """Load these partitions too (a collection loaded whole stays so). Every shard is
        watched either way, since a shard's channel carries all partitions; reads see only
        the loaded partitions' rows."""
        with self._lock:
            whole = collection_id in self._replicas and collection_id not in self._partitions
            self._load_shards(collection_id, replica_number, resource_groups)
            if not whole:
                loaded = self._partitions.get(collection_id, set()) | set(partition_ids)
                self._set_partitions(collection_id, loaded)

    def release_partitions(self, collection_id: int, partition_ids: Sequence[int]) -> None:
        """Release these partitions; releasing the last loaded one releases the collection."""
        with self._lock:
            if collection_id not in self._replicas:
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
            if collection_id not in self._replicas:
                raise _not_loaded(collection_id)
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

    def _load_shards(
        self, collection_id: int, replica_number: int, resource_groups: Sequence[str]
    ) -> None:
        """Lead every shard in every replica (needs an index on each vector field)."""
        info = self._collections.describe_collection(collection_id=collection_id)
        missing = [f.name for f in info.schema.vector_fields if info.index_on(f.name) is None]
        if missing:
            raise MilvusError(
                Code.INDEX_NOT_FOUND,
                f"there is no vector index on field: [{', '.join(missing)}], please create "
                "index firstly",
            )
        if replica_number < 1:
            raise errors.invalid(f"replica number must be at least 1, got {replica_number}")
        with self._lock:
            placement = self._placement(replica_number, resource_groups)
            replicas = self._replicas.get(collection_id)
            if replicas is not None and len(replicas) != replica_number:
                raise errors.invalid(
                    f"can't change the replica number for loaded collection: loaded with "
                    f"{len(replicas)}, asked for {replica_number}; release it first"
                )
            if replicas is not None and resource_groups:
                now = Counter(r.resource_group for r in replicas)
                if now != placement:
                    raise errors.invalid(
                        "can't change the resource groups of a loaded collection: its "
                        f"replicas are in {sorted(now.elements())}; transfer them "
                        "(transfer_replica) or release it first"
                    )
            replicas = replicas or self._new_replicas(placement)
            for index, replica in enumerate(replicas):
                replica.shards = {v: n for v, n in replica.shards.items() if v in info.vchannels}
                for vchannel in info.vchannels:
                    if vchannel not in replica.shards:
                        replica.shards[vchannel] = self._assign(info, vchannel, replicas, index)
            self._save(collection_id, replicas)
        log.info(
            "collection loaded",
            extra={
                "collection": info.name,
                "shards": len(info.vchannels),
                "replicas": len(replicas),
            },
        )

    def _placement(self, replica_number: int, resource_groups: Sequence[str]) -> Counter[str]:
        """How many replicas each resource group gets: counted, never listed one by one (a
        request may ask for 2**31 replicas, which only the node count refuses)."""
        groups = list(resource_groups) or [DEFAULT_RESOURCE_GROUP]
        for name in groups:
            self._rgs.get(name)  # raises if there is no such group
        if len(groups) == 1:
            return Counter({groups[0]: replica_number})
        if len(groups) != replica_number:
            raise errors.invalid(
                f"replica=[{replica_number}] resource group=[{len(groups)}], resource group "
                "num can only be 0, 1 or same as replica number"
            )
        return Counter(groups)

    def _new_replicas(self, placement: Counter[str]) -> list[Replica]:
        replicas: list[Replica] = []
        for group, count in placement.items():
            live = self._live_of(group)
            if len(live) < count:
                default = group == DEFAULT_RESOURCE_GROUP
                where = "" if default else f" in resource group {group}"
                raise MilvusError(
                    Code.UNEXPECTED if default else Code.RESOURCE_GROUP_NODE_NOT_ENOUGH,
                    f"no enough nodes to create replicas: {count} replicas need {count} "
                    f"query nodes{where}, {len(live)} available",
                )
            replicas += new_replicas(count, live, group, alone=placement.total() == 1)
        return replicas

    def _live_of(self, group: str, live: Collection[int] | None = None) -> list[int]:
        """The live nodes of a resource group (every live node while all are in the
        default group, those that just joined included)."""
        live = self._nodes.live_nodes() if live is None else live
        if group == DEFAULT_RESOURCE_GROUP and not self._rgs.partitioned:
            return sorted(live)
        return sorted(set(live) & self._rgs.nodes_of(group))

    def _replica_nodes(self, replica: Replica) -> Collection[int] | None:
        """The nodes a replica's segments may be placed on (None: any)."""
        if replica.nodes is not None:
            return replica.nodes
        if not self._rgs.partitioned:
            return None
        return self._rgs.nodes_of(replica.resource_group)

    def _assign(
        self,
        info: CollectionInfo,
        vchannel: str,
        replicas: list[Replica],
        index: int,
        exclude: Collection[int] = (),
    ) -> int:
        """Lead ``vchannel`` in replica ``index`` from the replica's live node leading the
        fewest shards (counting the collection's assignment in progress), not one of
        ``exclude`` nor a node leading the shard in another replica."""
        others = {r.shards.get(vchannel) for i, r in enumerate(replicas) if i != index}
        replica = replicas[index]
        usable = replica.usable(self._live_of(replica.resource_group))
        live = [n for n in usable if n not in {*exclude, *others}]
        if not live:
            raise MilvusError(Code.SERVICE_NOT_READY, "no query node is available")
        led = [
            r.shards for cid, rs in self._replicas.items() if cid != info.collection_id for r in rs
        ]
        load = Counter(
            n for shards in [*led, *(r.shards for r in replicas)] for n in shards.values()
        )
        node_id = min(live, key=lambda n: (load[n], n))
        plan = None
        if self._loader is not None:
            plan = self._loader.plan(info, vchannel, node_id, index, self._replica_nodes(replica))
        self._nodes.node(node_id).watch(info, vchannel, plan)
        return node_id

    def _save(self, collection_id: int, replicas: list[Replica]) -> None:
        self._kv.put(f"{_LOADED}/{collection_id}", replica_codec.dumps(replicas))
        self._replicas[collection_id] = replicas

    def release_collection(self, collection_id: int) -> None:
        """Every node lets go of the collection: the shards it leads, the segments it holds."""
        with self._lock:
            replicas = self._replicas.pop(collection_id, None)
            self._kv.delete(f"{_LOADED}/{collection_id}")
            self._set_partitions(collection_id, None)
        if not replicas:
            return
        for node_id in self._nodes.live_nodes():
            try:
                self._nodes.node(node_id).release(collection_id)
            except Exception:
                log.exception(
                    "release failed", extra={"collection": collection_id, "node": node_id}
                )

    # -- state -------------------------------------------------------------------------------

    def load_state(self, collection_id: int, partition_ids: Sequence[int] = ()) -> tuple[int, int]:
        """(LoadState, progress percent) as GetLoadState / GetLoadingProgress report them: of
        the collection (loaded in any part), or of these partitions (all of them loaded)."""
        with self._lock:
            loaded = collection_id in self._replicas
            partial = self._partitions.get(collection_id)
            if loaded and partial is not None and not set(partition_ids) <= partial:
                loaded = False
            return (LOAD_STATE_LOADED, 100) if loaded else (LOAD_STATE_NOT_LOAD, 0)

    def replicas(self, collection_id: int) -> list[dict[str, int]]:
        """Each replica's shard leaders (vchannel -> node); reads may go to any replica."""
        with self._lock:
            replicas = self._replicas.get(collection_id)
            if replicas is None:
                raise _not_loaded(collection_id)
            return [dict(r.shards) for r in replicas]

    def _leader_now(self, collection_id: int, replica: int, vchannel: str) -> int | None:
        """Without the lock (the handoff calls it inside a plan's lock, which loads hold
        while they take ours): one dict read each, atomic, at worst a moment old."""
        replicas = self._replicas.get(collection_id)
        if replicas is None or replica >= len(replicas):
            return None
        return replicas[replica].shards.get(vchannel)

    def _scope(self, leader: int, vchannel: str) -> Collection[int] | None:
        """The nodes the shard ``leader`` leads may place its segments on."""
        with self._lock:
            for replicas in self._replicas.values():
                for replica in replicas:
                    if replica.shards.get(vchannel) == leader:
                        return self._replica_nodes(replica)
        return None

    # -- segments ----------------------------------------------------------------------------

    def handoff(self) -> int:
        """Serve newly flushed segments in every replica (see ``ShardLoader.handoff``)."""
        if self._loader is None:
            return 0
        with self._lock:
            walk = [
                ShardLeaders(cid, i, dict(r.shards), r.nodes)
                for cid, replicas in self._replicas.items()
                for i, r in enumerate(replicas)
            ]
        return self._loader.handoff(walk)

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
        if not segment_ids or self.distribution is None:
            return
        for node_id, report in self.distribution.reports().items():
            for vchannel in {*report.leading, *report.hosted}:
                held = {*report.leading.get(vchannel, {}), *report.hosted.get(vchannel, [])}
                gone = sorted(held & segment_ids)
                if not gone:
                    continue
                try:
                    self._nodes.node(node_id).release_segments(vchannel, gone)
                except Exception:
                    log.exception("releasing retired segments failed", extra={"node": node_id})

    # -- membership and balance --------------------------------------------------------------

    def rebalance(self, live: Sequence[int] | None = None) -> None:
        """Give replicas the nodes that joined, move shards off nodes that are gone or
        stopping, and place again the segments they served (on every membership change,
        and every few seconds, so a shard whose load failed, e.g. S3 briefly unavailable,
        is retried). A stopping node is drained: its shards get a new leader before it lets
        them go, its segments move."""
        live_set = set(self._nodes.live_nodes() if live is None else live)
        reports = self.distribution.reports() if self.distribution is not None else {}
        stopping = {n for n, r in reports.items() if r.stopping}
        serving = live_set - stopping
        with self._lock:
            if self._rgs.reconcile(serving, {n: self._nodes.labels(n) for n in serving}):
                self._save_groups()
            for collection_id, replicas in list(self._replicas.items()):
                if self._assign_nodes(replicas, serving):
                    self._save(collection_id, replicas)
                for index, replica in enumerate(replicas):
                    usable = set(replica.usable(self._live_of(replica.resource_group, serving)))
                    orphans = [v for v, n in replica.shards.items() if n not in usable]
                    if orphans and usable:
                        # alive nodes outside the replica's group let go once replaced
                        release = stopping | (serving - usable)
                        self._reassign(collection_id, replicas, index, orphans, release)
        if self.distribution is not None and serving:
            self.distribution.recover()
            if stopping or self._rgs.partitioned:  # only then may a node need draining
                groups = self._groups()
                if stopping or any(g.draining for g in groups):
                    self.distribution.balance(groups)

    def _assign_nodes(self, replicas: list[Replica], serving: Collection[int]) -> bool:
        """Each resource group's serving nodes to the collection's replicas in it."""
        changed = False
        for group in dict.fromkeys(r.resource_group for r in replicas):
            members = [r for r in replicas if r.resource_group == group]
            changed |= assign_nodes(members, self._live_of(group, serving))
        return changed

    def _reassign(
        self,
        collection_id: int,
        replicas: list[Replica],
        index: int,
        orphans: list[str],
        release: set[int],
    ) -> None:
        """New leaders for the orphaned shards of replica ``index``; an old leader still
        alive (``release``: stopping, or outside the replica's group now) lets its shard go
        once the new one leads it."""
        try:
            info = self._collections.describe_collection(collection_id=collection_id)
        except MilvusError:
            return
        shards = replicas[index].shards
        for vchannel in orphans:
            old = shards[vchannel]
            try:
                node_id = self._assign(info, vchannel, replicas, index, exclude=release)
            except Exception:
                log.exception("shard load failed; will retry", extra={"vchannel": vchannel})
                continue
            shards[vchannel] = node_id
            self._save(collection_id, replicas)
            log.warning("shard reassigned", extra={"vchannel": vchannel, "node": node_id})
            if old in release:  # alive: it led the shard until the new leader was ready
                try:
                    self._nodes.node(old).unwatch(vchannel)
                except Exception:
                    log.exception("unwatch failed", extra={"vchannel": vchannel, "node": old})

    def balance(self) -> int:
        """One memory-based balancing round (every ``query.balance_interval_s``); returns
        the segments moved."""
        return self.distribution.balance(self._groups()) if self.distribution is not None else 0

    def _groups(self) -> list[Group]:
        """Balancing groups: every node for collections with one replica; each replica of
        the others, its own nodes and the copies its leaders read."""
        assert self.distribution is not None
        with self._lock:
            partitioned = self._rgs.partitioned
            split = [
                [(r, self._replica_nodes(r)) for r in rs]
                for rs in self._replicas.values()
                if len(rs) > 1 or partitioned
            ]
        if not split:
            return [Group()]
        reports = self.distribution.reports()
        groups: list[Group] = []
        own: set[tuple[int, int]] = set()
        for replicas in split:
            for replica, nodes in replicas:
                copies = {
                    (s, n)
                    for v, leader in replica.shards.items()
                    if leader in reports
                    for s, n in reports[leader].leading.get(v, {}).items()
                }
                own |= copies
                outside = {n for _, n in copies} - set(nodes) if nodes is not None else set()
                groups.append(Group(nodes, copies, frozenset(outside)))
        everything = {
            (s, n) for r in reports.values() for m in r.leading.values() for s, n in m.items()
        }
        return [Group(None, everything - own), *groups]

    def load_balance(
        self,
        collection_id: int,
        source: int,
        destinations: Sequence[int],
        segment_ids: Sequence[int],
    ) -> None:
        """Milvus's LoadBalance: move these sealed segments of the collection (all it serves
        when none are named) from ``source`` to ``destinations`` (any other node of its
        replica when none are named), each to the one least used once it holds it."""
        if self.distribution is None:
            raise MilvusError(Code.SERVICE_NOT_READY, "segment placement is not available")
        with self._lock:
            replicas = self._replicas.get(collection_id)
            if replicas is None:
                raise _not_loaded(collection_id)
            vchannels = {v for r in replicas for v in r.shards}
            scopes = [self._replica_nodes(r) for r in replicas]
            nodes = next((n for n in scopes if n and source in n), None)
        reports = self.distribution.reports()
        moves = self.distribution.plan_moves(
            reports, vchannels, source, destinations, segment_ids, nodes
        )
        failed_before = self.distribution.moves.failed
        self.distribution.run(moves, reports)
        if self.distribution.moves.failed > failed_before:
            raise MilvusError(
                Code.UNEXPECTED, "some segments could not be moved; see the coordinator's log"
            )

    # -- resource groups ---------------------------------------------------------------------

    def create_resource_group(self, name: str, config: Mapping[str, object] | None = None) -> None:
        with self._lock:
            created = self._rgs.create(name, GroupConfig.from_dict(config) if config else None)
            if created:
                self._save_groups()
        if created:
            log.info("resource group created", extra={"resource_group": name})
            self.rebalance()

    def update_resource_groups(self, configs: Mapping[str, Mapping[str, object]]) -> None:
        with self._lock:
            self._rgs.update({n: GroupConfig.from_dict(c) for n, c in configs.items()})
            self._save_groups()
        self.rebalance()

    def drop_resource_group(self, name: str) -> None:
        with self._lock:
            loaded = {r.resource_group for rs in self._replicas.values() for r in rs}
            if not self._rgs.drop(name, loaded):
                return
            self._kv.delete(f"{_GROUPS}/{name}")
            self._save_groups()
        log.info("resource group dropped", extra={"resource_group": name})
        self.rebalance()

    def transfer_node(self, source: str, target: str, count: int) -> None:
        with self._lock:
            self._rgs.transfer_node(source, target, count)
            self._save_groups()
        self.rebalance()

    def transfer_replica(self, source: str, target: str, collection_id: int, count: int) -> None:
        """Move ``count`` of the collection's replicas from one group to another: their
        shards get leaders and their segments nodes of the target group (reads go on from
        the old ones until then)."""
        if source == target:
            raise errors.invalid(
                f"source resource group and target resource group should not be the same, "
                f"resource group: {source}"
            )
        if count <= 0:
            raise errors.invalid(f"invalid NumReplica {count}: must be > 0")
        with self._lock:
            for name in (source, target):
                self._rgs.get(name)  # raises if there is no such group
            replicas = self._replicas.get(collection_id)
            if replicas is None:
                raise _not_loaded(collection_id)
            moving = [r for r in replicas if r.resource_group == source]
            if len(moving) < count:
                raise errors.invalid(
                    f"only found [{len(moving)}] replicas of collection {collection_id} in "
                    f"source resource group[{source}], asked to transfer {count}"
                )
            arriving = sum(r.resource_group == target for r in replicas) + count
            live = self._live_of(target)
            if len(live) < arriving:
                raise MilvusError(
                    Code.RESOURCE_GROUP_NODE_NOT_ENOUGH,
                    f"resource group node not enough[rg={target}][current={len(live)}]"
                    f"[expected={arriving}]",
                )
            for replica in moving[-count:]:
                replica.resource_group = target
            if len(replicas) > 1:  # node sets: the target's nodes split among its replicas
                there = [r for r in replicas if r.resource_group == target]
                for replica in there:
                    replica.nodes = set()
                assign_nodes(there, live)
            self._save(collection_id, replicas)
        log.info(
            "replicas transferred",
            extra={"collection": collection_id, "from": source, "to": target, "count": count},
        )
        self.rebalance()

    def list_resource_groups(self) -> list[str]:
        with self._lock:
            return sorted(self._rgs.groups)

    def describe_resource_group(self, name: str) -> dict[str, object]:
        """A group's config and live nodes, and per loaded collection (by id, as text): its
        replicas in the group, the nodes of other groups leading their shards (outgoing),
        and the group's nodes leading shards of other groups' replicas (incoming)."""
        live = set(self._nodes.live_nodes())
        with self._lock:
            group = self._rgs.get(name)
            nodes = set(self._live_of(name, live))
            loaded: Counter[str] = Counter()
            outgoing: Counter[str] = Counter()
            incoming: Counter[str] = Counter()
            for cid, replicas in self._replicas.items():
                for replica in replicas:
                    leaders = set(replica.shards.values())
                    if replica.resource_group == name:
                        loaded[str(cid)] += 1
                        outgoing[str(cid)] += len(leaders - nodes)
                    else:
                        incoming[str(cid)] += len(leaders & nodes)
            return {
                "name": name,
                "config": group.config.to_dict(),
                "nodes": sorted(nodes),
                "replicas": dict(loaded),
                "outgoing": {k: v for k, v in outgoing.items() if v},
                "incoming": {k: v for k, v in incoming.items() if v},
            }

    def replica_groups(self, collection_id: int) -> list[str]:
        """The resource group of each replica, in the order ``replicas`` lists them."""
        with self._lock:
            replicas = self._replicas.get(collection_id)
            if replicas is None:
                raise _not_loaded(collection_id)
            return [r.resource_group for r in replicas]

    def _save_groups(self) -> None:
        for name, group in self._rgs.groups.items():
            self._kv.put(f"{_GROUPS}/{name}", ResourceGroups.dumps(group))


def _not_loaded(collection_id: int) -> MilvusError:
    return MilvusError(
        Code.COLLECTION_NOT_LOADED, f"collection not loaded[collection={collection_id}]"
    )
