"""API keys: random tokens that authenticate as a user, for clients that should not hold a
password (pymilvus ``MilvusClient(uri, token=key)``, REST ``Authorization: Bearer key``).

A token without ``:`` is an API key, as in Milvus. A key is ``vk_`` and 43 characters of
``secrets.token_urlsafe`` (256 random bits), shown once when it is created and stored only
as its SHA-256: a key has the entropy that makes a salted slow hash pointless, and a
metastore dump reveals no usable key. Records live beside users and roles
(``security/apikeys/<sha256>``: user, name, created) and change through the same versioned
transactions, so a revocation reaches every proxy's cache through the same watch.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable

from vectide.services.common import errors
from vectide.services.common.security.passwords import check_username
from vectide.services.common.security.store import ApiKey, Changes, RbacStore, Snapshot

#: what every key starts with: a key is recognisable in a log or a leaked file
KEY_PREFIX = "vk_"
MAX_NAME_LENGTH = 64


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


class ApiKeys:
    """Create, list and revoke keys over the RBAC store; ``on_change`` runs after a change
    (a local cache to clear; other processes learn of it through the store's version)."""

    def __init__(
        self,
        store: RbacStore,
        clock: Callable[[], float] = time.time,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._on_change = on_change

    def create(self, user: str, name: str = "") -> tuple[str, ApiKey]:
        """A new key for ``user`` (who must exist), returned once with its record. Names are
        unique per user; an empty one becomes ``key-<id>``."""
        check_username(user)
        key = new_key()
        hashed = digest(key)
        record = ApiKey(hashed, user, name or f"key-{hashed[:8]}", self._clock())
        _check_name(record.name)

        def plan(snap: Snapshot) -> Changes:
            if user not in snap.users:
                raise errors.invalid(f"user not found: {user} (create the user first)")
            if any(k.user == user and k.name == record.name for k in snap.apikeys.values()):
                raise errors.invalid(f"user {user} already has an API key named {record.name!r}")
            changes = Changes()
            changes.put_apikey(record)
            return changes

        self._store.change(plan)
        self._on_change()
        return key, record

    def list(self, user: str = "") -> list[ApiKey]:
        """Every key (or ``user``'s), oldest first."""
        keys = self._store.load().apikeys.values()
        return sorted((k for k in keys if user in ("", k.user)), key=lambda k: k.created)

    def revoke(self, which: str, user: str = "") -> ApiKey:
        """Delete the key whose id (or name, or the key itself) is ``which``, narrowed to
        ``user``'s keys when given; refused when nothing or more than one key matches."""
        found: list[ApiKey] = []

        def plan(snap: Snapshot) -> Changes:
            found[:] = _matching(snap, which, user)
            if not found:
                raise errors.invalid(f"no API key with id or name {which!r}")
            if len(found) > 1:
                owners = ", ".join(f"{k.key_id} ({k.user})" for k in found)
                raise errors.invalid(f"{which!r} names several API keys: {owners}; give the id")
            changes = Changes()
            changes.delete_apikey(found[0].digest)
            return changes

        self._store.change(plan)
        self._on_change()
        return found[0]


def _matching(snap: Snapshot, which: str, user: str) -> list[ApiKey]:
    hashed = digest(which)
    return [
        k
        for k in snap.apikeys.values()
        if k.digest == hashed or (user in ("", k.user) and which in (k.key_id, k.name))
    ]


def _check_name(name: str) -> None:
    if len(name) > MAX_NAME_LENGTH or not name.isprintable():
        raise errors.invalid(
            f"invalid API key name {name!r}: printable, at most {MAX_NAME_LENGTH} characters"
        )
