"""The security core over the memory metastore: password hashing, authentication and its
cache, Milvus's privilege matching, the RBAC rules and refusals, and the gRPC adapter's
reading of what a request needs."""

import base64
import logging
from dataclasses import replace

import bcrypt
import pytest
from pymilvus.grpc_gen import milvus_pb2

from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.kv import MemoryKV
from vectide.services.common.security import audit
from vectide.services.common.security.guard import Guard, PermissionDenied, Unauthenticated
from vectide.services.common.security.passwords import hash_password, verify_password
from vectide.services.common.security.privileges import (
    Grant,
    Requirement,
    api_name,
    check_level,
    covers,
)
from vectide.services.common.security.rbac import Rbac, RbacBackup
from vectide.services.common.security.store import RbacStore, User
from vectide.services.proxy.grpc_auth import PRIVILEGE_NAMES, audit_fields, requirement

ROUNDS = 4  # bcrypt's cheapest cost: the tests check behaviour, not the work factor


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class CountingStore(RbacStore):
    """Counts snapshot loads, to see the guard's cache at work."""

    loads = 0

    def load(self):
        self.loads += 1
        return super().load()


@pytest.fixture
def parts():
    store = CountingStore(MemoryKV())
    clock = Clock()
    guard = Guard(store, cache_ttl_s=30.0, clock=clock)
    rbac = Rbac(store, PRIVILEGE_NAMES, on_change=guard.invalidate, rounds=ROUNDS)
    rbac.bootstrap("Milvus")
    return store, guard, rbac, clock


def header(token: str) -> str:
    return base64.b64encode(token.encode()).decode()


def need(privilege: str, object_type: str = "Collection", name: str = "docs", db="default"):
    return Requirement(object_type, "Privilege" + privilege, db, (name,))


# -- passwords -----------------------------------------------------------------------------


def test_passwords_are_salted_and_long_ones_are_not_truncated():
    long = "p" * 100
    a, b = hash_password(long, ROUNDS), hash_password(long, ROUNDS)
    assert a != b  # salted
    assert verify_password(long, a) and verify_password(long, b)
    assert not verify_password("p" * 99 + "q", a)  # bcrypt alone would ignore byte 73+
    assert not verify_password("x", "not a hash")


# -- authentication ------------------------------------------------------------------------


def test_root_authenticates_with_the_initial_password_only(parts):
    _, guard, _, _ = parts
    assert guard.authenticate(header("root:Milvus")) == "root"
    for bad, message in [
        (None, "missing authorization"),
        ("", "missing authorization"),
        ("%%%not-base64", "invalid token format"),
        (header("root:milvus"), "check username and password"),
        (header("nobody:Milvus"), "check username and password"),
        (header("an-unknown-api-key"), "api key"),
    ]:
        with pytest.raises(Unauthenticated, match=message):
            guard.authenticate(bad)


def test_bootstrap_runs_once_so_a_changed_root_password_stays(parts):
    _, guard, rbac, _ = parts
    rbac.update_password("root", "Milvus", "S3cret!")
    rbac.bootstrap("Milvus")  # a restarted proxy with the default config
    assert guard.authenticate(header("root:S3cret!")) == "root"
    with pytest.raises(Unauthenticated):
        guard.authenticate(header("root:Milvus"))


def test_verified_credentials_are_cached_until_a_change_or_the_ttl(parts, monkeypatch):
    store, guard, rbac, clock = parts
    rbac.create_user("alice", "password1")
    calls = []
    real = verify_password
    monkeypatch.setattr(
        "vectide.services.common.security.guard.verify_password",
        lambda p, h: calls.append(p) or real(p, h),
    )
    store.loads = 0
    for _ in range(5):
        assert guard.authenticate(header("alice:password1")) == "alice"
    assert len(calls) == 1 and store.loads == 1  # one bcrypt, one snapshot
    clock.now = 31.0  # past the TTL: verified again
    guard.authenticate(header("alice:password1"))
    assert len(calls) == 2
    rbac.update_password("alice", "password1", "password2")  # clears the cache
    with pytest.raises(Unauthenticated):
        guard.authenticate(header("alice:password1"))
    assert guard.authenticate(header("alice:password2")) == "alice"


