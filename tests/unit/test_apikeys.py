"""API keys over the memory metastore: created random and stored hashed, authenticating as
their user through the same Guard as passwords, refused once revoked or their user dropped."""

import base64
import json

import pytest

from vectide.services.common.errors import MilvusError
from vectide.services.common.kv import MemoryKV
from vectide.services.common.security.apikeys import KEY_PREFIX, ApiKeys, digest
from vectide.services.common.security.guard import Guard, Unauthenticated
from vectide.services.common.security.privileges import Requirement
from vectide.services.common.security.rbac import Rbac
from vectide.services.common.security.store import RbacStore
from vectide.services.proxy.grpc_auth import PRIVILEGE_NAMES


@pytest.fixture
def parts():
    kv = MemoryKV()
    store = RbacStore(kv)
    guard = Guard(store, cache_ttl_s=600.0)
    rbac = Rbac(store, PRIVILEGE_NAMES, on_change=guard.invalidate, rounds=4)
    rbac.bootstrap("Milvus")
    rbac.create_user("alice", "password1")
    ticks = iter(range(1700000000, 1800000000))  # keys list oldest first: distinct stamps
    keys = ApiKeys(store, clock=lambda: float(next(ticks)), on_change=guard.invalidate)
    return kv, guard, rbac, keys


def test_a_key_is_random_and_only_its_digest_is_stored(parts):
    kv, _, _, keys = parts
    key, record = keys.create("alice", "ci")
    other, _ = keys.create("alice")
    assert key.startswith(KEY_PREFIX) and ":" not in key and len(key) >= 40
    assert key != other
    assert record.digest == digest(key) and record.key_id == digest(key)[:12]
    stored = kv.list_prefix("security/apikeys")
    assert key.encode() not in b"".join(stored.values()) and not any(key in k for k in stored)
    assert json.loads(stored[f"security/apikeys/{record.digest}"]) == {
        "user": "alice",
        "name": "ci",
        "created": 1700000000.0,
    }
    assert [k.name for k in keys.list("alice")] == ["ci", f"key-{digest(other)[:8]}"]
    assert keys.list("root") == []


def test_a_key_authenticates_as_its_user_over_grpc_and_rest(parts):
    _, guard, _, keys = parts
    key, _ = keys.create("alice")
    assert guard.authenticate(base64.b64encode(key.encode()).decode()) == "alice"  # gRPC
    assert guard.authenticate_token(key) == "alice"  # REST bearer
    with pytest.raises(Unauthenticated, match="check api key is correct"):
        guard.authenticate_token(key + "x")
    with pytest.raises(Exception, match="permission deny to alice"):  # RBAC applies
        guard.check("alice", Requirement("Global", "PrivilegeCreateCollection", "default"))


def test_revoked_keys_are_refused_at_once(parts):
    _, guard, _, keys = parts
    key, record = keys.create("alice", "laptop")
    kept, _ = keys.create("alice", "ci")
    assert guard.authenticate_token(key) == "alice"  # now cached in the guard's snapshot
    assert keys.revoke(record.key_id) == record
    with pytest.raises(Unauthenticated):
        guard.authenticate_token(key)
    assert guard.authenticate_token(kept) == "alice"
    keys.revoke("ci", user="alice")  # by name
    with pytest.raises(Unauthenticated):
        guard.authenticate_token(kept)
    leaked, _ = keys.create("alice", "leaked")
    keys.revoke(leaked)  # by the key itself
    with pytest.raises(Unauthenticated):
        guard.authenticate_token(leaked)
    assert keys.list() == []


def test_create_and_revoke_refusals(parts):
    _, _, _, keys = parts
    with pytest.raises(MilvusError, match="user not found: bob"):
        keys.create("bob")
    keys.create("alice", "ci")
    with pytest.raises(MilvusError, match="already has an API key named 'ci'"):
        keys.create("alice", "ci")
    keys.create("root", "ci")
    with pytest.raises(MilvusError, match="names several API keys"):
        keys.revoke("ci")
    with pytest.raises(MilvusError, match="no API key with id or name 'nope'"):
        keys.revoke("nope")
    with pytest.raises(MilvusError, match="invalid API key name"):
        keys.create("alice", "x" * 65)


def test_dropping_a_user_drops_its_keys(parts):
    _, guard, rbac, keys = parts
    key, _ = keys.create("alice")
    rbac.delete_user("alice")
    assert keys.list() == []
    with pytest.raises(Unauthenticated):
        guard.authenticate_token(key)
