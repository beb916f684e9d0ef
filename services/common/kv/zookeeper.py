"""MetaKV on ZooKeeper (kazoo): keys are znodes under a cluster root.

Values live in znode data. A znode created only as a parent of others holds ``b""``, so
empty values are indistinguishable from directories and ``list_prefix`` skips them.
"""

from __future__ import annotations

import logging
import posixpath
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    KazooException,
    NodeExistsError,
    NoNodeError,
    SessionClosedRequireSaslError,
)
from kazoo.retry import KazooRetry
from kazoo.security import make_acl

from vectide.services.common.config import ZooKeeperConfig
from vectide.services.common.kv.base import KVError, Txn, validate_key

log = logging.getLogger(__name__)

_TXN_ATTEMPTS = 16


def connect_zookeeper(cfg: ZooKeeperConfig, timeout_s: float = 15.0) -> KazooClient:
    """A started kazoo client with retrying connections; the caller stops it.

    Every Vectide process builds its ZooKeeper clients here, so the SASL login and the ACL
    of ``zookeeper.sasl_*`` reach all of them. A refused login surfaces on the first
    request (kazoo reports the session as connected first), so one request is made before
    the client is handed out: a wrong password is a clear error here, not a hang later.
    """
    retry = {"max_tries": -1, "delay": 0.1, "max_delay": 2.0}
    client = KazooClient(
        hosts=cfg.hosts,
        timeout=cfg.session_timeout_s,
        connection_retry=retry,
        command_retry=retry,
        **sasl_options(cfg),
    )
    try:
        client.start(timeout=timeout_s)
        client.exists("/")
    except Exception as exc:
        client.stop()
        client.close()
        raise KVError(_connect_error(cfg, exc)) from exc
    return client


def sasl_options(cfg: ZooKeeperConfig) -> dict[str, Any]:
    """kazoo's keyword arguments for the SASL login (DIGEST-MD5) and the znode ACL."""
    credentials = cfg.sasl_credentials()
    if credentials is None:
        if cfg.sasl_acl:
            raise KVError("zookeeper.sasl_acl needs zookeeper.sasl_username (the ACL's user)")
        return {}
    user, password = credentials
    options: dict[str, Any] = {
        "sasl_options": {"mechanism": "DIGEST-MD5", "username": user, "password": password}
    }
    if cfg.sasl_acl:
        options["default_acl"] = [make_acl("sasl", user, all=True)]
    return options


def _connect_error(cfg: ZooKeeperConfig, exc: Exception) -> str:
    """Why a connection failed, naming the config keys that would fix it."""
    where = f"ZooKeeper at {cfg.hosts}"
    if cfg.sasl_username:
        return (
            f"{where} refused the SASL (DIGEST-MD5) login of user {cfg.sasl_username!r}: "
            "wrong password, a user its JAAS config does not list, or SASL not enabled on the "
            f"server (zookeeper.sasl_username, zookeeper.sasl_password; {type(exc).__name__})"
        )
    if isinstance(exc, SessionClosedRequireSaslError):
        return (
            f"{where} requires SASL authentication: set zookeeper.sasl_username and "
            "zookeeper.sasl_password (or zookeeper.sasl_password_file)"
        )
    return f"cannot connect to {where}: {exc or type(exc).__name__}"


def cluster_root(cfg: ZooKeeperConfig, cluster: str) -> str:
    return posixpath.join(cfg.root, cluster)