def test_a_change_by_another_proxy_is_seen_after_invalidate(parts):
    store, guard, _, _ = parts
    other = Rbac(store, PRIVILEGE_NAMES, rounds=ROUNDS)  # no hook into this guard
    assert guard.authenticate(header("root:Milvus")) == "root"
    other.create_user("bob", "password1")
    with pytest.raises(Unauthenticated):
        guard.authenticate(header("bob:password1"))  # cached snapshot: bob unknown yet
    guard.invalidate()  # what the metastore watch does
    assert guard.authenticate(header("bob:password1")) == "bob"


def test_a_dropped_user_is_refused_at_once(parts):
    _, guard, rbac, _ = parts
    rbac.create_user("carol", "password1")
    assert guard.authenticate(header("carol:password1")) == "carol"
    rbac.delete_user("carol")
    with pytest.raises(Unauthenticated):
        guard.authenticate(header("carol:password1"))


# -- authorization -------------------------------------------------------------------------


def test_root_and_admins_may_do_anything_others_need_grants(parts):
    _, guard, rbac, _ = parts
    rbac.create_user("alice", "password1")
    guard.check("root", need("DropDatabase", "Global", "*"))
    with pytest.raises(PermissionDenied, match="PrivilegeInsert: permission deny to alice"):
        guard.check("alice", need("Insert"))
    rbac.set_user_role("alice", "admin", member=True)
    guard.check("alice", need("Insert"))
    guard.check("alice", need("DropDatabase", "Global", "*"))


def test_public_defaults_let_every_user_describe_collections(parts):
    _, guard, rbac, _ = parts
    rbac.create_user("alice", "password1")
    guard.check("alice", need("DescribeCollection", "Global", "*", db="other"))
    guard.check("alice", need("IndexDetail", name="anything"))
    with pytest.raises(PermissionDenied):
        guard.check("alice", need("Search"))


def test_grants_are_scoped_to_collection_and_database(parts):
    _, guard, rbac, _ = parts
    rbac.create_user("alice", "password1")
    rbac.create_role("writer")
    rbac.set_user_role("alice", "writer", member=True)
    rbac.grant(Grant("writer", "Collection", "docs", "default", "Insert"))
    guard.check("alice", need("Insert"))
    for other in [need("Insert", name="logs"), need("Insert", db="d1"), need("Delete")]:
        with pytest.raises(PermissionDenied):
            guard.check("alice", other)
    rbac.grant(Grant("writer", "Collection", "*", "d1", "Search"))
    guard.check("alice", need("Search", name="any", db="d1"))
    rbac.grant(Grant("writer", "Collection", "docs", "default", "Insert"), revoke=True)
    with pytest.raises(PermissionDenied):
        guard.check("alice", need("Insert"))


def test_all_and_groups_cover_what_milvus_says():
    def grant(privilege, name="*", db="default"):
        return Grant("r", "Global", name, db, privilege)

    assert covers(grant("PrivilegeAll"), need("Insert"), "docs")
    assert not covers(grant("PrivilegeAll", db="d1"), need("Insert"), "docs")
    ro = Grant("r", "Collection", "docs", "default", "PrivilegeGroupReadOnly")
    assert covers(ro, need("Search"), "docs")
    assert not covers(ro, need("Search"), "logs")
    assert not covers(ro, need("Insert"), "docs")
    assert covers(grant("PrivilegeGroupAdmin"), need("CreateOwnership", "Global", "*"), "*")


def test_milvus_25_built_in_groups_cover_their_level_only(parts):
    _, guard, rbac, _ = parts
    rbac.create_user("alice", "password1")
    rbac.create_role("r")
    rbac.set_user_role("alice", "r", member=True)
    rbac.grant(Grant("r", "Collection", "docs", "default", "CollectionReadOnly"))
    rbac.grant(Grant("r", "Global", "*", "default", "DatabaseReadWrite"))
    rbac.grant(Grant("r", "Global", "*", "*", "ClusterReadOnly"))
    guard.check("alice", need("Search"))
    guard.check("alice", need("AlterDatabase", "Global", "*"))
    guard.check("alice", need("ListDatabases", "Global", "*", db="other"))
    for denied in (
        need("Insert"),  # CollectionReadWrite's
        need("Search", name="logs"),  # another collection
        need("CreateCollection", "Global", "*"),  # DatabaseAdmin's
        need("AlterDatabase", "Global", "*", db="other"),  # another database
    ):
        with pytest.raises(PermissionDenied):
            guard.check("alice", denied)
    assert [api_name(g.privilege) for g in rbac.select_grants("r")] == [
        "CollectionReadOnly",
        "DatabaseReadWrite",
        "ClusterReadOnly",
    ]


