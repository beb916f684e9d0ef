"""A shard leader's calls to the nodes serving the shard's other sealed segments.

Two kinds: deletes forwarded before serviceable time passes them (so a read at a snapshot
meets them on every node), and reads scattered at the snapshot the leader waited for, run
beside the leader's own search and merged with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.requests import ShardQueryRequest, ShardSearchRequest
from vectide.services.common.results import QueryRows, SearchHits, TermStats
from vectide.services.querynode.shard import Removal, Shard

log = logging.getLogger(__name__)


class PeerNode(Protocol):
    """Another query node, as a shard's leader uses it."""

    def forward(self, vchannel: str, removals: list[Removal]) -> None: ...
    def search_segments(
        self, req: ShardSearchRequest, vchannel: str, segment_ids: list[int], snapshot: int
    ) -> tuple[SearchHits | None, list[int]]: ...
    def query_segments(
        self, req: ShardQueryRequest, vchannel: str, segment_ids: list[int], snapshot: int
    ) -> tuple[QueryRows | None, list[int]]: ...
    def segment_term_stats(
        self, req: ShardSearchRequest, vchannel: str, segment_ids: list[int], snapshot: int
    ) -> tuple[TermStats | None, list[int]]: ...


class Peers(Protocol):
    def node(self, node_id: int) -> PeerNode: ...


#: a remote read of some segments: (their merged part or None, the ids not held there)
RemoteRead = Callable[[PeerNode, list[int]], tuple[Any, list[int]]]


class Scatter:
    def __init__(self, peers: Peers | None = None, workers: int = 8) -> None:
        self.peers = peers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="scatter")

    def peer(self, node_id: int) -> PeerNode:
        if self.peers is None:
            raise MilvusError(Code.SERVICE_NOT_READY, "this query node cannot reach its peers")
        return self.peers.node(node_id)

    def forward(self, shard: Shard, removals: list[Removal], remote: dict[int, list[int]]) -> None:
        """Send a pack's deletes to every node serving segments of the shard. A node that
        does not take them would answer reads wrongly: its segments of the shard are lost
        (reads refuse them) until the coordinator places them again."""
        calls = {
            node_id: self._pool.submit(self._forward_to, node_id, shard.vchannel, removals)
            for node_id in remote
        }
        for node_id, call in calls.items():
            try:
                call.result()
            except Exception as exc:
                with shard.lock:
                    shard.lost.update(remote[node_id])
                log.warning(
                    "deletes not forwarded; the node's segments of the shard are lost",
                    extra={"vchannel": shard.vchannel, "node": node_id, "error": str(exc)},
                )

    def _forward_to(self, node_id: int, vchannel: str, removals: list[Removal]) -> None:
        self.peer(node_id).forward(vchannel, removals)

    def start(self, shard: Shard, read: RemoteRead) -> dict[int, Future]:
        """Send ``read`` to every node serving the shard's remote segments (call it under
        the shard lock, so the placement read matches the leader's own stores)."""
        if shard.lost:
            raise MilvusError(
                Code.SERVICE_NOT_READY,
                f"segments {sorted(shard.lost)} of shard {shard.vchannel} are being placed "
                "again (their query node stopped answering); retry",
            )
        if not shard.remote:  # every segment is the leader's own (one node): nothing to send
            return {}
        return self._submit(read, by_node(shard.remote))

    def gather(self, shard: Shard, read: RemoteRead, pending: dict[int, Future]) -> list[Any]:
        """The remote parts of a read. Segments a node no longer holds (a move finished
        meanwhile) are asked of the node serving them now, once."""
        parts, missing = _collect(shard, pending)
        if not missing:
            return parts
        with shard.lock:
            placed = by_node(shard.remote, missing)
        retried, gone = _collect(shard, self._submit(read, placed))
        gone |= missing - {s for ids in placed.values() for s in ids}
        if gone:
            raise MilvusError(
                Code.SERVICE_NOT_READY,
                f"segments {sorted(gone)} of shard {shard.vchannel} moved during the read; retry",
            )
        return parts + retried

    def _submit(self, read: RemoteRead, placed: dict[int, list[int]]) -> dict[int, Future]:
        return {n: self._pool.submit(self._read, read, n, ids) for n, ids in placed.items()}

    def _read(
        self, read: RemoteRead, node_id: int, segment_ids: list[int]
    ) -> tuple[Any, list[int]]:
        return read(self.peer(node_id), segment_ids)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def by_node(remote: dict[int, int], wanted: set[int] | None = None) -> dict[int, list[int]]:
    """Remote segments grouped by the node serving them (``wanted``: only these)."""
    grouped: dict[int, list[int]] = {}
    for segment_id, node_id in sorted(remote.items()):
        if wanted is None or segment_id in wanted:
            grouped.setdefault(node_id, []).append(segment_id)
    return grouped


def _collect(shard: Shard, pending: dict[int, Future]) -> tuple[list[Any], set[int]]:
    parts, missing = [], set()
    for node_id, future in pending.items():
        try:
            part, gone = future.result()
        except MilvusError:
            raise
        except Exception as exc:
            raise MilvusError(
                Code.SERVICE_NOT_READY,
                f"query node {node_id}, serving segments of shard {shard.vchannel}, did not "
                f"answer: {exc}; retry",
            ) from exc
        if part is not None:
            parts.append(part)
        missing.update(gone)
    return parts, missing
