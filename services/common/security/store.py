"""Users, roles and grants in the metastore, under ``security/`` of the cluster root.

``users/{name}`` holds the bcrypt hash and the user's roles, ``roles/{name}`` a role's
description, ``grants/{role}`` the role's grants (a JSON list), ``apikeys/{sha256}`` an API
key's user, name and creation time, ``groups/{name}`` a custom privilege group's privileges,
and ``version`` a counter.
Every change is one transaction that also bumps ``version`` and checks it did not move since
the state it was computed from (optimistic, retried): changes from several proxies never
interleave, and a proxy learns that its cached state is stale from one key (watched in a
deployment; see services/proxy/service.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from vectide.services.common.kv.base import KVError, MetaKV, Txn
from vectide.services.common.security.privileges import Grant

PREFIX = "security"
VERSION_KEY = f"{PREFIX}/version"
_ATTEMPTS = 32
KEY_ID_LENGTH = 12


@dataclass(frozen=True)
class User:
    name: str
    password_hash: str
    roles: tuple[str, ...] = ()


@dataclass(frozen=True)
class ApiKey:
    """A stored API key (services/common/security/apikeys.py): its SHA-256, never the key."""

    digest: str  # SHA-256 of the key, hex
    user: str
    name: str
    created: float  # seconds since the epoch

    @property
    def key_id(self) -> str:
        """How list and revoke name the key: the first hex digits of its digest."""
        return self.digest[:KEY_ID_LENGTH]

    def to_dict(self) -> dict[str, object]:
        return {"id": self.key_id, "user": self.user, "name": self.name, "created": self.created}


@dataclass
class Snapshot:
    """The whole RBAC state at one ``version``: small (users and roles number in the tens)."""

    version: int = 0
    users: dict[str, User] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)
    grants: dict[str, list[Grant]] = field(default_factory=dict)
    #: API keys by digest
    apikeys: dict[str, ApiKey] = field(default_factory=dict)
    #: custom privilege groups: name -> privileges (stored names, ``PrivilegeQuery``)
    groups: dict[str, frozenset[str]] = field(default_factory=dict)

    def grants_of(self, roles: list[str]) -> list[Grant]:
        return [g for role in roles for g in self.grants.get(role, [])]


@dataclass
class Changes:
    """Records to write (``None`` deletes), keyed like the snapshot: ``users/alice``."""

    records: dict[str, object | None] = field(default_factory=dict)

    def put_user(self, user: User) -> None:
        self.records[f"users/{user.name}"] = {
            "password_hash": user.password_hash,
            "roles": list(user.roles),
        }

    def delete_user(self, name: str) -> None:
        self.records[f"users/{name}"] = None

    def put_role(self, name: str, description: str) -> None:
        self.records[f"roles/{name}"] = {"description": description}

    def delete_role(self, name: str) -> None:
        self.records[f"roles/{name}"] = None
        self.records[f"grants/{name}"] = None

    def put_apikey(self, key: ApiKey) -> None:
        self.records[f"apikeys/{key.digest}"] = {
            "user": key.user,
            "name": key.name,
            "created": key.created,
        }

    def delete_apikey(self, digest: str) -> None:
        self.records[f"apikeys/{digest}"] = None

    def put_group(self, name: str, privileges: frozenset[str]) -> None:
        self.records[f"groups/{name}"] = sorted(privileges)

    def delete_group(self, name: str) -> None:
        self.records[f"groups/{name}"] = None

    def put_grants(self, role: str, grants: list[Grant]) -> None:
        self.records[f"grants/{role}"] = [
            [g.object_type, g.object_name, g.db_name, g.privilege, g.grantor] for g in grants
        ]


class RbacStore:
    def __init__(self, kv: MetaKV) -> None:
        self._kv = kv

    def load(self) -> Snapshot:
        raw = self._kv.list_prefix(PREFIX)
        snap = Snapshot(version=int(raw.pop(VERSION_KEY, b"0")))
        for key, value in raw.items():
            kind, _, name = key[len(PREFIX) + 1 :].partition("/")
            data = json.loads(value)
            if kind == "users":
                snap.users[name] = User(name, data["password_hash"], tuple(data["roles"]))
            elif kind == "roles":
                snap.roles[name] = data["description"]
            elif kind == "grants":
                snap.grants[name] = [Grant(name, *g) for g in data]
            elif kind == "apikeys":
                snap.apikeys[name] = ApiKey(name, data["user"], data["name"], data["created"])
            elif kind == "groups":
                snap.groups[name] = frozenset(data)
        return snap

    def change(self, plan: Callable[[Snapshot], Changes]) -> Snapshot:
        """Apply ``plan``'s changes to the current state in one transaction, recomputing them
        when another writer got there first; returns the state they were computed from."""
        for _ in range(_ATTEMPTS):
            snap = self.load()
            changes = plan(snap)
            if not changes.records or self._commit(snap.version, changes):
                return snap
        raise KVError("RBAC change did not settle (contention on security/version)")

    def _commit(self, version: int, changes: Changes) -> bool:
        expected = str(version).encode() if version else None
        txn = Txn(checks={VERSION_KEY: expected}, puts={VERSION_KEY: str(version + 1).encode()})
        for key, record in changes.records.items():
            full = f"{PREFIX}/{key}"
            if record is None:
                txn.deletes.append(full)
            else:
                txn.puts[full] = json.dumps(record).encode()
        return self._kv.commit(txn)