def test_database_and_cluster_groups_are_granted_at_their_level():
    check_level("PrivilegeGroupCollectionAdmin", "default", "docs")
    with pytest.raises(MilvusError, match="database-level privilege group: grant it on collection"):
        check_level("PrivilegeGroupDatabaseAdmin", "default", "docs")
    with pytest.raises(MilvusError, match="cluster-level privilege group: grant it on database"):
        check_level("PrivilegeGroupClusterAdmin", "default", "*")


def test_custom_privilege_groups_grant_what_they_hold_now(parts):
    _, guard, rbac, _ = parts
    rbac.create_user("alice", "password1")
    rbac.create_role("r")
    rbac.set_user_role("alice", "r", member=True)
    rbac.create_privilege_group("readers")
    rbac.change_privilege_group("readers", ["Query", "Search"], remove=False)
    assert rbac.privilege_groups() == {"readers": ["Query", "Search"]}
    rbac.grant(Grant("r", "Collection", "docs", "default", "readers"))
    guard.check("alice", need("Search"))
    with pytest.raises(PermissionDenied):
        guard.check("alice", need("Search", name="logs"))
    rbac.change_privilege_group("readers", ["Search"], remove=True)
    with pytest.raises(PermissionDenied):  # the group changed: so did the grant
        guard.check("alice", need("Search"))
    guard.check("alice", need("Query"))
    with pytest.raises(MilvusError, match="granted to role \\[r\\]"):
        rbac.drop_privilege_group("readers")
    with pytest.raises(MilvusError, match="privilege name"):
        rbac.change_privilege_group("readers", ["ClusterAdmin"], remove=False)
    rbac.grant(Grant("r", "Collection", "docs", "default", "readers"), revoke=True)
    rbac.drop_privilege_group("readers")
    rbac.drop_privilege_group("readers")  # idempotent
    assert rbac.privilege_groups() == {}


def test_users_may_change_themselves_and_read_their_roles_grants(parts):
    _, guard, rbac, _ = parts
    rbac.create_user("alice", "password1")
    rbac.create_role("reader")
    rbac.set_user_role("alice", "reader", member=True)
    guard.check("alice", Requirement("User", "PrivilegeUpdateUser", "default", ("alice",)))
    with pytest.raises(PermissionDenied):
        guard.check("alice", Requirement("User", "PrivilegeUpdateUser", "default", ("root",)))
    select = need("SelectOwnership", "Global", "*")
    guard.check("alice", select, role_asked="reader")
    with pytest.raises(PermissionDenied):
        guard.check("alice", select, role_asked="admin")


# -- RBAC rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda r: r.create_user("1abc", "password1"), "invalid username"),
        (lambda r: r.create_user("alice", "short"), "password length"),
        (lambda r: r.create_user("root", "password1"), "already exists"),
        (lambda r: r.delete_user("root"), "cannot be deleted"),
        (lambda r: r.delete_user("ghost"), "user not found"),
        (lambda r: r.update_password("root", "wrong1", "password2"), "old password"),
        (lambda r: r.create_role("admin"), "already exists"),
        (lambda r: r.drop_role("public"), "default role"),
        (lambda r: r.drop_role("ghost"), "not found the role"),
        (lambda r: r.set_user_role("root", "ghost", True), "not found the role"),
        (lambda r: r.grant(Grant("ghost", "Global", "*", "default", "All")), "not found the role"),
        (lambda r: r.grant(Grant("admin", "Planet", "*", "default", "All")), "object type"),
        (lambda r: r.grant(Grant("admin", "Global", "*", "default", "Fly")), "privilege name"),
        (
            lambda r: r.grant(Grant("admin", "Global", "*", "default", "NoSuchGroup")),
            "privilege name",
        ),
        (lambda r: r.create_privilege_group("ClusterAdmin"), "built-in"),
        (lambda r: r.create_privilege_group("Insert"), "built-in"),
        (lambda r: r.change_privilege_group("ghost", ["Query"], False), "does not exist"),
    ],
)
def test_refusals_are_clear_milvus_errors(parts, call, message):
    _, _, rbac, _ = parts
    with pytest.raises(MilvusError, match=message) as err:
        call(rbac)
    assert err.value.code in (Code.PARAMETER_INVALID, Code.PRIVILEGE_NOT_AUTHENTICATED)


