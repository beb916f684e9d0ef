"""Service discovery: each running role registers an ephemeral znode; others watch them.

``/{root}/{cluster}/sessions/{role}/{id}`` holds JSON ``{id, role, address, pid, ...}``. The
node is ephemeral, so it vanishes when the process's ZooKeeper session ends (crash, kill -9,
network partition past the session timeout): membership needs no heartbeat code of ours.
The id is the node's sequence number, unique per cluster and role; the node is created with
its data in one step, so a watcher never sees a member without its address.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import posixpath
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionInfo:
    role: str
    id: int
    address: str
    pid: int = field(default_factory=os.getpid)
    started_at: float = field(default_factory=time.time)
    extra: dict[str, str] = field(default_factory=dict)
    #: the server's labels (``labels_from_env``): resource groups may ask for them
    labels: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """The znode data; the id is the node name's sequence number, not stored. No labels,
        no ``labels`` key: a reader from before labels existed reads the session as before."""
        data = {k: v for k, v in asdict(self).items() if k != "id"}
        if not self.labels:
            del data["labels"]
        return json.dumps(data).encode()

    @classmethod
    def from_json(cls, server_id: int, raw: bytes) -> SessionInfo:
        """Keys this version does not know (a newer server's) are skipped."""
        data = json.loads(raw)
        known = {f.name for f in fields(cls)} - {"id"}
        return cls(id=server_id, **{k: v for k, v in data.items() if k in known})


MembershipCallback = Callable[[dict[int, SessionInfo]], None]

#: prefixes of the environment variables that label a server: Milvus's too, so that a
#: manifest written for Milvus's query nodes labels Vectide's alike (Vectide's wins a tie)
LABEL_PREFIXES = ("MILVUS_SERVER_LABEL_", "VECTIDE_SERVER_LABEL_")


def labels_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """This server's labels: ``VECTIDE_SERVER_LABEL_<KEY>=<value>`` gives label ``<KEY>``
    the value ``<value>`` (the key as written)."""
    environ = os.environ if environ is None else environ
    labels: dict[str, str] = {}
    for prefix in LABEL_PREFIXES:
        for name, value in environ.items():
            if name.startswith(prefix) and len(name) > len(prefix):
                labels[name[len(prefix) :]] = value
    return labels


class SessionRegistry:
    """Register this process and watch the members of any role in one cluster."""

    def __init__(self, client: KazooClient, cluster_root: str) -> None:
        self.client = client
        self._zk = client
        self._base = posixpath.join(cluster_root, "sessions")

    def register(
        self,
        role: str,
        address: str,
        extra: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
    ) -> SessionInfo:
        role_path = posixpath.join(self._base, role)
        self._zk.ensure_path(role_path)
        info = SessionInfo(
            role=role, id=-1, address=address, extra=dict(extra or {}), labels=dict(labels or {})
        )
        path = self._zk.create(
            posixpath.join(role_path, "n-"), info.to_json(), ephemeral=True, sequence=True
        )
        info = replace(info, id=_sequence(path))
        log.info("session registered", extra={"role": role, "id": info.id, "address": address})
        return info

    def unregister(self, info: SessionInfo) -> None:
        with contextlib.suppress(NoNodeError):
            self._zk.delete(self._node_path(info.role, info.id))

    def evict(self, pid: int, since: float) -> list[SessionInfo]:
        """Delete the sessions process ``pid`` registered after ``since`` (when it started):
        a supervisor that saw it exit frees them without waiting for the session timeout."""
        evicted = []
        with contextlib.suppress(NoNodeError):
            for role in self._zk.get_children(self._base):
                for info in self.members(role).values():
                    if info.pid == pid and info.started_at >= since:
                        self.unregister(info)
                        evicted.append(info)
        return evicted

    def members(self, role: str) -> dict[int, SessionInfo]:
        role_path = posixpath.join(self._base, role)
        try:
            children = self._zk.get_children(role_path)
        except NoNodeError:
            return {}
        return self._read(role_path, children)

    def watch(self, role: str, callback: MembershipCallback) -> None:
        """Call ``callback(members)`` now and after every membership change of ``role``."""
        role_path = posixpath.join(self._base, role)
        self._zk.ensure_path(role_path)

        def on_children(children: list[str]) -> None:
            try:
                callback(self._read(role_path, children))
            except Exception:
                log.exception("membership callback failed", extra={"role": role})

        self._zk.ChildrenWatch(role_path, on_children)

    def wait_for(
        self, role: str, predicate: Callable[[dict[int, SessionInfo]], bool], timeout_s: float
    ) -> dict[int, SessionInfo]:
        """Block until ``predicate(members)`` holds; raise TimeoutError otherwise."""
        done = threading.Event()
        latest: dict[int, SessionInfo] = {}

        def check(members: dict[int, SessionInfo]) -> None:
            latest.clear()
            latest.update(members)
            if predicate(members):
                done.set()

        self.watch(role, check)
        if not done.wait(timeout_s):
            raise TimeoutError(f"{role} membership did not converge: {sorted(latest)}")
        return dict(latest)

    def _read(self, role_path: str, children: list[str]) -> dict[int, SessionInfo]:
        members: dict[int, SessionInfo] = {}
        for child in children:
            try:
                raw, _ = self._zk.get(posixpath.join(role_path, child))
            except NoNodeError:
                continue
            info = SessionInfo.from_json(_sequence(child), raw)
            members[info.id] = info
        return members

    def _node_path(self, role: str, server_id: int) -> str:
        return posixpath.join(self._base, role, f"n-{server_id:010d}")


def _sequence(node: str) -> int:
    return int(node.rsplit("-", 1)[1])
