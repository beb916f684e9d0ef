"""Authentication and RBAC through unmodified pymilvus, against a standalone deployment with
``security.authorization_enabled`` on: refusals without or with wrong credentials, a user
without privileges refused, then granted and allowed, password changes, dropped users, and
the audit log naming who did what."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, suppress
from types import SimpleNamespace

import grpc
import pytest
from prometheus_client import REGISTRY
from pymilvus import MilvusClient, MilvusException
from pymilvus.grpc_gen import milvus_pb2, milvus_pb2_grpc

from tests.infra import REPO
from tests.integration.conftest import free_port, isolated
from vectide.services.common.kv.zookeeper import ZooKeeperKV
from vectide.services.common.security.guard import Guard, Unauthenticated
from vectide.services.common.security.rbac import Rbac
from vectide.services.common.security.store import RbacStore
from vectide.services.infra.deployment import milvus_answers
from vectide.services.launcher import start_standalone
from vectide.services.proxy.grpc_auth import PRIVILEGE_NAMES
from vectide.services.proxy.service import watch_rbac_changes

DIM = 4
ROOT_TOKEN = "root:Milvus"


@pytest.fixture(scope="module")
def secured(infra, tmp_path_factory):
    config = isolated(infra, "a")
    config.security.authorization_enabled = True
    config.security.audit_log_file = str(tmp_path_factory.mktemp("audit") / "audit.log")
    port = free_port()
    deployment = start_standalone(config, querynodes=1, proxy_port=port, ingest=False)
    yield SimpleNamespace(uri=f"http://127.0.0.1:{port}", config=config)
    deployment.stop()


@pytest.fixture(scope="module")
def root(secured):
    client = MilvusClient(secured.uri, token=ROOT_TOKEN)
    yield client
    client.close()


@pytest.fixture(scope="module")
def collection(root):
    name = f"sec_{uuid.uuid4().hex[:6]}"
    root.create_collection(name, dimension=DIM)  # indexed and loaded
    root.insert(name, [{"id": i, "vector": [float(i)] * DIM} for i in range(3)])
    return name


def _user(root: MilvusClient, password: str = "password1") -> tuple[str, str]:
    name = f"u{uuid.uuid4().hex[:8]}"
    root.create_user(name, password)
    return name, password


def _connect(uri: str, **credentials: str) -> MilvusClient:
    """A connection of its own, so that every client here logs in (pymilvus would otherwise
    hand out an open connection with the same address and token)."""
    return MilvusClient(uri, dedicated=True, **credentials)


@contextmanager
def refused(code: grpc.StatusCode, message: str) -> Iterator[None]:
    """pymilvus passes Milvus's refusals on as the gRPC error itself (status and details),
    so does Vectide's proxy."""
    with pytest.raises(grpc.RpcError) as err:
        yield
    assert err.value.code() == code
    assert message in err.value.details()


def denied(message: str) -> AbstractContextManager[None]:
    return refused(grpc.StatusCode.PERMISSION_DENIED, message)


def unauthenticated() -> AbstractContextManager[None]:
    return refused(grpc.StatusCode.UNAUTHENTICATED, "auth check failure")


def test_calls_without_or_with_wrong_credentials_are_refused(secured, root):
    # pymilvus reports a refused Connect as a failed connection, as against Milvus
    for credentials in ({}, {"token": "root:wrong"}, {"user": "root", "password": "nope12"}):
        with pytest.raises(MilvusException, match="Fail connecting") as err:
            _connect(secured.uri, **credentials)
        assert err.value.__cause__.code() == grpc.StatusCode.UNAUTHENTICATED
    refusals = {"method": "ShowCollections", "status": "UNAUTHENTICATED"}
    before = REGISTRY.get_sample_value("vectide_proxy_requests_total", refusals) or 0
    with grpc.insecure_channel(secured.uri.removeprefix("http://")) as channel:
        stub = milvus_pb2_grpc.MilvusServiceStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            stub.ShowCollections(milvus_pb2.ShowCollectionsRequest())
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "missing authorization" in err.value.details()
    assert REGISTRY.get_sample_value("vectide_proxy_requests_total", refusals) == before + 1
    assert isinstance(root.list_collections(), list)  # the right credentials pass
    assert milvus_answers(secured.uri.removeprefix("http://"))  # `vectide up` sees it is up