def test_roles_users_and_grants_are_listed_as_milvus_lists_them(parts):
    _, _, rbac, _ = parts
    rbac.create_user("alice", "password1")
    rbac.create_role("writer")
    rbac.set_user_role("alice", "writer", member=True)
    rbac.set_user_role("alice", "writer", member=True)  # repeating is fine
    rbac.grant(Grant("writer", "Collection", "docs", "default", "Insert", "root"))
    rbac.grant(Grant("writer", "Collection", "docs", "default", "Insert", "root"))
    assert rbac.list_users() == ["alice", "root"]
    assert rbac.select_users("alice") == [("alice", ["writer"])]
    assert rbac.select_users("ghost") == []
    assert dict(rbac.select_roles())["writer"] == ["alice"]
    assert {r for r, _ in rbac.select_roles()} == {"admin", "public", "writer"}
    [grant] = rbac.select_grants("writer")
    assert (grant.object_name, grant.privilege, grant.grantor) == (
        "docs",
        "PrivilegeInsert",
        "root",
    )
    assert rbac.select_grants("writer", db_name="d1") == []
    assert len(rbac.select_grants("public", db_name="d1")) == 3  # granted on every database
    with pytest.raises(MilvusError, match="revoke them first"):
        rbac.drop_role("writer")
    rbac.drop_role("writer", force=True)
    assert rbac.select_users("alice") == [("alice", [])]


# -- the gRPC adapter ----------------------------------------------------------------------


def test_requirements_come_from_the_milvus_proto_options():
    insert = requirement(milvus_pb2.InsertRequest(collection_name="docs"), "d1")
    assert insert == Requirement("Collection", "PrivilegeInsert", "d1", ("docs",))
    create = requirement(milvus_pb2.CreateCollectionRequest(collection_name="docs"), "default")
    assert create == Requirement("Global", "PrivilegeCreateCollection", "default", ("*",))
    flush = requirement(milvus_pb2.FlushRequest(collection_names=["a", "b"]), "default")
    assert flush.object_names == ("a", "b")
    update = requirement(milvus_pb2.UpdateCredentialRequest(username="bob"), "default")
    assert update == Requirement("User", "PrivilegeUpdateUser", "default", ("bob",))
    select = requirement(milvus_pb2.SelectUserRequest(user={"name": "bob"}), "default")
    assert select.object_names == ("bob",)
    assert requirement(milvus_pb2.GetVersionRequest(), "default") is None
    assert requirement(milvus_pb2.ShowCollectionsRequest(), "default") is None


def test_audit_lines_name_who_what_and_never_a_password(caplog):
    request = milvus_pb2.CreateCredentialRequest(username="bob", password=b"c2VjcmV0")
    fields = audit_fields(request)
    assert fields == {"username": "bob"}
    grant = milvus_pb2.OperatePrivilegeRequest(
        entity={"role": {"name": "w"}, "object": {"name": "Collection"}, "object_name": "docs",
                "db_name": "default", "grantor": {"privilege": {"name": "Insert"}}}
    )  # fmt: skip
    assert audit_fields(grant)["privilege"] == "Insert"
    with caplog.at_level(logging.INFO, logger="vectide.audit"):
        audit.record("root", "CreateCredential", **fields)
        audit.record("", "DropCollection", "denied", collection_name="docs")
    first, second = caplog.records
    assert (first.user, first.msg, first.outcome, first.username) == (
        "root", "CreateCredential", "ok", "bob"
    )  # fmt: skip
    assert (second.user, second.levelname) == ("anonymous", "WARNING")


def test_a_load_overtaken_by_an_invalidation_is_not_cached(parts):
    store, guard, rbac, _ = parts
    loaded = store.load

    def slow_load():
        snap = loaded()
        store.load = loaded
        rbac.create_user("late", "password1")  # a change lands while this load is in flight
        return snap

    store.load = slow_load
    guard.invalidate()
    with pytest.raises(Unauthenticated):
        guard.authenticate(header("late:password1"))  # the load predates the user
    assert guard.authenticate(header("late:password1")) == "late"  # not cached: reloaded


# -- backup and restore --------------------------------------------------------------------


