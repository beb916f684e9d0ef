import pytest

from vectide.services.common.config import Config, ConfigError, load_config


def test_defaults_without_file_or_env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(env={})
    assert config == Config()
    assert config.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert config.cluster.dml_channels == 16


def test_yaml_then_env_override(tmp_path):
    path = tmp_path / "v.yaml"
    path.write_text("kafka:\n  bootstrap_servers: k:1\n  managed: false\ncluster:\n  name: a\n")
    env = {"VECTIDE_CLUSTER_NAME": "b", "VECTIDE_CLUSTER_DML_CHANNELS": "4"}
    config = load_config(path, env=env)
    assert config.kafka.bootstrap_servers == "k:1"
    assert config.kafka.managed is False
    assert config.cluster.name == "b"
    assert config.cluster.dml_channels == 4


def test_config_env_names_the_yaml_file(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("zookeeper:\n  hosts: zk:2181\n")
    assert load_config(env={"VECTIDE_CONFIG": str(path)}).zookeeper.hosts == "zk:2181"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"VECTIDE_KAFKA_BOOTSTRAPSERVERS": "x"}, "unknown config key kafka.bootstrapservers"),
        ({"VECTIDE_CLUSTER_DML_CHANNELS": "many"}, "is not a valid int"),
        ({"VECTIDE_S3_MANAGED": "perhaps"}, "is not a valid bool"),
    ],
)
def test_bad_values_are_errors(tmp_path, monkeypatch, env, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=message):
        load_config(env=env)


def test_unknown_yaml_section_is_an_error(tmp_path):
    path = tmp_path / "v.yaml"
    path.write_text("kafak:\n  bootstrap_servers: x\n")
    with pytest.raises(ConfigError, match="unknown config section 'kafak'"):
        load_config(path, env={})


def test_unrelated_env_vars_are_ignored(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_config(env={"VECTIDE_LOG_LEVEL": "debug", "PATH": "/bin"}) == Config()


def test_to_env_round_trips_through_a_child_environment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = Config()
    config.kafka.managed = False
    config.cluster.dml_channels = 3
    config.zookeeper.session_timeout_s = 4.5
    assert load_config(env=config.to_env()) == config


def test_security_is_off_by_default_and_root_password_may_come_from_a_secret_file(tmp_path):
    assert load_config(env={}).security.authorization_enabled is False
    assert load_config(env={}).security.initial_root_password() == "Milvus"
    secret = tmp_path / "root-password"
    secret.write_text("from-the-secret\n")
    env = {
        "VECTIDE_SECURITY_AUTHORIZATION_ENABLED": "true",
        "VECTIDE_SECURITY_ROOT_PASSWORD": "ignored-when-a-file-is-set",
        "VECTIDE_SECURITY_ROOT_PASSWORD_FILE": str(secret),
    }
    security = load_config(env=env).security
    assert security.authorization_enabled is True
    assert security.initial_root_password() == "from-the-secret"


def test_vectide_config_masks_secrets(capsys, monkeypatch):
    """`vectide config` is pasted into tickets: passwords and S3 secrets show as ***."""
    from vectide.services.cli import main

    monkeypatch.setenv("VECTIDE_SECURITY_ROOT_PASSWORD", "hunter2")
    monkeypatch.setenv("VECTIDE_KAFKA_SASL_PASSWORD", "kafka-secret")
    main(["config"])
    out = capsys.readouterr().out
    assert "hunter2" not in out and "kafka-secret" not in out
    assert "root_password: '***'" in out and "sasl_password: '***'" in out
