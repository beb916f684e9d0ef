"""Finding other roles through their ZooKeeper sessions, and calling them over RPC.

``RoleClients`` keeps an RPC client per live member of a role (query nodes, proxies);
``ActiveClient`` calls whichever member of a single-active role (the rootcoord) currently
holds the session, and follows a failover by re-resolving and retrying.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.rpc import types as _rpc_types  # noqa: F401 - registers what replies carry
from vectide.services.common.rpc.transport import RpcClient
from vectide.services.common.session import SessionInfo, SessionRegistry

log = logging.getLogger(__name__)


class RoleClients:
    def __init__(self, registry: SessionRegistry, role: str, service: str) -> None:
        self._role = role
        self._service = service
        self._lock = threading.Lock()
        self._members: dict[int, SessionInfo] = {}
        self._clients: dict[int, RpcClient] = {}
        self._listeners: list[Any] = []
        registry.watch(role, self._on_members)

    def _on_members(self, members: dict[int, SessionInfo]) -> None:
        with self._lock:
            self._members = dict(members)
            for gone in set(self._clients) - set(members):
                self._clients.pop(gone).close()
            listeners = list(self._listeners)
        for listener in listeners:
            listener(sorted(members))

    def on_change(self, listener: Any) -> None:
        """Call ``listener(live_ids)`` after every membership change."""
        with self._lock:
            self._listeners.append(listener)
            live = sorted(self._members)
        listener(live)

    def live_nodes(self) -> list[int]:
        with self._lock:
            return sorted(self._members)

    def labels(self, node_id: int) -> dict[str, str]:
        """The labels a member registered with (none once it is gone)."""
        with self._lock:
            info = self._members.get(node_id)
            return dict(info.labels) if info is not None else {}

    def node(self, node_id: int) -> Any:
        with self._lock:
            client = self._clients.get(node_id)
            if client is None:
                info = self._members.get(node_id)
                if info is None:
                    raise MilvusError(Code.SERVICE_NOT_READY, f"{self._role} {node_id} is gone")
                client = self._clients[node_id] = RpcClient(info.address, self._service)
            return client

    def all(self) -> list[Any]:
        return [self.node(n) for n in self.live_nodes()]


class ActiveClient:
    """Calls the single live member of ``role``; waits through failovers up to ``patience_s``.

    ``fail_fast`` names methods that must not wait that long (a proxy's timestamps and ids:
    a read or write waiting on a stalled rootcoord would hang its client): each gets that
    many seconds in all, retries included, then fails with a retriable SERVICE_UNAVAILABLE.

    A failed call is sent again, and one that failed in transport may have run: so every
    method called through it must be idempotent (allocations, which only skip stamps or
    ids; timetick reports; load, release, flush; the data node's batch reports) or carry a
    request id: a DDL's stamp, with which the rootcoord answers a repeated request from its
    ``RequestLog`` instead of running it twice.
    """

    def __init__(
        self,
        registry: SessionRegistry,
        role: str,
        service: str,
        patience_s: float = 30.0,
        fail_fast: dict[str, float] | None = None,
    ) -> None:
        self._registry = registry
        self._role = role
        self._service = service
        self._patience_s = patience_s
        self._fail_fast = dict(fail_fast or {})
        self._lock = threading.Lock()
        self._client: RpcClient | None = None
        self._member = -1
        registry.watch(role, self._on_members)

    def _on_members(self, members: dict[int, SessionInfo]) -> None:
        """Drop the client of a member whose session ended (a stalled or dead leader):
        closing its channel cancels the calls waiting on it, which then retry against the
        new leader instead of hanging until their deadline."""
        with self._lock:
            client = self._client
            if client is None or self._member in members:
                return
            self._client = None
        log.info("active %s left; following the failover", self._role)
        client.close()

    def _current(self) -> RpcClient:
        with self._lock:
            if self._client is None:
                members = self._registry.members(self._role)
                if not members:
                    raise MilvusError(Code.SERVICE_NOT_READY, f"no active {self._role}")
                self._member = max(members)
                self._client = RpcClient(members[self._member].address, self._service)
            return self._client

    def _reset(self, client: RpcClient) -> None:
        with self._lock:
            if self._client is client:
                self._client = None
                client.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)

        budget = self._fail_fast.get(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            deadline = time.monotonic() + (budget or self._patience_s)
            while True:
                try:
                    client = self._current()
                    left = deadline - time.monotonic() if budget else None
                    return client.invoke(name, args, kwargs, max(left, 0.05) if left else None)
                except MilvusError as exc:
                    if exc.code not in (Code.SERVICE_UNAVAILABLE, Code.SERVICE_NOT_READY):
                        raise
                    if time.monotonic() > deadline:
                        if budget:
                            raise self._unavailable(name, budget) from exc
                        raise
                    if self._client is not None:
                        self._reset(self._client)
                    log.info("waiting for the active %s", self._role)
                    time.sleep(0.2)

        return call

    def _unavailable(self, method: str, budget: float) -> MilvusError:
        return MilvusError(
            Code.SERVICE_UNAVAILABLE,
            f"the {self._role} did not answer {method} within {budget:g} s (stalled, or a "
            "standby is taking over): retry",
        )