def _fill(rbac: Rbac) -> None:
    rbac.create_user("alice", "password1")
    rbac.create_user("bob", "password2")
    rbac.create_role("readers", "may read docs")
    rbac.create_role("ops")
    rbac.create_privilege_group("lookup")
    rbac.change_privilege_group("lookup", ["Query", "Search"], remove=False)
    rbac.grant(Grant("readers", "Collection", "docs", "default", "lookup", "root"))
    rbac.grant(Grant("ops", "Global", "*", "*", "ClusterReadOnly", "root"))
    rbac.grant(Grant("ops", "Collection", "*", "db1", "Insert", "root"))
    rbac.set_user_role("alice", "readers", member=True)
    rbac.set_user_role("bob", "ops", member=True)
    rbac.set_user_role("bob", "admin", member=True)


def _fresh() -> tuple[Guard, Rbac]:
    store = RbacStore(MemoryKV())
    guard = Guard(store, cache_ttl_s=30.0)
    rbac = Rbac(store, PRIVILEGE_NAMES, on_change=guard.invalidate, rounds=ROUNDS)
    rbac.bootstrap("Milvus")
    return guard, rbac


def test_a_backup_restored_on_another_cluster_gives_the_same_users_roles_and_grants(parts):
    _, _, rbac, _ = parts
    _fill(rbac)
    backup = rbac.backup()
    assert [u.name for u in backup.users] == ["alice", "bob"]  # never root
    assert backup.roles == {"ops": "", "readers": "may read docs"}  # never admin, public
    assert backup.groups == {"lookup": ("Query", "Search")}
    assert {(g.role, g.privilege) for g in backup.grants} == {
        ("readers", "lookup"),
        ("ops", "ClusterReadOnly"),
        ("ops", "Insert"),
    }
    guard, other = _fresh()
    other.restore(backup)
    assert other.backup() == backup
    assert guard.authenticate_token("alice:password1") == "alice"  # the hash came along
    guard.check("alice", need("Search"))
    with pytest.raises(PermissionDenied):
        guard.check("alice", need("Insert"))
    guard.check("bob", need("DropDatabase", "Global", "*"))  # admin membership restored
    assert other.select_users("bob") == [("bob", ["ops", "admin"])]


def test_a_restore_that_meets_an_existing_name_or_unknown_privilege_changes_nothing(parts):
    _, _, rbac, _ = parts
    _fill(rbac)
    backup = rbac.backup()
    for taken, message in (
        (lambda r: r.create_user("bob", "password9"), "user \\[bob\\] already exists"),
        (lambda r: r.create_role("ops"), "role \\[ops\\] already exists"),
        (lambda r: r.create_privilege_group("lookup"), "group \\[lookup\\] already exists"),
    ):
        _, other = _fresh()
        taken(other)
        before = other.backup()
        with pytest.raises(MilvusError, match=message):
            other.restore(backup)
        assert other.backup() == before
    _, other = _fresh()
    bad_grant = Grant("ops", "Global", "*", "*", "Fly", "root")
    with pytest.raises(MilvusError, match="privilege \\[Fly\\] does not exist"):
        other.restore(replace(backup, grants=(*backup.grants, bad_grant)))
    lost_role = replace(backup.users[0], roles=("nope",))
    with pytest.raises(MilvusError, match="role \\[nope\\] does not exist"):
        other.restore(replace(backup, users=(lost_role,)))
    plain = replace(backup.users[0], password_hash="password1")
    with pytest.raises(MilvusError, match="not a bcrypt hash"):
        other.restore(replace(backup, users=(plain,)))
    assert other.backup() == RbacBackup()


def test_a_milvus_backup_s_go_bcrypt_hash_checks_the_password_itself():
    """Milvus stores Go's bcrypt of the password (``$2a$``); Vectide's own hashes are of its
    SHA-256 digest, so the same password must verify against both."""
    go_hash = bcrypt.hashpw(b"password1", bcrypt.gensalt(ROUNDS, prefix=b"2a")).decode()
    assert verify_password("password1", go_hash)
    assert not verify_password("password2", go_hash)
    assert not verify_password("x" * 80, go_hash)  # Go's bcrypt takes 72 bytes at most
    own = hash_password("password1", ROUNDS)
    assert own.startswith("$2b$") and not verify_password(own, go_hash)
    guard, rbac = _fresh()
    rbac.restore(RbacBackup(users=(User("carol", go_hash),)))
    assert guard.authenticate_token("carol:password1") == "carol"
