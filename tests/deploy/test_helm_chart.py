"""The Helm chart through the real Helm engine (helm-python-sdk), validated against the
Kubernetes schemas of 1.29 and of the newest version kubernetes-validate ships."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "tuplemesh"
KUBE_VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]
CRD_KINDS = {"ServiceMonitor"}  # prometheus-operator: not in the Kubernetes schemas

VALUE_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "static-zmq-monitored": {
        "workers": 5,
        "transport": "zmq",
        "discovery": {"mode": "static"},
        "metrics": {
            "serviceMonitor": {"enabled": True, "labels": {"release": "prom"}},
            "grafanaDashboard": {"enabled": True},
        },
        "tls": {"enabled": True, "secretName": "mesh-tls"},
        "ports": {"transfer": 7000, "metrics": 9200, "zmqOffset": 100},
    },
    "minimal": {
        "workers": 1,
        "metrics": {"enabled": False, "serviceMonitor": {"enabled": True}},
        "networkPolicy": {"enabled": False},
        "podDisruptionBudget": {"enabled": False},
        "topology": {
            "target": "mytopo:build",
            "moduleName": "mytopo",
            "source": "from examples.wordcount import build\n",
        },
    },
}


def render(values: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """kind -> manifests, rendered by the Helm engine."""
    with helm.Chart.load(CHART) as chart:
        out = chart.render(values=values, name="mesh", namespace="streams")
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for path, text in out.items():
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                by_kind.setdefault(doc["kind"], []).append(doc)
    return by_kind


def notes(values: dict[str, Any]) -> str:
    with helm.Chart.load(CHART) as chart:
        out = chart.render(values=values, name="mesh", namespace="streams")
    return next(text for path, text in out.items() if path.endswith("NOTES.txt"))


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_strict_lint(name: str):
    report = helm.lint(str(CHART), VALUE_SETS[name], strict=True)
    problems = [m for m in report["messages"] if m["severity"] >= 2] + report.get("errors", [])
    assert report["total_charts_linted"] == 1
    assert problems == [], problems


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_every_manifest_is_valid_kubernetes(name: str, kube: str):
    for kind, docs in render(VALUE_SETS[name]).items():
        if kind in CRD_KINDS:
            continue
        for doc in docs:
            kubernetes_validate.validate(doc, kube, strict=True)


def test_default_statefulset_service_and_probes():
    m = render({})
    [sts] = m["StatefulSet"]
    spec = sts["spec"]
    assert spec["replicas"] == 3 and spec["podManagementPolicy"] == "Parallel"
    assert spec["serviceName"] == "mesh-tuplemesh-headless"
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    assert container["args"] == ["worker", "examples.wordcount:topology"]
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"transfer": 6700, "metrics": 9100}
    assert container["livenessProbe"]["grpc"] == {"port": 6700, "service": "tuplemesh.v1.Admin"}
    assert container["readinessProbe"]["grpc"] == {"port": 6700}
    env = {e["name"]: e for e in container["env"]}
    assert (
        env["TUPLEMESH_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
        == "metadata.labels['apps.kubernetes.io/pod-index']"
    )
    assert env["TUPLEMESH_DISCOVERY"]["value"] == "kubernetes"
    assert env["TUPLEMESH_DISCOVERY_SERVICE"]["value"] == "mesh-tuplemesh-headless"
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert len(spec["template"]["metadata"]["annotations"]["checksum/config"]) == 64
    [svc] = m["Service"]
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    assert [(p["name"], p["port"]) for p in svc["spec"]["ports"]] == [("transfer", 6700), ("metrics", 9100)]


def test_config_map_holds_the_config_and_changes_roll_pods():
    m = render({"config": {"topology.producer.batch.size": 50}})
    conf = yaml.safe_load(m["ConfigMap"][0]["data"]["tuplemesh.yaml"])
    assert conf["topology.producer.batch.size"] == 50 and conf["worker.bind.host"] == "0.0.0.0"
    assert conf["messaging.transport"] == "grpc" and conf["metrics.port"] == 9100

    def checksum(v):
        return render(v)["StatefulSet"][0]["spec"]["template"]["metadata"]["annotations"]["checksum/config"]

    assert checksum({}) != checksum({"config": {"topology.producer.batch.size": 50}})


def test_rbac_is_read_only_on_endpointslices():
    m = render({})
    [role] = m["Role"]
    assert role["rules"] == [
        {
            "apiGroups": ["discovery.k8s.io"],
            "resources": ["endpointslices"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    [binding] = m["RoleBinding"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "mesh-tuplemesh", "namespace": "streams"}
    ]
    static = render({"discovery": {"mode": "static"}})
    assert "Role" not in static and "RoleBinding" not in static
    env = {
        e["name"]: e.get("value")
        for e in static["StatefulSet"][0]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["TUPLEMESH_PEERS"] == ",".join(
        f"mesh-tuplemesh-{i}.mesh-tuplemesh-headless.streams.svc:6700" for i in range(3)
    )


def test_network_policy_pdb_and_gating():
    m = render({})
    [policy] = m["NetworkPolicy"]
    transfer_rule, metrics_rule = policy["spec"]["ingress"]
    assert transfer_rule["ports"] == [{"port": "transfer"}]
    assert transfer_rule["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "mesh"
    assert metrics_rule == {"ports": [{"port": "metrics"}]}
    assert m["PodDisruptionBudget"][0]["spec"]["maxUnavailable"] == 1
    assert "ServiceMonitor" not in m
    # gated twice: serviceMonitor alone is not enough
    assert "ServiceMonitor" not in render(VALUE_SETS["minimal"])
    monitored = render(VALUE_SETS["static-zmq-monitored"])
    [monitor] = monitored["ServiceMonitor"]
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "15s"}]
    assert monitor["metadata"]["labels"]["release"] == "prom"
    dashboard = json.loads(
        next(c for c in monitored["ConfigMap"] if c["metadata"]["name"].endswith("-dashboard"))["data"][
            "tuplemesh.json"
        ]
    )
    assert dashboard["uid"] == "tuplemesh" and len(dashboard["panels"]) == 6


def test_tls_zmq_and_topology_source():
    m = render(VALUE_SETS["static-zmq-monitored"])
    conf = yaml.safe_load(
        next(c for c in m["ConfigMap"] if "tuplemesh.yaml" in c["data"])["data"]["tuplemesh.yaml"]
    )
    assert conf["tls.enabled"] is True and conf["tls.ca.file"] == "/etc/tuplemesh/tls/ca.crt"
    assert (
        conf["tls.cert.file"] == "/etc/tuplemesh/tls/tls.crt"
        and conf["tls.key.file"] == "/etc/tuplemesh/tls/tls.key"
    )
    assert "tls.enabled" not in yaml.safe_load(render({})["ConfigMap"][0]["data"]["tuplemesh.yaml"])
    container = m["StatefulSet"][0]["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["tcpSocket"] == {"port": "transfer"}  # kubelet has no client cert
    assert container["readinessProbe"]["tcpSocket"] == {"port": "transfer"}
    pod = m["StatefulSet"][0]["spec"]["template"]["spec"]
    assert {"name": "tls", "secret": {"secretName": "mesh-tls"}} in pod["volumes"]
    ports = {p["name"]: p["containerPort"] for p in pod["containers"][0]["ports"]}
    assert ports == {"transfer": 7000, "metrics": 9200, "zmq": 7100}
    minimal = render(VALUE_SETS["minimal"])
    assert minimal["ConfigMap"][0]["data"]["mytopo.py"] == "from examples.wordcount import build\n"
    env = {
        e["name"]: e.get("value")
        for e in minimal["StatefulSet"][0]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["PYTHONPATH"] == "/topology"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"workers": 0}, "workers"),
        ({"ports": {"transfer": 70000}}, "transfer"),
        ({"transport": "carrier-pigeon"}, "transport"),
        ({"topology": {"target": "no colon"}}, "target"),
        ({"tls": {"enabled": True}}, "tls.enabled needs tls.secretName"),
        ({"topology": {"target": "examples.wordcount:topology", "source": "x = 1\n"}}, "must start with"),
    ],
)
def test_values_that_make_no_sense_fail_at_render(values: dict[str, Any], message: str):
    with pytest.raises(helm.HelmError) as err:
        render(values)
    assert message in str(err.value)


def test_notes_tell_how_to_try_it():
    text = notes({})
    assert "grpcurl -plaintext 127.0.0.1:6700 list" in text
    assert "rate(tuplemesh_tuples_executed_total[1m])" in text


def test_every_value_is_documented():
    lines = (CHART / "values.yaml").read_text().splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped and not stripped.startswith(("#", "-")) and line[0] != " " and ":" in line:
            assert lines[i - 1].lstrip().startswith("#"), f"top-level value {line!r} has no comment above it"
