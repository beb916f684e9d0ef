"""A loaded collection's replicas: each a complete copy, on its own query nodes.

A replica has a leader per shard (the node reading the shard's channel) and a copy of every
sealed segment. With several replicas each owns a set of nodes (Milvus's replica node
sets), so a node's death takes down at most one copy, and reads go to another; a node that
joins goes to the replica with the fewest nodes. A single replica uses every live node of
its resource group (``resource_groups.py``).
Pure: node ids in, node ids out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from vectide.services.querycoord.resource_groups import DEFAULT_RESOURCE_GROUP


@dataclass
class Replica:
    #: vchannel -> the node leading the shard in this replica
    shards: dict[str, int] = field(default_factory=dict)
    #: the nodes this replica may use; None: every live node (a collection's only replica)
    nodes: set[int] | None = None
    #: the resource group whose nodes it runs on
    resource_group: str = DEFAULT_RESOURCE_GROUP

    def usable(self, live: Iterable[int]) -> list[int]:
        live = sorted(live)
        return live if self.nodes is None else [n for n in live if n in self.nodes]


def new_replicas(
    count: int, live: Iterable[int], group: str = DEFAULT_RESOURCE_GROUP, alone: bool = True
) -> list[Replica]:
    """``count`` replicas in ``group`` over its live nodes, node sets as even as they can be.
    ``alone``: these are all the collection's replicas (one of them then takes every node
    of the group as it comes and goes, without a set of its own)."""
    if count == 1 and alone:
        return [Replica(resource_group=group)]
    replicas = [Replica(nodes=set(), resource_group=group) for _ in range(count)]
    assign_nodes(replicas, live)
    return replicas


def assign_nodes(replicas: list[Replica], live: Iterable[int]) -> bool:
    """Drop nodes that are gone from the replicas' sets and give new ones to the replica
    with the fewest (ties: the lowest index); returns whether a set changed."""
    if len(replicas) == 1 and replicas[0].nodes is None:
        return False
    live = sorted(live)
    changed = False
    for replica in replicas:
        assert replica.nodes is not None
        kept = replica.nodes & set(live)
        changed |= kept != replica.nodes
        replica.nodes = kept
    owned = {n for r in replicas for n in r.nodes or ()}
    for node_id in live:
        if node_id not in owned:
            smallest = min(replicas, key=lambda r: len(r.nodes or ()))
            assert smallest.nodes is not None
            smallest.nodes.add(node_id)
            changed = True
    return changed


def dumps(replicas: list[Replica]) -> bytes:
    return json.dumps(
        [
            {
                "shards": r.shards,
                "nodes": None if r.nodes is None else sorted(r.nodes),
                "resource_group": r.resource_group,
            }
            for r in replicas
        ]
    ).encode()


def loads(raw: bytes) -> list[Replica]:
    """Also reads the single-replica format of earlier versions (vchannel -> node)."""
    data = json.loads(raw)
    if isinstance(data, dict):
        return [Replica({k: int(v) for k, v in data.items()})]
    return [
        Replica(
            {k: int(v) for k, v in item["shards"].items()},
            None if item["nodes"] is None else set(item["nodes"]),
            item.get("resource_group", DEFAULT_RESOURCE_GROUP),
        )
        for item in data
    ]