def test_a_user_without_privileges_is_refused_until_granted(secured, root, collection):
    name, password = _user(root)
    user = _connect(secured.uri, user=name, password=password)
    row = [{"id": 100, "vector": [0.5] * DIM}]
    with denied(f"PrivilegeInsert: permission deny to {name} in the `default` database"):
        user.insert(collection, row)
    with denied("PrivilegeSearch: permission deny"):
        user.search(collection, [[0.5] * DIM], limit=3)

    role = f"writer_{uuid.uuid4().hex[:6]}"
    root.create_role(role)
    for privilege in ("Insert", "Search", "Query"):
        root.grant_privilege(role, "Collection", privilege, collection)
    root.grant_role(name, role)

    assert user.insert(collection, row)["insert_count"] == 1
    hits = user.search(collection, [[0.5] * DIM], limit=3, consistency_level="Strong")
    assert len(hits[0]) == 3
    with denied("PrivilegeDropCollection: permission deny"):
        user.drop_collection(collection)
    assert root.describe_user(name)["roles"] == (role,)
    grants = {(g["object_name"], g["privilege"]) for g in root.describe_role(role)["privileges"]}
    assert grants == {(collection, "Insert"), (collection, "Search"), (collection, "Query")}

    root.revoke_privilege(role, "Collection", "Insert", collection)
    with denied("PrivilegeInsert: permission deny"):
        user.insert(collection, row)


def test_rest_calls_are_admitted_as_grpc_calls_are(secured, root, collection):
    """The RESTful API takes ``Authorization: Bearer user:password`` and the same grants."""
    import requests

    base = f"http://127.0.0.1:{secured.config.service.http_port}/v2/vectordb/entities"
    body = {"collectionName": collection, "data": [[0.5] * DIM], "limit": 2}

    def search(token: str | None) -> dict:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return requests.post(f"{base}/search", json=body, headers=headers, timeout=30).json()

    assert search(None)["code"] == 1800
    assert search("root:wrong")["code"] == 1800
    assert len(search(ROOT_TOKEN)["data"]) == 2
    name, password = _user(root)
    refused = search(f"{name}:{password}")
    assert refused["code"] == 1401 and "PrivilegeSearch: permission deny" in refused["message"]
    role = f"reader_{uuid.uuid4().hex[:6]}"
    root.create_role(role)
    root.grant_privilege(role, "Collection", "Search", collection)
    root.grant_role(name, role)
    assert len(search(f"{name}:{password}")["data"]) == 2


def test_grants_hold_in_their_database_only(secured, root):
    db = f"db_{uuid.uuid4().hex[:6]}"
    name = f"c_{uuid.uuid4().hex[:6]}"
    root.create_database(db)
    in_db = MilvusClient(secured.uri, token=ROOT_TOKEN, db_name=db)
    in_db.create_collection(name, dimension=DIM)
    root.create_collection(name, dimension=DIM)  # the same name in default
    user, password = _user(root)
    role = f"r_{uuid.uuid4().hex[:6]}"
    root.create_role(role)
    root.grant_role(user, role)
    in_db.grant_privilege(role, "Collection", "Insert", name)  # the client's database
    row = [{"id": 1, "vector": [1.0] * DIM}]
    there = MilvusClient(secured.uri, user=user, password=password, db_name=db)
    assert there.insert(name, row)["insert_count"] == 1
    with denied(f"PrivilegeInsert: permission deny to {user} in the `default` database"):
        _connect(secured.uri, user=user, password=password).insert(name, row)
    [grant] = in_db.describe_role(role)["privileges"]
    assert (grant["db_name"], grant["object_name"]) == (db, name)
    assert root.describe_role(role)["privileges"] == []  # listed in the default database


def test_a_user_changes_its_password(secured, root):
    name, old = _user(root)
    user = _connect(secured.uri, token=f"{name}:{old}")
    user.update_password(name, old, "password2")
    with unauthenticated():
        user.list_collections()  # still sending the old password
    assert isinstance(_connect(secured.uri, token=f"{name}:password2").list_collections(), list)
    with pytest.raises(MilvusException, match="old password not correct"):
        root.update_password(name, "wrong-old", "password3")


def test_a_dropped_user_is_refused_at_once(secured, root):
    name, password = _user(root)
    user = _connect(secured.uri, user=name, password=password)
    assert isinstance(user.list_collections(), list)
    assert name in root.list_users()
    root.drop_user(name)
    assert name not in root.list_users()
    with unauthenticated():
        user.list_collections()


def test_only_privileged_users_manage_users_and_roles(secured, root):
    name, password = _user(root)
    user = _connect(secured.uri, user=name, password=password)
    with denied("PrivilegeCreateOwnership: permission deny"):
        user.create_user("intruder", "password1")
    with denied("PrivilegeManageOwnership: permission deny"):
        user.grant_role(name, "admin")
    root.grant_role(name, "admin")
    user.create_role(f"r_{uuid.uuid4().hex[:6]}")  # admins may
    assert {"admin", "public"} <= set(root.list_roles())


