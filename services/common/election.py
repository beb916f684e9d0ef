"""Active/standby leadership on a ZooKeeper lock.

A leader must stop acting the moment it can no longer be sure it leads. Kazoo reports
SUSPENDED when the connection drops (the session may still be alive) and LOST when the
session expired (another node may already lead): both end leadership here, and the owner's
``on_lost`` callback runs so it can stop serving (rootcoord stops its TSO). Fencing of stale
writes is the metastore's job (the TSO bound uses compare-and-set).
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import socket
import threading
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import LockTimeout, NoNodeError

log = logging.getLogger(__name__)


def process_identifier(pid: int | None = None) -> str:
    """``host:pid``: how a contender names its process (its lock node's data starts so)."""
    return f"{socket.gethostname()}:{pid or os.getpid()}"


def evict_contenders(client: KazooClient, cluster_root: str, pid: int) -> list[str]:
    """Delete the lock nodes of process ``pid`` on this host, which is known to be dead.

    Its ZooKeeper session would hold them until it expires; a supervisor that saw the
    process exit frees them at once, so a standby takes over without waiting."""
    prefix = process_identifier(pid)
    base = posixpath.join(cluster_root, "leader")
    evicted = []
    with contextlib.suppress(NoNodeError):
        for name in client.get_children(base):
            lock = posixpath.join(base, name)
            for child in client.get_children(lock):
                path = posixpath.join(lock, child)
                with contextlib.suppress(NoNodeError):
                    data = client.get(path)[0].decode(errors="replace")
                    if data == prefix or data.startswith(prefix + ":"):
                        client.delete(path)
                        evicted.append(path)
    return evicted


class LeaderElection:
    def __init__(
        self,
        client: KazooClient,
        cluster_root: str,
        name: str,
        identifier: str,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self._zk = client
        self._lock = client.Lock(posixpath.join(cluster_root, "leader", name), identifier)
        self._on_lost = on_lost
        self._leading = threading.Event()
        client.add_listener(self._on_state)

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    def campaign(self, timeout_s: float | None = None) -> bool:
        """Block until this process leads (True) or ``timeout_s`` passes (False)."""
        try:
            acquired = self._lock.acquire(blocking=True, timeout=timeout_s)
        except LockTimeout:
            return False
        if acquired:
            self._leading.set()
            log.info("became leader", extra={"lock": self._lock.path})
            return True
        return False

    def contenders(self) -> list[str]:
        """Identifiers of every contender, the leader first."""
        return list(self._lock.contenders())

    def resign(self) -> None:
        self._leading.clear()
        try:
            self._lock.release()
        finally:
            self._zk.remove_listener(self._on_state)

    def _on_state(self, state: str) -> None:
        if state in (KazooState.SUSPENDED, KazooState.LOST) and self._leading.is_set():
            self._leading.clear()
            log.warning("leadership lost", extra={"lock": self._lock.path, "state": state})
            if self._on_lost is not None:
                # Kazoo calls listeners on its event thread: never block it.
                threading.Thread(target=self._on_lost, name="leader-lost", daemon=True).start()
