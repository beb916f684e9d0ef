"""Channel names: physical channels are Kafka topics, virtual channels are collection shards.

``{cluster}-dml_{i}`` is pchannel i; ``{pchannel}_{collection_id}v{k}`` is shard k of a
collection, carried on that pchannel (Milvus's naming, so logs read the same).
"""

from __future__ import annotations

import re

_VCHANNEL = re.compile(r"^(?P<pchannel>.+)_(?P<collection>\d+)v(?P<shard>\d+)$")


def pchannel(cluster: str, index: int) -> str:
    return f"{cluster}-dml_{index}"


def pchannels(cluster: str, count: int) -> list[str]:
    return [pchannel(cluster, i) for i in range(count)]


def vchannel(pchannel_name: str, collection_id: int, shard: int) -> str:
    return f"{pchannel_name}_{collection_id}v{shard}"


def pchannel_of(vchannel_name: str) -> str:
    match = _VCHANNEL.match(vchannel_name)
    if match is None:
        raise ValueError(f"not a vchannel name: {vchannel_name!r}")
    return match["pchannel"]