def test_the_audit_log_names_who_did_what(secured, root, collection):
    name, password = _user(root)
    with denied("PrivilegeDropCollection"):
        _connect(secured.uri, user=name, password=password).drop_collection(collection)
    with open(secured.config.security.audit_log_file) as log:
        lines = log.read().splitlines()
    created = [ln for ln in lines if "msg=CreateCollection" in ln]
    assert any("user=root" in ln and f"collection_name={collection}" in ln for ln in created)
    assert any("msg=CreateCredential" in ln and f"username={name}" in ln for ln in lines)
    refusals = [ln for ln in lines if "msg=DropCollection" in ln and "outcome=denied" in ln]
    assert any(f"user={name}" in ln for ln in refusals)
    assert not any("password1" in ln for ln in lines)


def test_a_change_through_one_proxy_reaches_the_others_cache(zk, zk_root):
    """Two proxies' guards over the real ZooKeeper: the one that did not make the change
    learns of it through the version watch, long before its cache would expire."""
    here, there = (Guard(RbacStore(ZooKeeperKV(zk, zk_root)), cache_ttl_s=600) for _ in "ab")
    rbac = Rbac(RbacStore(ZooKeeperKV(zk, zk_root)), PRIVILEGE_NAMES, here.invalidate, 4)
    rbac.bootstrap("Milvus")
    watch_rbac_changes(zk, zk_root, there.invalidate)
    assert there.authenticate_token("root:Milvus") == "root"  # cached for 600 s
    rbac.update_password("root", "Milvus", "password2")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            there.authenticate_token("root:Milvus")
        except Unauthenticated:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the other proxy still accepts the old password")
    assert there.authenticate_token("root:password2") == "root"


def test_proxies_racing_to_bootstrap_and_change_leave_one_consistent_store(zk, zk_root):
    """Four proxies starting together on one cluster: one root, every user created."""

    def proxy(i: int) -> None:
        rbac = Rbac(RbacStore(ZooKeeperKV(zk, zk_root)), PRIVILEGE_NAMES, rounds=4)
        rbac.bootstrap(f"password{i}")
        rbac.create_user(f"user{i}", "password1")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(proxy, range(4)))  # re-raises what any of them raised
    snap = RbacStore(ZooKeeperKV(zk, zk_root)).load()
    assert sorted(snap.users) == ["root", "user0", "user1", "user2", "user3"]
    assert snap.version == 5  # one bootstrap and four creations; the other bootstraps no-ops
    guard = Guard(RbacStore(ZooKeeperKV(zk, zk_root)))
    winners = []
    for i in range(4):
        with suppress(Unauthenticated):
            winners.append(guard.authenticate_token(f"root:password{i}"))
    assert winners == ["root"]


def _apikey_cli(config, *args: str) -> str:
    """`vectide apikey ...` run as an operator runs it, against the deployment's metastore."""
    result = subprocess.run(
        [sys.executable, "-m", "vectide.services.cli", "apikey", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**os.environ, **config.to_env()},
        check=True,
    )
    return result.stdout


def test_an_api_key_authenticates_as_its_user_until_revoked(secured, root, collection):
    """An API key from `vectide apikey create` in pymilvus's ``token=`` and REST's bearer:
    the user's grants apply; `vectide apikey revoke` refuses it on the next call."""
    import requests

    name, _ = _user(root)
    key = _apikey_cli(secured.config, "create", "--user", name, "--name", "ci").strip()
    listed = json.loads(_apikey_cli(secured.config, "list", "--user", name, "--json"))
    assert [(k["user"], k["name"]) for k in listed] == [(name, "ci")]
    assert key not in json.dumps(listed)

    client = MilvusClient(secured.uri, token=key)  # a token without ':' is an API key
    with denied(f"PrivilegeSearch: permission deny to {name}"):
        client.search(collection, [[0.5] * DIM], limit=2)
    role = f"keyed_{uuid.uuid4().hex[:6]}"
    root.create_role(role)
    root.grant_privilege(role, "Collection", "Search", collection)
    root.grant_role(name, role)
    assert len(client.search(collection, [[0.5] * DIM], limit=2)[0]) == 2
    rest = f"http://127.0.0.1:{secured.config.service.http_port}/v2/vectordb/entities/search"
    body = {"collectionName": collection, "data": [[0.5] * DIM], "limit": 2}
    bearer = {"Authorization": f"Bearer {key}"}
    assert len(requests.post(rest, json=body, headers=bearer, timeout=30).json()["data"]) == 2

    _apikey_cli(secured.config, "revoke", listed[0]["id"])
    revoked_at = time.monotonic()
    while True:  # the proxy's watch on the store's version clears its cache
        try:
            client.search(collection, [[0.5] * DIM], limit=2)
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "check api key is correct" in err.details()
            break
        assert time.monotonic() - revoked_at < 2, "a revoked key still works"
        time.sleep(0.02)
    print(f"revoked key refused {time.monotonic() - revoked_at:.3f} s after the CLI returned")
    assert requests.post(rest, json=body, headers=bearer, timeout=30).json()["code"] == 1800
    assert json.loads(_apikey_cli(secured.config, "list", "--user", name, "--json")) == []
    client.close()
    with open(secured.config.security.audit_log_file) as log:  # the CLI audits there too
        lines = [ln for ln in log.read().splitlines() if f"username={name}" in ln]
    assert any("msg=CreateApiKey" in ln and "user=os:" in ln for ln in lines)
    assert any("msg=RevokeApiKey" in ln and "key_name=ci" in ln for ln in lines)
    assert not any(key in ln for ln in lines)


