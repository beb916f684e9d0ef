"""ZooKeeper with SASL (DIGEST-MD5) required: a real ZooKeeper of its own whose JAAS config
lists Vectide's user, a Vectide standalone logging in with ``zookeeper.sasl_*`` and creating
its znodes with a SASL ACL, and the clients that must be refused."""

from __future__ import annotations

import copy
import uuid

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, NoAuthError, SessionClosedRequireSaslError
from pymilvus import MilvusClient

from tests.infra import sasl_zookeeper
from tests.integration.conftest import free_port, isolated
from vectide.services.common.kv.base import KVError
from vectide.services.common.kv.zookeeper import cluster_root, connect_zookeeper
from vectide.services.launcher import start_standalone

USER, PASSWORD = "vectide", "zk-s3cret-pw"
INTRUDER, INTRUDER_PASSWORD = "intruder", "intruder-pw"


@pytest.fixture(scope="module")
def sasl_zk():
    with sasl_zookeeper(USER, PASSWORD, {INTRUDER: INTRUDER_PASSWORD}) as config:
        yield config


@pytest.fixture(scope="module")
def secured(infra, sasl_zk, tmp_path_factory):
    """A standalone on the session's broker and S3 and the SASL ZooKeeper, its password read
    from a file (a mounted Secret), its znodes under an ACL."""
    config = isolated(infra, "z")
    config.zookeeper = copy.deepcopy(sasl_zk.zookeeper)
    secret = tmp_path_factory.mktemp("secret") / "zk-password"
    secret.write_text(PASSWORD + "\n")
    config.zookeeper.sasl_password = ""
    config.zookeeper.sasl_password_file = str(secret)
    config.zookeeper.sasl_acl = True
    port = free_port()
    deployment = start_standalone(config, querynodes=1, proxy_port=port, ingest=False)
    yield config, f"http://127.0.0.1:{port}"
    deployment.stop()


def test_vectide_runs_on_a_zookeeper_that_requires_sasl(secured):
    config, uri = secured
    client = MilvusClient(uri)
    name = f"sasl_{uuid.uuid4().hex[:6]}"
    client.create_collection(name, dimension=4, consistency_level="Strong")
    client.insert(name, [{"id": i, "vector": [float(i), 1.0, 0.0, 0.0]} for i in range(20)])
    assert client.query(name, "id >= 0", output_fields=["count(*)"])[0]["count(*)"] == 20
    client.close()
    zk = connect_zookeeper(config.zookeeper)
    try:
        root = cluster_root(config.zookeeper, config.cluster.name)
        assert zk.get_children(f"{root}/sessions/proxy")  # the proxy's session, readable
        acl, _ = zk.get_acls(root)
        assert [(a.id.scheme, a.id.id) for a in acl] == [("sasl", USER)]
    finally:
        zk.stop()
        zk.close()


def test_another_sasl_user_cannot_read_vectides_znodes(secured):
    config, _ = secured
    other = copy.deepcopy(config.zookeeper)
    other.sasl_username, other.sasl_password_file = INTRUDER, ""
    other.sasl_password, other.sasl_acl = INTRUDER_PASSWORD, False
    zk = connect_zookeeper(other)  # a valid login of the ensemble...
    try:
        root = cluster_root(config.zookeeper, config.cluster.name)
        with pytest.raises(NoAuthError):  # ...that the ACL keeps out
            zk.get_children(f"{root}/sessions")
        with pytest.raises(NoAuthError):
            zk.get(root)
    finally:
        zk.stop()
        zk.close()


#: a refused login ends kazoo's connection thread with the server's refusal raised in it
#: (``SessionClosedRequireSaslError``); the tests assert what the caller is told instead
KAZOO_THREAD_ENDS = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnhandledThreadExceptionWarning"
)


@KAZOO_THREAD_ENDS
def test_a_wrong_password_is_refused_with_a_clear_error(sasl_zk):
    wrong = copy.deepcopy(sasl_zk.zookeeper)
    wrong.sasl_password = "not-the-password"
    with pytest.raises(KVError) as caught:
        connect_zookeeper(wrong, timeout_s=5)
    message = str(caught.value)
    assert f"refused the SASL (DIGEST-MD5) login of user '{USER}'" in message
    assert "zookeeper.sasl_password" in message


@KAZOO_THREAD_ENDS
def test_a_client_without_credentials_is_refused(sasl_zk):
    anonymous = copy.deepcopy(sasl_zk.zookeeper)
    anonymous.sasl_username = anonymous.sasl_password = ""
    with pytest.raises(KVError, match=r"requires SASL authentication: set zookeeper\.sasl_user"):
        connect_zookeeper(anonymous, timeout_s=5)
    raw = KazooClient(sasl_zk.zookeeper.hosts)  # and plain kazoo gets nothing either
    raw.start(timeout=5)
    try:
        with pytest.raises((SessionClosedRequireSaslError, ConnectionLoss)):
            raw.get_children("/")
    finally:
        raw.stop()
        raw.close()