class ZooKeeperKV:
    """MetaKV backed by ZooKeeper. Thread-safe (kazoo serialises requests per client)."""

    def __init__(self, client: KazooClient, root: str) -> None:
        self._zk = client
        self._root = root.rstrip("/")
        self._retry = KazooRetry(max_tries=5, delay=0.05, max_delay=1.0)
        self._retry(self._zk.ensure_path, self._root)

    @property
    def client(self) -> KazooClient:
        return self._zk

    def _path(self, key: str) -> str:
        return f"{self._root}/{validate_key(key)}"

    def get(self, key: str) -> bytes | None:
        try:
            data, _ = self._retry(self._zk.get, self._path(key))
        except NoNodeError:
            return None
        except KazooException as exc:
            raise KVError(f"get {key}: {exc}") from exc
        return data

    def put(self, key: str, value: bytes) -> None:
        path = self._path(key)
        try:
            self._retry(self._put, path, value)
        except KazooException as exc:
            raise KVError(f"put {key}: {exc}") from exc

    def _put(self, path: str, value: bytes) -> None:
        try:
            self._zk.set(path, value)
        except NoNodeError:
            try:
                self._zk.create(path, value, makepath=True)
            except NodeExistsError:
                self._zk.set(path, value)

    def delete(self, key: str) -> None:
        try:
            self._retry(self._zk.delete, self._path(key), recursive=True)
        except NoNodeError:
            pass
        except KazooException as exc:
            raise KVError(f"delete {key}: {exc}") from exc

    def compare_and_set(self, key: str, expected: bytes | None, value: bytes) -> bool:
        return self.commit(Txn(checks={key: expected}, puts={key: value}))

    def commit(self, txn: Txn) -> bool:
        """Build one ZooKeeper multi-op from the current versions; rebuild if a version moved.

        A failed multi is ambiguous (a check failed, or a concurrent writer created a node we
        meant to create), so the checks are re-evaluated before answering False.
        """
        for _ in range(_TXN_ATTEMPTS):
            try:
                ops = self._plan(txn)
                if ops is None:
                    return False
                transaction = self._zk.transaction()
                for op, args in ops:
                    getattr(transaction, op)(*args)
                results = transaction.commit()
            except KazooException as exc:
                raise KVError(f"transaction: {exc}") from exc
            if not any(isinstance(r, Exception) for r in results):
                return True
        raise KVError(f"transaction did not settle after {_TXN_ATTEMPTS} attempts (contention)")

    def _plan(self, txn: Txn) -> list[tuple[str, tuple]] | None:
        ops: list[tuple[str, tuple]] = []
        for key, expected in txn.checks.items():
            path = self._path(key)
            try:
                data, stat = self._zk.get(path)
            except NoNodeError:
                if expected is not None:
                    return None
                ops += [("create", (path, b"")), ("delete", (path, -1))]
                continue
            if data != expected:
                return None
            ops.append(("check", (path, stat.version)))
        for key, value in txn.puts.items():
            path = self._path(key)
            stat = self._zk.exists(path)
            if stat is None:
                self._zk.ensure_path(posixpath.dirname(path))
                ops.append(("create", (path, value)))
            else:
                ops.append(("set_data", (path, value, -1)))
        for key in txn.deletes:
            ops += [("delete", (p, -1)) for p in self._subtree_leaves_first(self._path(key))]
        return ops

    def _subtree_leaves_first(self, path: str) -> list[str]:
        try:
            children = self._zk.get_children(path)
        except NoNodeError:
            return []
        out: list[str] = []
        for child in children:
            out += self._subtree_leaves_first(f"{path}/{child}")
        return [*out, path]

    def list_prefix(self, prefix: str) -> dict[str, bytes]:
        base = self._path(prefix)
        found: dict[str, bytes] = {}
        try:
            self._walk(base, found)
        except KazooException as exc:
            raise KVError(f"list {prefix}: {exc}") from exc
        return dict(sorted(found.items()))

    def _walk(self, path: str, found: dict[str, bytes]) -> None:
        try:
            children = self._retry(self._zk.get_children, path)
        except NoNodeError:
            return
        for child in children:
            child_path = f"{path}/{child}"
            try:
                data, _ = self._retry(self._zk.get, child_path)
            except NoNodeError:
                continue
            if data:
                found[child_path[len(self._root) + 1 :]] = data
            self._walk(child_path, found)