def test_privilege_groups_built_in_and_custom_grant_through_pymilvus(secured, root, collection):
    """Milvus 2.5's privilege groups: a built-in one at the collection level, a custom one
    whose privileges change after it was granted."""
    name, password = _user(root)
    user = _connect(secured.uri, user=name, password=password)
    role = f"groups_{uuid.uuid4().hex[:6]}"
    root.create_role(role)
    root.grant_role(name, role)
    root.grant_privilege_v2(role, "CollectionReadOnly", collection, db_name="default")
    assert len(user.search(collection, [[0.5] * DIM], limit=2)[0]) == 2
    with denied("PrivilegeInsert: permission deny"):
        user.insert(collection, [{"id": 200, "vector": [0.5] * DIM}])

    group = f"writers_{uuid.uuid4().hex[:6]}"
    root.create_privilege_group(group)
    root.add_privileges_to_group(group, ["Insert", "Upsert"])
    listed = {g["privilege_group"]: g["privileges"] for g in root.list_privilege_groups()}
    assert sorted(listed[group]) == ["Insert", "Upsert"]
    root.grant_privilege_v2(role, group, collection, db_name="default")
    assert user.insert(collection, [{"id": 200, "vector": [0.5] * DIM}])["insert_count"] == 1
    root.remove_privileges_from_group(group, ["Insert"])
    with denied("PrivilegeInsert: permission deny"):
        user.insert(collection, [{"id": 201, "vector": [0.5] * DIM}])
    with pytest.raises(MilvusException, match="revoke it first"):
        root.drop_privilege_group(group)
    root.revoke_privilege_v2(role, group, collection, db_name="default")
    root.drop_privilege_group(group)
    with pytest.raises(MilvusException, match="cluster-level privilege group"):
        root.grant_privilege_v2(role, "ClusterReadOnly", "*", db_name="default")


def test_a_role_s_description_is_set_at_create_altered_and_described(secured, root):
    role = f"described_{uuid.uuid4().hex[:6]}"
    root.create_role(role)
    assert root.describe_role(role)["description"] == ""
    root.alter_role(role, "reads the docs collection")
    assert root.describe_role(role)["description"] == "reads the docs collection"
    with pytest.raises(MilvusException, match="not found the role"):
        root.alter_role("ghost_role", "nobody")


