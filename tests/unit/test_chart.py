"""The Helm chart and the image, checked without a cluster, a helm binary or a Docker engine.

helm-python-sdk (Helm's Go SDK) lints and renders ``charts/vectide``; every rendered manifest
is validated strictly against the Kubernetes 1.30 schemas; the rendered Vectide config is
parsed by Vectide's own loader; hadolint checks the Dockerfile; yamllint the values.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from helm_python import Chart, lint

from vectide.services.common.config import load_config

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "vectide"
KUBE_VERSION = "1.30.0"
ROLES = ("rootcoord", "proxy", "querynode", "datanode", "ingest")
BUNDLED = ("kafka", "zookeeper", "minio")

CLUSTER = {"cluster": {"enabled": True}}
EXTERNAL = {
    "externalKafka": {
        "enabled": True,
        "brokerList": "kafka-0.kafka:9093,kafka-1.kafka:9093",
        "securityProtocol": "SASL_SSL",
        "sasl": {"mechanisms": "SCRAM-SHA-512", "username": "vectide", "password": "pw"},
    },
    "externalZookeeper": {
        "enabled": True,
        "endpoints": ["zk-0.zk:2181", "zk-1.zk:2181"],
        "sasl": {"username": "vectide", "password": "zk-pw"},
    },
    "externalS3": {
        "enabled": True,
        "host": "s3.eu-west-1.amazonaws.com",
        "port": 443,
        "useSSL": True,
        "bucketName": "prod-vectors",
        "rootPath": "vectide",
        "accessKey": "AKIA",
        "secretKey": "secret",
        "region": "eu-west-1",
    },
}
ACTIVE_STANDBY = {
    "cluster": {"enabled": True},
    "rootCoordinator": {"activeStandby": {"enabled": True}},
}
TLS = {
    "tls": {
        "enabled": True,
        "mode": 2,
        "secretName": "vectide-tls",
        "internal": True,
        "serverName": "vectide.db.svc",
    }
}
VALUE_SETS = {
    "default": {},
    "cluster": CLUSTER,
    "external": {**CLUSTER, **EXTERNAL},
    "active-standby": ACTIVE_STANDBY,
    "monitored": {**CLUSTER, "metrics": {"serviceMonitor": {"enabled": True}}},
    "tls": {**CLUSTER, **TLS},
    "spark-k8s": {**CLUSTER, "dataNode": {"spark": {"master": "k8s://https://kubernetes.default"}}},
    "querynode-groups": {
        **CLUSTER,
        "metrics": {"serviceMonitor": {"enabled": True}},
        "queryNode": {
            "serverLabels": {"ZONE": "eu-1a"},
            "extraEnv": [{"name": "VECTIDE_LOG_LEVEL", "value": "INFO"}],
            "groups": [
                {
                    "name": "tenant-a",
                    "replicas": 2,
                    "serverLabels": {"TENANT": "a"},
                    "nodeSelector": {"pool": "tenant-a"},
                },
                {"name": "tenant-b", "serverLabels": {"TENANT": "b", "ZONE": "eu-1b"}},
            ],
        },
    },
}


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    rendered = Chart.load(str(CHART)).render(copy.deepcopy(values), name="vt", namespace="db")
    return [
        doc
        for path, text in rendered.items()
        if path.endswith(".yaml")
        for doc in yaml.safe_load_all(text)
        if doc
    ]


def kinds(docs: list[dict], kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def component(doc: dict) -> str:
    return doc["metadata"]["labels"]["app.kubernetes.io/component"]


def workloads(docs: list[dict]) -> dict[str, dict]:
    return {component(d): d for d in docs if d["kind"] == "Deployment"}


def containers(docs: list[dict]) -> list[dict]:
    return [
        c
        for d in docs
        if d["kind"] == "Deployment"
        for c in d["spec"]["template"]["spec"]["containers"]
    ]


def vectide_config(docs: list[dict]) -> str:
    return kinds(docs, "ConfigMap")["vt-vectide-config"]["data"]["vectide.yaml"]


def env_of(container: dict) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


@pytest.fixture(scope="module", params=sorted(VALUE_SETS))
def rendered(request) -> tuple[str, list[dict]]:
    return request.param, render(VALUE_SETS[request.param])


def test_chart_lints_clean_for_every_value_set() -> None:
    for name, values in VALUE_SETS.items():
        report = lint(
            str(CHART), copy.deepcopy(values), strict=True, kube_version=f"v{KUBE_VERSION}"
        )
        problems = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
        assert not problems, (name, problems)


def test_every_manifest_validates_strictly(rendered) -> None:
    _, docs = rendered
    assert docs
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD: its shape is asserted in test_service_monitor
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def test_standalone_is_one_pod_with_the_data_node_beside_it() -> None:
    docs = render({})
    assert set(workloads(docs)) == {"standalone", *BUNDLED}
    pod = workloads(docs)["standalone"]
    assert pod["spec"]["replicas"] == 1
    names = [c["name"] for c in pod["spec"]["template"]["spec"]["containers"]]
    assert names == ["standalone", "datanode"]
    service = kinds(docs, "Service")["vt-vectide"]
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "standalone"
    # gRPC, the RESTful API, the metrics of the standalone and of the data node beside it
    assert {p["port"] for p in service["spec"]["ports"]} == {19530, 19121, 9091, 9241}


def test_cluster_mode_runs_one_workload_per_role_with_values_replicas_and_image() -> None:
    docs = render(
        {
            **CLUSTER,
            "image": {"all": {"repository": "registry.example/vectide", "tag": "1.2.3"}},
            "proxy": {"replicas": 3},
            "queryNode": {"replicas": 4},
            "dataNode": {"replicas": 1},
            "ingest": {"replicas": 2},
        }
    )
    found = workloads(docs)
    assert set(found) == {*ROLES, *BUNDLED}
    replicas = {role: found[role]["spec"]["replicas"] for role in ROLES}
    assert replicas == {"rootcoord": 1, "proxy": 3, "querynode": 4, "datanode": 1, "ingest": 2}
    for role in ROLES:
        (container,) = found[role]["spec"]["template"]["spec"]["containers"]
        assert container["image"] == "registry.example/vectide:1.2.3"
        assert container["args"][:2] == ["run", role]
    service = kinds(docs, "Service")["vt-vectide"]
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "proxy"
    assert {p["port"] for p in service["spec"]["ports"]} == {19530, 19121, 9091}
    role_services = {component(s) for s in kinds(docs, "Service").values()}
    assert set(ROLES) <= role_services  # each role's /metrics is reachable for scraping


def test_every_vectide_container_probes_healthz_on_its_metrics_port(rendered) -> None:
    _, docs = rendered
    for container in containers(docs):
        if not container["image"].startswith("vectide/"):
            continue
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        metrics_port = int(container["args"][container["args"].index("--metrics-port") + 1])
        for probe in ("livenessProbe", "readinessProbe"):
            get = container[probe]["httpGet"]
            assert get["path"] == "/healthz"
            assert ports[get["port"]] == metrics_port


def test_no_privileged_or_root_containers(rendered) -> None:
    _, docs = rendered
    for doc in docs:
        if doc["kind"] != "Deployment":
            continue
        pod = doc["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        for container in pod["containers"]:
            security = container["securityContext"]
            assert security["privileged"] is False
            assert security["allowPrivilegeEscalation"] is False
            assert security["capabilities"]["drop"] == ["ALL"]


def test_external_infra_reaches_the_config_and_nothing_is_bundled() -> None:
    docs = render({**CLUSTER, **EXTERNAL})
    assert not set(BUNDLED) & set(workloads(docs))
    assert not set(BUNDLED) & {component(s) for s in kinds(docs, "Service").values()}
    config = yaml.safe_load(vectide_config(docs))
    assert config["kafka"]["bootstrap_servers"] == "kafka-0.kafka:9093,kafka-1.kafka:9093"
    assert config["kafka"]["security_protocol"] == "SASL_SSL"
    assert config["kafka"]["sasl_mechanism"] == "SCRAM-SHA-512"
    assert config["zookeeper"]["hosts"] == "zk-0.zk:2181,zk-1.zk:2181"
    assert config["s3"]["endpoint"] == "https://s3.eu-west-1.amazonaws.com:443"
    assert (config["s3"]["bucket"], config["s3"]["root_path"]) == ("prod-vectors", "vectide")
    assert config["s3"]["region"] == "eu-west-1"
    secret = kinds(docs, "Secret")["vt-vectide-secret"]["stringData"]
    assert secret["kafka-sasl-password"] == "pw" and secret["s3-secret-key"] == "secret"
    proxy = workloads(docs)["proxy"]["spec"]["template"]["spec"]["containers"][0]
    env = env_of(proxy)
    assert env["VECTIDE_KAFKA_SASL_PASSWORD"]["secretKeyRef"]["key"] == "kafka-sasl-password"
    assert env["VECTIDE_S3_SECRET_KEY"]["secretKeyRef"]["key"] == "s3-secret-key"
    assert "pw" not in vectide_config(docs)  # credentials stay in the Secret


def test_zookeeper_sasl_password_comes_from_a_secret(tmp_path) -> None:
    docs = render({**CLUSTER, **EXTERNAL})
    secret = kinds(docs, "Secret")["vt-vectide-secret"]["stringData"]
    assert secret["zookeeper-sasl-password"] == "zk-pw"
    for container in containers(docs):
        ref = env_of(container)["VECTIDE_ZOOKEEPER_SASL_PASSWORD"]["secretKeyRef"]
        assert ref == {"name": "vt-vectide-secret", "key": "zookeeper-sasl-password"}
    path = tmp_path / "vectide.yaml"
    path.write_text(vectide_config(docs))
    config = load_config(path, env={"VECTIDE_ZOOKEEPER_SASL_PASSWORD": "zk-pw"}).zookeeper
    assert config.sasl_credentials() == ("vectide", "zk-pw") and config.sasl_acl
    # an existing Secret instead: the chart's own keeps no copy
    external = copy.deepcopy(EXTERNAL)
    external["externalZookeeper"]["sasl"] = {"username": "vectide", "existingSecret": "zk-creds"}
    docs = render({**CLUSTER, **external})
    assert "zookeeper-sasl-password" not in kinds(docs, "Secret")["vt-vectide-secret"]["stringData"]
    proxy = workloads(docs)["proxy"]["spec"]["template"]["spec"]["containers"][0]
    assert env_of(proxy)["VECTIDE_ZOOKEEPER_SASL_PASSWORD"]["secretKeyRef"]["name"] == "zk-creds"
    external["externalZookeeper"]["sasl"] = {"username": "vectide"}
    with pytest.raises(Exception, match=r"externalZookeeper\.sasl\.password"):
        render({**CLUSTER, **external})
    no_sasl = render(CLUSTER)  # the default: no SASL anywhere
    assert all("VECTIDE_ZOOKEEPER_SASL_PASSWORD" not in env_of(c) for c in containers(no_sasl))
    assert "sasl" not in vectide_config(no_sasl)


def test_rendered_config_parses_with_vectides_loader(rendered, tmp_path) -> None:
    """The pod's $VECTIDE_CONFIG plus the chart's env: what `vectide run ROLE` loads."""
    name, docs = rendered
    path = tmp_path / "vectide.yaml"
    path.write_text(vectide_config(docs))
    secret = kinds(docs, "Secret")["vt-vectide-secret"]["stringData"]
    env = {"VECTIDE_S3_ACCESS_KEY": secret["s3-access-key"], "VECTIDE_SERVICE_HOST": "10.1.2.3"}
    config = load_config(path, env=env)
    assert config.service.metrics_port == 9091 and config.service.proxy_port == 19530
    assert config.service.http_port == 19121
    assert config.service.bind_host == "0.0.0.0" and config.service.host == "10.1.2.3"
    assert not (config.kafka.managed or config.zookeeper.managed or config.s3.managed)
    assert config.cluster.name == "vt"
    if name == "external":
        assert config.s3.access_key == "AKIA"
    else:
        assert config.kafka.bootstrap_servers == "vt-vectide-kafka:9092"


def test_extra_config_file_is_merged_over_the_rendered_config(tmp_path) -> None:
    user = "cluster:\n  dml_channels: 32\nquery:\n  graceful_time_ms: 2000\n"
    docs = render(
        {
            "extraConfigFiles": {"user.yaml": user},
            "dataNode": {"spark": {"master": "spark://sm:7077"}},
        }
    )
    path = tmp_path / "vectide.yaml"
    path.write_text(vectide_config(docs))
    config = load_config(path, env={})
    assert config.cluster.dml_channels == 32 and config.cluster.name == "vt"  # merged, kept
    assert config.query.graceful_time_ms == 2000
    assert config.data.spark_master == "spark://sm:7077"


def test_tls_mounts_the_secret_in_every_vectide_container(tmp_path) -> None:
    for values in ({**CLUSTER, **TLS}, TLS):  # every role's pod, and the standalone pod
        docs = render(values)
        for container in containers(docs):
            if container["name"] in BUNDLED:
                continue
            mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
            assert mounts["tls"] == "/etc/vectide-tls", container["name"]
        for workload in workloads(docs).values():
            if component(workload) in BUNDLED:
                continue
            volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
            assert volumes["tls"]["secret"]["secretName"] == "vectide-tls"
    path = tmp_path / "vectide.yaml"
    path.write_text(vectide_config(render({**CLUSTER, **TLS})))
    security = load_config(path, env={}).security
    assert (security.tls_mode, security.internal_tls) == (2, True)
    assert security.tls_cert_file == "/etc/vectide-tls/tls.crt"
    assert security.tls_ca_file == "/etc/vectide-tls/ca.crt"
    assert security.tls_server_name == "vectide.db.svc"


def test_tls_without_a_secret_or_with_a_bad_mode_does_not_render() -> None:
    tls = TLS["tls"]
    for broken in (
        {**tls, "secretName": ""},
        {**tls, "mode": 3},
        {**tls, "serverName": ""},  # internal TLS checks peers by name
    ):
        with pytest.raises(Exception, match=r"tls\."):
            render({"tls": broken})


def test_no_tls_mounts_nothing() -> None:
    docs = render({})
    assert "security" not in yaml.safe_load(vectide_config(docs))
    assert all("tls" not in {m["name"] for m in c["volumeMounts"]} for c in containers(docs))


def test_active_standby_runs_two_rootcoords() -> None:
    found = workloads(render(ACTIVE_STANDBY))
    assert found["rootcoord"]["spec"]["replicas"] == 2
    assert workloads(render(CLUSTER))["rootcoord"]["spec"]["replicas"] == 1


def test_pod_disruption_budgets_for_proxy_and_querynode() -> None:
    budgets = kinds(render(CLUSTER), "PodDisruptionBudget")
    assert {component(b) for b in budgets.values()} == {"proxy", "querynode"}
    for budget in budgets.values():
        assert budget["spec"]["selector"]["matchLabels"][
            "app.kubernetes.io/component"
        ] == component(budget)


def test_query_node_groups_are_deployments_of_their_own_labelled_for_resource_groups() -> None:
    docs = render(VALUE_SETS["querynode-groups"])
    found = workloads(docs)
    groups = {"querynode", "querynode-tenant-a", "querynode-tenant-b"}
    assert groups <= set(found)

    def labels(name: str) -> dict[str, str]:
        (container,) = found[name]["spec"]["template"]["spec"]["containers"]
        assert container["args"][:2] == ["run", "querynode"]
        assert env_of(container)["VECTIDE_LOG_LEVEL"] == "INFO"  # queryNode's extraEnv too
        prefix = "VECTIDE_SERVER_LABEL_"
        env = env_of(container)
        return {k[len(prefix) :]: v for k, v in env.items() if k.startswith(prefix)}

    assert labels("querynode") == {"ZONE": "eu-1a"}
    assert labels("querynode-tenant-a") == {"ZONE": "eu-1a", "TENANT": "a"}
    assert labels("querynode-tenant-b") == {"ZONE": "eu-1b", "TENANT": "b"}
    tenant_a = found["querynode-tenant-a"]["spec"]
    assert tenant_a["replicas"] == 2
    assert tenant_a["template"]["spec"]["nodeSelector"] == {"pool": "tenant-a"}
    assert found["querynode-tenant-b"]["spec"]["replicas"] == 1
    # each group's pods are its own: no two Deployments select the same pods
    selectors = [tuple(sorted(found[g]["spec"]["selector"]["matchLabels"].items())) for g in groups]
    assert len(set(selectors)) == 3
    budgets = {component(b) for b in kinds(docs, "PodDisruptionBudget").values()}
    assert groups <= budgets
    (monitor,) = kinds(docs, "ServiceMonitor").values()
    assert groups <= set(monitor["spec"]["selector"]["matchExpressions"][0]["values"])


def test_service_monitor_scrapes_the_metrics_port() -> None:
    assert not kinds(render(CLUSTER), "ServiceMonitor")
    (monitor,) = kinds(render(VALUE_SETS["monitored"]), "ServiceMonitor").values()
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    endpoints = {e["port"]: e["path"] for e in monitor["spec"]["endpoints"]}
    assert endpoints == {"metrics": "/metrics", "datanode-metrics": "/metrics"}
    assert set(ROLES) <= set(monitor["spec"]["selector"]["matchExpressions"][0]["values"])


def test_query_node_resources_reach_the_pod() -> None:
    resources = {"requests": {"memory": "24Gi", "cpu": "4"}, "limits": {"memory": "32Gi"}}
    docs = render(
        {**CLUSTER, "queryNode": {"resources": resources, "nodeSelector": {"pool": "mem"}}}
    )
    pod = workloads(docs)["querynode"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"] == resources
    assert pod["nodeSelector"] == {"pool": "mem"}


def test_spark_master_and_conf_reach_the_data_node() -> None:
    docs = render(
        {
            **CLUSTER,
            "dataNode": {
                "spark": {
                    "master": "k8s://https://kubernetes.default",
                    "conf": {"spark.executor.instances": 4},
                }
            },
        }
    )
    conf = kinds(docs, "ConfigMap")["vt-vectide-spark"]["data"]["spark-defaults.conf"]
    assert "spark.executor.instances 4" in conf
    assert "spark.kubernetes.container.image vectide/vectide:0.1.0" in conf
    pod = workloads(docs)["datanode"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "vt-vectide-spark"
    assert {"ServiceAccount", "Role", "RoleBinding"} <= {d["kind"] for d in docs}
    assert env_of(pod["containers"][0])["SPARK_CONF_DIR"] == "/etc/vectide-spark"


def test_values_pass_yamllint() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "yamllint",
            "-d",
            "{extends: default, rules: {line-length: {max: 100}, document-start: disable}}",
            str(CHART / "values.yaml"),
            str(CHART / "Chart.yaml"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout


def test_dockerfile_passes_hadolint_at_error_level() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    result = subprocess.run(
        [hadolint, "--failure-threshold", "error", str(REPO / "Dockerfile")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    text = (REPO / "Dockerfile").read_text()
    assert "USER 10001" in text and 'ENTRYPOINT ["vectide"]' in text
