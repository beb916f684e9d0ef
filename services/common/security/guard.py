"""Who is calling, and may they: the check every Milvus RPC passes when authorization is on.

``authenticate`` turns the credentials a client sent into a user name; ``check`` decides
whether that user's roles allow what a request needs. Both read one cached snapshot of the
RBAC state (reloaded after ``invalidate`` or ``cache_ttl_s``), and a verified password is
remembered as long as its user's stored hash is unchanged, so bcrypt runs once per client
and TTL, not once per RPC. Transport-free: the gRPC interceptor and a REST front-end call it
alike and map :class:`Unauthenticated` / :class:`PermissionDenied` to their own statuses.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from vectide.services.common.security.apikeys import digest
from vectide.services.common.security.passwords import verify_password
from vectide.services.common.security.privileges import USER, Requirement, permitted
from vectide.services.common.security.store import RbacStore, Snapshot

ROOT = "root"
ADMIN = "admin"
PUBLIC = "public"
BUILTIN_ROLES = (ADMIN, PUBLIC)
SEPARATOR = ":"


class Unauthenticated(Exception):
    """No, unreadable or wrong credentials (gRPC UNAUTHENTICATED, as Milvus answers)."""


class PermissionDenied(Exception):
    """Valid credentials whose roles lack the privilege (gRPC PERMISSION_DENIED)."""


@dataclass(frozen=True)
class _Verified:
    user: str
    password_hash: str
    until: float


class Guard:
    def __init__(
        self,
        store: RbacStore,
        cache_ttl_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._ttl = cache_ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._snap: Snapshot | None = None
        self._snap_until = 0.0
        self._verified: dict[bytes, _Verified] = {}
        self._generation = 0  # bumped by every invalidation

    # -- caching -------------------------------------------------------------------------

    def invalidate(self) -> None:
        """Forget the cached state: users, roles or grants changed (here or elsewhere)."""
        with self._lock:
            self._generation += 1
            self._snap = None
            self._verified.clear()

    def snapshot(self) -> Snapshot:
        """The current RBAC state, from the cache while it is fresh. A load that an
        invalidation overtook is used once but not cached: it may predate the change."""
        now = self._clock()
        with self._lock:
            if self._snap is not None and now < self._snap_until:
                return self._snap
            generation = self._generation
        snap = self._store.load()
        with self._lock:
            if generation == self._generation:
                self._snap, self._snap_until = snap, now + self._ttl
        return snap

    # -- authentication ------------------------------------------------------------------

    def authenticate(self, header: str | None) -> str:
        """The user named by an ``authorization`` header as pymilvus sends it:
        ``base64("user:password")`` (both ``token=`` and ``user=``/``password=``)."""
        if not header:
            raise Unauthenticated("missing authorization in header")
        try:
            token = base64.b64decode(header, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise Unauthenticated("invalid token format") from exc
        return self.authenticate_token(token)

    def authenticate_token(self, token: str) -> str:
        """The user of a plain token (REST's ``Authorization: Bearer``): ``user:password``,
        or, without ``:``, an API key (services/common/security/apikeys.py)."""
        if SEPARATOR not in token:
            return self._api_key_user(token)
        name, password = token.split(SEPARATOR, 1)
        key = hashlib.sha256(token.encode()).digest()
        snap = self.snapshot()
        user = snap.users.get(name)
        with self._lock:
            known = self._verified.get(key)
        now = self._clock()
        fresh = known is not None and now < known.until
        if user is not None and fresh and known.password_hash == user.password_hash:
            return name
        if user is None or not verify_password(password, user.password_hash):
            raise Unauthenticated(
                "auth check failure, please check username and password are correct"
            )
        with self._lock:
            self._verified[key] = _Verified(name, user.password_hash, now + self._ttl)
        return name

    def _api_key_user(self, key: str) -> str:
        """The owner of API key ``key``: looked up by its SHA-256 in the cached snapshot,
        which every revocation clears (the store's version watch). A key whose user was
        dropped authenticates no one."""
        snap = self.snapshot()
        found = snap.apikeys.get(digest(key))
        if found is None or found.user not in snap.users:
            raise Unauthenticated("auth check failure, please check api key is correct")
        return found.user

    # -- authorization -------------------------------------------------------------------

    def roles_of(self, user: str) -> list[str]:
        """The user's roles, ``public`` included (every user holds it)."""
        found = self.snapshot().users.get(user)
        return [*(found.roles if found else ()), PUBLIC]

    def check(self, user: str, need: Requirement, role_asked: str = "") -> None:
        """Raise :class:`PermissionDenied` unless ``user`` may do what ``need`` says.

        As Milvus: root and holders of ``admin`` may do anything; a user may read and
        change itself (objects of type User named as the user); a user may list the grants
        of a role it holds (``role_asked``); everything else needs a covering grant."""
        if user == ROOT:
            return
        roles = self.roles_of(user)
        if ADMIN in roles:
            return
        if need.object_type == USER and all(n == user for n in need.object_names):
            return
        if role_asked and role_asked in roles:
            return
        snap = self.snapshot()
        if permitted(snap.grants_of(roles), need, snap.groups):
            return
        raise PermissionDenied(
            f"{need.privilege}: permission deny to {user} in the `{need.db_name}` database"
        )