def test_users_and_roles_are_managed_through_rest(secured, root, collection):
    """Milvus's RESTful ``/users`` and ``/roles``, admitted as their gRPC calls are; pymilvus
    sees what they did."""
    import requests

    base = f"http://127.0.0.1:{secured.config.service.http_port}/v2/vectordb"

    def post(path: str, body: dict, token: str = ROOT_TOKEN) -> dict:
        headers = {"Authorization": f"Bearer {token}"}
        return requests.post(f"{base}/{path}", json=body, headers=headers, timeout=30).json()

    def ok(path: str, body: dict, token: str = ROOT_TOKEN) -> object:
        reply = post(path, body, token)
        assert reply["code"] == 0, (path, reply)
        return reply["data"]

    user, role = f"rest_{uuid.uuid4().hex[:6]}", f"rest_role_{uuid.uuid4().hex[:6]}"
    ok("users/create", {"userName": user, "password": "password1"})
    assert user in ok("users/list", {})
    ok("roles/create", {"roleName": role})
    assert role in ok("roles/list", {})
    ok("users/grant_role", {"userName": user, "roleName": role})
    assert ok("users/describe", {"userName": user}) == [role]
    grant = {
        "roleName": role,
        "objectType": "Collection",
        "objectName": collection,
        "privilege": "Search",
    }
    ok("roles/grant_privilege", grant)
    ok(
        "roles/grant_privilege_v2",
        {"roleName": role, "privilege": "Query", "collectionName": collection, "dbName": "default"},
    )
    described = ok("roles/describe", {"roleName": role})
    assert {(d["objectName"], d["privilege"], d["dbName"]) for d in described} == {
        (collection, "Search", "default"),
        (collection, "Query", "default"),
    }
    assert root.describe_user(user)["roles"] == (role,)
    search = {"collectionName": collection, "data": [[0.5] * DIM], "limit": 2}
    assert len(ok("entities/search", search, f"{user}:password1")) == 2
    denied = post(
        "users/create", {"userName": "x" + user, "password": "password1"}, f"{user}:password1"
    )
    assert denied["code"] == 1401
    ok(
        "users/update_password",
        {"userName": user, "password": "password1", "newPassword": "password2"},
    )
    assert len(ok("entities/search", search, f"{user}:password2")) == 2
    ok("roles/revoke_privilege", grant)
    ok(
        "roles/revoke_privilege_v2",
        {"roleName": role, "privilege": "Query", "collectionName": collection, "dbName": "default"},
    )
    ok("users/revoke_role", {"userName": user, "roleName": role})
    ok("roles/drop", {"roleName": role})
    ok("users/drop", {"userName": user})
    assert user not in ok("users/list", {})


def test_rbac_backup_restores_dropped_users_roles_and_groups(secured, root, collection):
    """BackupRBAC / RestoreRBAC (the Node SDK's ``backupRBAC`` / ``restoreRBAC``) through the
    raw gRPC stub, as every SDK sends them: a user, its role, the role's grants and a custom
    group are dropped, then restored from the backup; the user logs in with its old password
    and has its privileges again. Only root-like users may take a backup."""
    name, password = _user(root)
    role, group = f"backup_{uuid.uuid4().hex[:6]}", f"gbackup_{uuid.uuid4().hex[:6]}"
    root.create_role(role)
    root.grant_role(name, role)
    root.create_privilege_group(group)
    root.add_privileges_to_group(group, ["Search"])
    root.grant_privilege_v2(role, group, collection, db_name="default")
    root.grant_privilege_v2(role, "Query", collection, db_name="default")

    def call(method: str, request: object, token: str = ROOT_TOKEN) -> object:
        header = base64.b64encode(token.encode()).decode()
        with grpc.insecure_channel(secured.uri.removeprefix("http://")) as channel:
            stub = milvus_pb2_grpc.MilvusServiceStub(channel)
            return getattr(stub, method)(request, metadata=[("authorization", header)])

    with denied("PrivilegeBackupRBAC: permission deny"):
        call("BackupRBAC", milvus_pb2.BackupRBACMetaRequest(), f"{name}:{password}")
    backup = call("BackupRBAC", milvus_pb2.BackupRBACMetaRequest())
    assert backup.status.code == 0, backup.status
    meta = backup.RBAC_meta
    assert "root" not in {u.user for u in meta.users}
    assert not {"admin", "public"} & {r.name for r in meta.roles}
    ours = milvus_pb2.RBACMeta(
        users=[u for u in meta.users if u.user == name],
        roles=[r for r in meta.roles if r.name == role],
        grants=[g for g in meta.grants if g.role.name == role],
        privilege_groups=[p for p in meta.privilege_groups if p.group_name == group],
    )
    assert [r.name for u in ours.users for r in u.roles] == [role]
    assert {g.grantor.privilege.name for g in ours.grants} == {group, "Query"}

    root.revoke_privilege_v2(role, group, collection, db_name="default")
    root.revoke_privilege_v2(role, "Query", collection, db_name="default")
    root.drop_role(role)
    root.drop_privilege_group(group)
    root.drop_user(name)
    restored = call("RestoreRBAC", milvus_pb2.RestoreRBACMetaRequest(RBAC_meta=ours))
    assert restored.code == 0, restored
    again = call("RestoreRBAC", milvus_pb2.RestoreRBACMetaRequest(RBAC_meta=ours))
    assert again.code == 1100 and "already exists" in again.reason  # all or nothing

    user = _connect(secured.uri, user=name, password=password)
    assert len(user.search(collection, [[0.5] * DIM], limit=2)[0]) == 2
    assert user.query(collection, "id >= 0", limit=1)
    with denied("PrivilegeInsert: permission deny"):
        user.insert(collection, [{"id": 300, "vector": [0.5] * DIM}])
    user.close()
