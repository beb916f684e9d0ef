"""The ZooKeeper SASL settings: what every kazoo client gets, and the managed server's files."""

from __future__ import annotations

import pytest

from vectide.services.common.config import Config, ZooKeeperConfig
from vectide.services.common.kv.base import KVError
from vectide.services.common.kv.zookeeper import sasl_options
from vectide.services.infra.components import ZooKeeper


def test_no_sasl_by_default() -> None:
    assert ZooKeeperConfig().sasl_credentials() is None
    assert sasl_options(ZooKeeperConfig()) == {}


def test_sasl_login_and_acl_reach_kazoo() -> None:
    cfg = ZooKeeperConfig(sasl_username="vectide", sasl_password="pw", sasl_acl=True)
    options = sasl_options(cfg)
    assert options["sasl_options"] == {
        "mechanism": "DIGEST-MD5",
        "username": "vectide",
        "password": "pw",
    }
    [acl] = options["default_acl"]
    assert (acl.id.scheme, acl.id.id, acl.perms) == ("sasl", "vectide", 31)
    assert "default_acl" not in sasl_options(ZooKeeperConfig(sasl_username="v", sasl_password="p"))


def test_the_password_file_wins(tmp_path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("from-file\n")
    cfg = ZooKeeperConfig(sasl_username="u", sasl_password="inline", sasl_password_file=str(secret))
    assert cfg.sasl_credentials() == ("u", "from-file")


def test_an_acl_needs_a_user() -> None:
    with pytest.raises(KVError, match=r"sasl_acl needs zookeeper\.sasl_username"):
        sasl_options(ZooKeeperConfig(sasl_acl=True))


def test_managed_zookeeper_requires_sasl_when_a_user_is_configured(tmp_path) -> None:
    config = Config()
    config.infra.run_dir = str(tmp_path)
    config.zookeeper.sasl_username, config.zookeeper.sasl_password = "vectide", 'p"w'
    server = ZooKeeper(config)
    server.prepare()
    assert "sessionRequireClientSASLAuth=true" in server.conf_file.read_text()
    jaas = server.jaas_file.read_text()
    assert "DigestLoginModule required" in jaas and 'user_vectide="p\\"w";' in jaas
    assert f"-Djava.security.auth.login.config={server.jaas_file}" in server.argv()


def test_managed_zookeeper_without_sasl_is_unchanged(tmp_path) -> None:
    config = Config()
    config.infra.run_dir = str(tmp_path)
    server = ZooKeeper(config)
    server.prepare()
    assert "SASL" not in server.conf_file.read_text()
    assert not server.jaas_file.exists()
    assert not any("auth.login.config" in arg for arg in server.argv())


def test_managed_zookeeper_fsyncs_unless_told_not_to(tmp_path) -> None:
    config = Config()
    config.infra.run_dir = str(tmp_path)
    server = ZooKeeper(config)
    server.prepare()
    lines = server.conf_file.read_text().splitlines()
    assert "forceSync=yes" in lines and "preAllocSize=8192" in lines
    config.infra.zookeeper_fsync = False
    server.prepare()
    assert "forceSync=no" in server.conf_file.read_text().splitlines()
