"""Resource groups: which query nodes each group of replicas may run on (Milvus 2.4+).

A group asks for ``requests`` nodes and holds at most ``limits``; every live query node is
in exactly one group. A node that joins goes to the group missing the most nodes, else to
the default group (which holds everything nobody asked for: limits 1,000,000). Groups short
of their requests take nodes from groups holding more than theirs (first from a group
holding more than its limits, then from the groups in their ``transfer_from``); groups over
their limits give nodes away (to a group missing some, then to their ``transfer_to``, then
to the default group). Changing a group's numbers changes only the numbers: the nodes move
when the coordinator next reconciles (at once, and on every membership change).

A group may also name node labels (``node_filter``, Milvus 2.4.x): it then holds only nodes
whose sessions carry every one of them (``VECTIDE_SERVER_LABEL_<KEY>=<value>`` on the query
node). A node a group no longer accepts (its filter changed) counts as beyond its limits and
moves out first; a node only ever moves to a group that accepts it, and the default group
accepts every node.

Pure: configurations and node ids in, node ids out; the coordinator persists the result.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from vectide.services.common import errors
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.names import DEFAULT_RESOURCE_GROUP
from vectide.services.common.names import DEFAULT_RESOURCE_GROUP_CAPACITY as DEFAULT_CAPACITY

#: Milvus's ``quotaAndLimits.limits.maxResourceGroupNumOfQueryNode``
MAX_GROUPS = 1024


#: a node's labels (from its session)
Labels = Mapping[str, str]


@dataclass(frozen=True)
class GroupConfig:
    requests: int = 0
    limits: int = 0
    transfer_from: tuple[str, ...] = ()
    transfer_to: tuple[str, ...] = ()
    #: labels a node must carry (all of them, equal values) to be in the group
    node_labels: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "requests": self.requests,
            "limits": self.limits,
            "transfer_from": list(self.transfer_from),
            "transfer_to": list(self.transfer_to),
            "node_labels": dict(self.node_labels),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> GroupConfig:
        labels: Mapping[str, str] = data.get("node_labels") or {}  # type: ignore[assignment]
        return cls(
            int(data.get("requests", 0)),  # type: ignore[call-overload]
            int(data.get("limits", 0)),  # type: ignore[call-overload]
            tuple(data.get("transfer_from", ())),  # type: ignore[arg-type]
            tuple(data.get("transfer_to", ())),  # type: ignore[arg-type]
            tuple(sorted(labels.items())),
        )

    def accepts(self, labels: Labels) -> bool:
        """Whether a node with ``labels`` may be in a group of this config."""
        return all(labels.get(key) == value for key, value in self.node_labels)


DEFAULT_CONFIG = GroupConfig(0, DEFAULT_CAPACITY)


@dataclass
class ResourceGroup:
    name: str
    config: GroupConfig
    nodes: set[int] = field(default_factory=set)
    #: its nodes that its filter no longer accepts (set by ``ResourceGroups.reconcile``)
    dirty: set[int] = field(default_factory=set)

    @property
    def missing(self) -> int:
        """Nodes short of its requests."""
        return max(self.config.requests - len(self.nodes), 0)

    @property
    def redundant(self) -> int:
        """Nodes beyond its limits, and nodes it no longer accepts."""
        return max(len(self.nodes) - self.config.limits, 0) + len(self.dirty)

    @property
    def spare(self) -> int:
        """Nodes it may give away: beyond its requests, or not accepted."""
        return max(len(self.nodes) - self.config.requests, len(self.dirty), 0)

    @property
    def room(self) -> int:
        """Nodes it may still take before its limits."""
        return max(self.config.limits - len(self.nodes), 0)


def illegal(name: str, reason: str) -> MilvusError:
    return MilvusError(
        Code.RESOURCE_GROUP_ILLEGAL_CONFIG, f"resource group illegal config[rg={name}]: {reason}"
    )


def not_found(name: str) -> MilvusError:
    return MilvusError(Code.RESOURCE_GROUP_NOT_FOUND, f"resource group not found[rg={name}]")


class ResourceGroups:
    """Every group and its nodes. Not thread-safe: the coordinator holds its lock."""

    def __init__(self, groups: Iterable[ResourceGroup] = ()) -> None:
        self.groups: dict[str, ResourceGroup] = {
            DEFAULT_RESOURCE_GROUP: ResourceGroup(DEFAULT_RESOURCE_GROUP, DEFAULT_CONFIG)
        }
        for group in groups:
            self.groups[group.name] = group
        #: the labels of the live nodes, as the last reconcile was told
        self._labels: dict[int, Labels] = {}

    # -- configuration -------------------------------------------------------------------

    def create(self, name: str, config: GroupConfig | None) -> bool:
        """Add a group (no nodes yet); returns whether it is new. Creating one that exists
        with the same config is a no-op, as in Milvus."""
        if not name:
            raise MilvusError(Code.PARAMETER_MISSING, "resource group name couldn't be empty")
        config = config or GroupConfig()
        existing = self.groups.get(name)
        if existing is not None:
            if existing.config == config:
                return False
            raise MilvusError(
                Code.RESOURCE_GROUP_ALREADY_EXIST,
                f"resource group already exist, but create with different config[rg={name}]",
            )
        if len(self.groups) >= MAX_GROUPS:
            raise MilvusError(
                Code.RESOURCE_GROUP_REACH_LIMIT,
                f"resource group num reach limit[rg={name}][limit={MAX_GROUPS}]",
            )
        self._validate(name, config)
        self.groups[name] = ResourceGroup(name, config)
        return True

    def update(self, configs: Mapping[str, GroupConfig]) -> None:
        """New configs for existing groups, all or none."""
        for name, config in configs.items():
            if name not in self.groups:
                raise not_found(name)
            self._validate(name, config)
        for name, config in configs.items():
            self.groups[name].config = config

    def drop(self, name: str, loaded: Iterable[str]) -> bool:
        """Remove an empty group (limits 0, no replica, named by no other group); a node it
        still holds goes to the default group. Dropping a missing group is a no-op."""
        group = self.groups.get(name)
        if group is None:
            return False
        if name == DEFAULT_RESOURCE_GROUP:
            raise errors.invalid("default resource group is not deletable")
        if group.config.limits != 0:
            raise errors.invalid(
                f"resource group {name}'s limits node num is not 0: set its requests and "
                "limits to 0 first"
            )
        if name in set(loaded):
            raise errors.invalid(
                f"some replicas still loaded in resource group[{name}]: release the "
                "collections or transfer their replicas first"
            )
        for other in self.groups.values():
            for kind, names in (
                ("TransferFrom", other.config.transfer_from),
                ("TransferTo", other.config.transfer_to),
            ):
                if name in names:
                    raise errors.invalid(
                        f"resource group {name} is used by {other.name}'s `{kind}`, remove "
                        "that configuration first"
                    )
        freed = self.groups.pop(name).nodes
        self.groups[DEFAULT_RESOURCE_GROUP].nodes |= freed
        return True

    def transfer_node(self, source: str, target: str, count: int) -> None:
        """Milvus's TransferNode, kept for older clients: moves ``count`` of the numbers from
        one group's config to the other's (the nodes follow on reconcile)."""
        if source == target:
            raise errors.invalid(
                "source resource group and target resource group should not be the same, "
                f"resource group: {source}"
            )
        if count <= 0:
            raise errors.invalid(f"invalid NumNode {count}: must be > 0")
        src, dst = self.get(source), self.get(target)
        if len(src.nodes) < count:
            raise MilvusError(
                Code.RESOURCE_GROUP_NODE_NOT_ENOUGH,
                f"resource group node not enough[rg={source}][current={len(src.nodes)}]"
                f"[expected={count}]",
            )
        src_requests = max(src.config.requests - count, 0)
        src_limits = src.config.limits
        if source != DEFAULT_RESOURCE_GROUP:
            src_limits = max(src_limits - count, 0)
        dst_requests = dst.config.requests + count
        self.update(
            {
                source: replace(src.config, requests=src_requests, limits=src_limits),
                target: replace(
                    dst.config,
                    requests=dst_requests,
                    limits=max(dst.config.limits, dst_requests),
                ),
            }
        )

    def _validate(self, name: str, config: GroupConfig) -> None:
        if config.requests < 0 or config.limits < 0:
            raise illegal(name, "node num in `requests` or `limits` should not less than 0")
        if config.limits < config.requests:
            raise illegal(name, "limits node num should not less than requests node num")
        transfers = (("TransferFrom", config.transfer_from), ("TransferTo", config.transfer_to))
        for kind, names in transfers:
            for other in names:
                if other == name:
                    raise illegal(name, f"resource group in `{kind}` {name} should not be itself")
                if other not in self.groups:
                    raise illegal(name, f"resource group in `{kind}` {other} not exist")

    # -- nodes -----------------------------------------------------------------------------

    def get(self, name: str) -> ResourceGroup:
        group = self.groups.get(name)
        if group is None:
            raise not_found(name)
        return group

    def nodes_of(self, name: str) -> set[int]:
        """A group's nodes; none for a group that no longer exists."""
        found = self.groups.get(name)
        return set(found.nodes) if found is not None else set()

    @property
    def partitioned(self) -> bool:
        """Whether any node is outside the default group (else every node serves anything)."""
        return any(g.nodes for n, g in self.groups.items() if n != DEFAULT_RESOURCE_GROUP)

    def reconcile(self, live: Iterable[int], labels: Mapping[int, Labels] | None = None) -> bool:
        """Forget nodes that left, place the ones that joined, then move nodes until every
        group has its requests, holds only nodes it accepts and none exceeds its limits,
        where the others allow it. ``labels``: each live node's (none when absent).
        Returns whether any group's nodes changed."""
        before = {n: frozenset(g.nodes) for n, g in self.groups.items()}
        live = set(live)
        self._labels = {n: (labels or {}).get(n, {}) for n in live}
        for group in self.groups.values():
            group.nodes &= live
            group.dirty = {n for n in group.nodes if not self.accepts(group, n)}
        placed = {n for g in self.groups.values() for n in g.nodes}
        for node_id in sorted(live - placed):
            self._place(node_id)
        for _ in range(len(live) * max(len(self.groups), 1) + 1):  # each move settles a node
            if not self._recover_one():
                break
        return before != {n: frozenset(g.nodes) for n, g in self.groups.items()}

    def accepts(self, group: ResourceGroup, node_id: int) -> bool:
        return group is self._default or group.config.accepts(self._labels.get(node_id, {}))

    def _place(self, node_id: int) -> None:
        open_to = [g for g in self.groups.values() if self.accepts(g, node_id)]
        wanting = [g for g in open_to if g.missing > 0]
        if wanting:
            target = max(wanting, key=lambda g: (g.missing, g.name == DEFAULT_RESOURCE_GROUP))
        else:
            roomy = [g for g in open_to if g.room > 0]
            target = max(roomy, key=lambda g: g.room) if roomy else self._default
        target.nodes.add(node_id)

    @property
    def _default(self) -> ResourceGroup:
        return self.groups[DEFAULT_RESOURCE_GROUP]

    def _recover_one(self) -> bool:
        """Move one node toward the configs; False when nothing can move."""
        for group in sorted(self.groups.values(), key=lambda g: g.name):
            if group.missing > 0:
                source = self._source_for(group)
                if source is not None:
                    return self._move(source, group)
        for group in sorted(self.groups.values(), key=lambda g: g.name):
            if group.redundant > 0:
                target = self._target_for(group)
                if target is not None:
                    return self._move(group, target)
        return False

    # Milvus weighs these tiers by factors (1,000,000 and 100,000), which lets the default
    # group's room (1,000,000) outrank a named transfer group; tuples keep the tiers apart.

    def _source_for(self, needy: ResourceGroup) -> ResourceGroup | None:
        def priority(g: ResourceGroup) -> tuple[int, int]:
            if g.redundant > 0:
                return 2, g.redundant
            return int(g.name in needy.config.transfer_from), g.spare

        givers = [
            g
            for g in self.groups.values()
            if g is not needy and g.spare > 0 and self._movable(g, needy) is not None
        ]
        return max(givers, key=priority) if givers else None

    def _target_for(self, full: ResourceGroup) -> ResourceGroup | None:
        def priority(g: ResourceGroup) -> tuple[int, int]:
            if g.missing > 0:
                return 2, g.missing
            return int(g.name in full.config.transfer_to), g.room

        takers = [
            g
            for g in self.groups.values()
            if g is not full and g.room > 0 and self._movable(full, g) is not None
        ]
        if takers:
            return max(takers, key=priority)
        return None if full is self._default else self._default

    def _movable(self, source: ResourceGroup, target: ResourceGroup) -> int | None:
        """The node ``source`` gives ``target``: one it no longer accepts first, else (while
        it holds more than its requests) its newest the target accepts: the oldest keep what
        they serve. None when there is no such node."""
        dirty = [n for n in source.dirty if self.accepts(target, n)]
        if dirty:
            return max(dirty)
        if len(source.nodes) <= source.config.requests:
            return None
        accepted = [n for n in source.nodes if self.accepts(target, n)]
        return max(accepted) if accepted else None

    def _move(self, source: ResourceGroup, target: ResourceGroup) -> bool:
        node_id = self._movable(source, target)
        if node_id is None:
            return False
        source.nodes.discard(node_id)
        source.dirty.discard(node_id)
        target.nodes.add(node_id)
        return True

    # -- persistence ------------------------------------------------------------------------

    @staticmethod
    def dumps(group: ResourceGroup) -> bytes:
        return json.dumps({"config": group.config.to_dict(), "nodes": sorted(group.nodes)}).encode()

    @staticmethod
    def loads(name: str, raw: bytes) -> ResourceGroup:
        data = json.loads(raw)
        return ResourceGroup(name, GroupConfig.from_dict(data["config"]), set(data["nodes"]))
