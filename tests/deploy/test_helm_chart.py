"""The Helm chart through the real Helm engine (helm-python-sdk), validated against the
Kubernetes schemas of 1.29 and of the newest version kubernetes-validate ships."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "tuplemesh"
README_SCRIPT = CHART.parent / "chart_readme.py"
KUBE_VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]
CRD_KINDS = {"ServiceMonitor"}  # prometheus-operator: not in the Kubernetes schemas

IMAGE = {"image": {"repository": "registry.example/tuplemesh"}}  # the chart has no default image

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
    "autoscaled": {"autoscaling": {"enabled": True, "minReplicas": 3, "maxReplicas": 12}},
    "minimal": {
        "workers": 1,
        "metrics": {"enabled": False, "serviceMonitor": {"enabled": True}},
        "networkPolicy": {"enabled": False},
        "podDisruptionBudget": {"enabled": False},
        "gateway": {"service": {"enabled": False}},
        "topology": {
            "target": "mytopo:build",
            "moduleName": "mytopo",
            "source": "from examples.wordcount import build\n",
        },
    },
    "conventional": {
        "fullnameOverride": "streams-mesh",
        "image": {"digest": "sha256:" + "ab" * 32},
        "podAnnotations": {"team.example/owner": "streaming"},
        "podLabels": {"cost-center": "analytics"},
        "extraEnv": [
            {"name": "LOG_FORMAT", "value": "json"},
            {"name": "HTTPS_PROXY", "valueFrom": {"configMapKeyRef": {"name": "proxy", "key": "url"}}},
        ],
        "extraEnvFrom": [{"configMapRef": {"name": "mesh-env"}}, {"secretRef": {"name": "mesh-env-secret"}}],
        "extraVolumes": [{"name": "topology-data", "configMap": {"name": "lookup-tables"}}],
        "extraVolumeMounts": [{"name": "topology-data", "mountPath": "/data", "readOnly": True}],
        "priorityClassName": "streaming-high",
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
            },
            {
                "maxSkew": 2,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"tier": "stream"}},
            },
        ],
        "serviceAccount": {"annotations": {"iam.example/role": "arn:example:mesh"}},
        "meshSecret": {"existingSecret": "mesh-transfer", "existingSecretKey": "hmac"},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}},
        "admin": {"existingSecret": "mesh-admin"},
        "gateway": {
            "service": {"type": "LoadBalancer", "port": 443, "annotations": {"lb.example/internal": "true"}}
        },
        "networkPolicy": {
            "gatewayFrom": [
                {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "spark"}},
                    "podSelector": {"matchLabels": {"spark-role": "executor"}},
                }
            ]
        },
        "state": {
            "backend": "redis",
            "redis": {"url": "redis://redis-master.data.svc:6379/0", "existingSecret": "redis"},
        },
    },
    "sqlite-persistent": {
        "workers": 1,
        "nameOverride": "wordcount",
        "serviceAccount": {"create": False, "name": "stream-runner"},
        "updateStrategy": {"type": "OnDelete"},
        "state": {
            "backend": "sqlite",
            "sqlite": {
                "persistence": {
                    "enabled": True,
                    "size": "5Gi",
                    "storageClass": "fast-ssd",
                    "annotations": {"a": "b"},
                }
            },
        },
    },
    "sqlite-emptydir-tls-token": {
        "workers": 1,
        "state": {"backend": "sqlite"},
        "tls": {"enabled": True, "secretName": "mesh-tls"},
        "admin": {"existingSecret": "mesh-admin", "existingSecretTokenKey": "admin.token"},
    },
}


def with_image(values: dict[str, Any]) -> dict[str, Any]:
    """values over IMAGE, merged key by key as Helm merges a values file over the chart's."""

    def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(base)
        for key, value in over.items():
            out[key] = (
                merge(out[key], value)
                if isinstance(value, dict) and isinstance(out.get(key), dict)
                else value
            )
        return out

    return merge(IMAGE, values)


def rendered(values: dict[str, Any]) -> dict[str, str]:
    """path -> text, rendered by the Helm engine (values taken as given: no image added)."""
    with helm.Chart.load(CHART) as chart:
        return chart.render(values=values, name="mesh", namespace="streams")


def render(values: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """kind -> manifests, rendered by the Helm engine with IMAGE under values."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for path, text in rendered(with_image(values)).items():
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                by_kind.setdefault(doc["kind"], []).append(doc)
    return by_kind


def notes(values: dict[str, Any]) -> str:
    out = rendered(with_image(values))
    return next(text for path, text in out.items() if path.endswith("NOTES.txt"))


def pod_spec(m: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    [sts] = m["StatefulSet"]
    spec: dict[str, Any] = sts["spec"]["template"]["spec"]
    return spec


def env_of(m: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in pod_spec(m)["containers"][0]["env"]}


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_strict_lint(name: str):
    report = helm.lint(str(CHART), with_image(VALUE_SETS[name]), strict=True)
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
    assert container["image"] == "registry.example/tuplemesh:0.1.0"
    assert spec["updateStrategy"] == {"type": "RollingUpdate"}
    assert (
        "priorityClassName" not in pod
        and "topologySpreadConstraints" not in pod
        and "envFrom" not in container
    )
    assert "volumeClaimTemplates" not in spec
    # nothing about state, the token or extras unless asked for
    # no worker count: the workers follow their StatefulSet's replicas
    assert env["TUPLEMESH_STATEFULSET"]["value"] == sts["metadata"]["name"] == "mesh-tuplemesh"
    assert set(env) == {
        "TUPLEMESH_INDEX",
        "TUPLEMESH_PORT",
        "TUPLEMESH_CONFIG",
        "TUPLEMESH_DISCOVERY",
        "TUPLEMESH_DISCOVERY_SERVICE",
        "TUPLEMESH_DISCOVERY_NAMESPACE",
        "TUPLEMESH_STATEFULSET",
        "TUPLEMESH_ADMIN_REBALANCE_ENABLED",  # the mesh rescales itself through Admin.Rebalance
    }
    assert env["TUPLEMESH_ADMIN_REBALANCE_ENABLED"]["value"] == "true"
    assert [v["name"] for v in pod["volumes"]] == ["config", "tmp"]
    services = {s["metadata"]["name"]: s for s in m["Service"]}
    assert set(services) == {"mesh-tuplemesh-headless", "mesh-tuplemesh-gateway"}
    svc = services["mesh-tuplemesh-headless"]
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


def test_rbac_is_read_only_on_endpointslices_and_the_own_statefulset():
    m = render({})
    [role] = m["Role"]
    assert role["rules"] == [
        {
            "apiGroups": ["discovery.k8s.io"],
            "resources": ["endpointslices"],
            "verbs": ["get", "list", "watch"],
        },
        {
            # list and watch by name: the workers select it with fieldSelector=metadata.name=
            "apiGroups": ["apps"],
            "resources": ["statefulsets"],
            "resourceNames": ["mesh-tuplemesh"],
            "verbs": ["get", "list", "watch"],
        },
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
    # a fixed list of peers, a fixed worker count: nothing to follow
    assert env["TUPLEMESH_WORKERS"] == "3" and "TUPLEMESH_STATEFULSET" not in env


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
    release_label = {"sourceLabels": ["__meta_kubernetes_service_label_app_kubernetes_io_instance"],
                     "targetLabel": "release"}  # fmt: skip
    assert monitor["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "15s", "relabelings": [release_label]}
    ]
    assert monitor["metadata"]["labels"]["release"] == "prom"
    dashboard = json.loads(
        next(c for c in monitored["ConfigMap"] if c["metadata"]["name"].endswith("-dashboard"))["data"][
            "tuplemesh.json"
        ]
    )
    assert dashboard["uid"] == "tuplemesh" and len(dashboard["panels"]) == 8
    # every query is filtered by the namespace and release picked at the top of the dashboard
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(variables) == {"datasource", "namespace", "release"}
    release_query = 'label_values(tuplemesh_build_info{namespace=~"$namespace"}, release)'
    assert variables["release"]["query"]["query"] == release_query
    selector = '{namespace=~"$namespace", release=~"$release"}'
    for target in (t for panel in dashboard["panels"] for t in panel.get("targets", [])):
        metrics = re.findall(r"tuplemesh_[a-z_]+(?=\W)", target["expr"])
        assert metrics and all(f"{name}{selector}" in target["expr"] for name in metrics), target["expr"]


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


def test_without_an_image_repository_the_render_says_what_to_set():
    with pytest.raises(helm.HelmError) as err:
        rendered({})
    assert "image.repository is required" in str(err.value)
    assert "--set image.repository=REGISTRY/NAME" in str(err.value)
    tagged = render({"image": {"tag": "2.3.1"}})
    assert pod_spec(tagged)["containers"][0]["image"] == "registry.example/tuplemesh:2.3.1"
    pinned = render(VALUE_SETS["conventional"])
    assert pod_spec(pinned)["containers"][0]["image"] == "registry.example/tuplemesh@sha256:" + "ab" * 32


def test_name_overrides():
    full = render({"fullnameOverride": "streams-mesh"})
    assert full["StatefulSet"][0]["metadata"]["name"] == "streams-mesh"
    assert {s["metadata"]["name"] for s in full["Service"]} == {
        "streams-mesh-headless",
        "streams-mesh-gateway",
    }
    assert full["StatefulSet"][0]["spec"]["serviceName"] == "streams-mesh-headless"
    assert env_of(full)["TUPLEMESH_DISCOVERY_SERVICE"]["value"] == "streams-mesh-headless"
    assert full["ConfigMap"][0]["metadata"]["name"] == "streams-mesh"
    assert full["RoleBinding"][0]["subjects"][0]["name"] == "streams-mesh"
    named = render({"nameOverride": "wordcount"})
    [sts] = named["StatefulSet"]
    assert sts["metadata"]["name"] == "mesh-wordcount"
    assert sts["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "wordcount",
        "app.kubernetes.io/instance": "mesh",
    }
    assert (
        named["NetworkPolicy"][0]["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"]
        == "wordcount"
    )
    # a release named after the chart is not repeated; 52 characters at most (pods add suffixes)
    assert render({"nameOverride": "me"})["StatefulSet"][0]["metadata"]["name"] == "mesh"
    long = render({"fullnameOverride": "a" * 52})
    assert {s["metadata"]["name"] for s in long["Service"]} == {"a" * 52 + "-headless", "a" * 52 + "-gateway"}


def test_pod_metadata_scheduling_and_update_strategy():
    m = render(VALUE_SETS["conventional"])
    [sts] = m["StatefulSet"]
    template = sts["spec"]["template"]
    assert template["metadata"]["labels"] == {
        "app.kubernetes.io/name": "tuplemesh",
        "app.kubernetes.io/instance": "mesh",
        "app.kubernetes.io/version": "0.1.0",
        "app.kubernetes.io/managed-by": "Helm",
        "helm.sh/chart": "tuplemesh-0.1.0",
        "cost-center": "analytics",
    }
    assert set(template["metadata"]["annotations"]) == {"checksum/config", "team.example/owner"}
    assert template["metadata"]["annotations"]["team.example/owner"] == "streaming"
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}
    pod = template["spec"]
    assert pod["priorityClassName"] == "streaming-high"
    zone, host = pod["topologySpreadConstraints"]
    assert zone == {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {
            "matchLabels": {"app.kubernetes.io/name": "tuplemesh", "app.kubernetes.io/instance": "mesh"}
        },
    }
    assert host["labelSelector"] == {"matchLabels": {"tier": "stream"}}  # the user's own selector is kept
    # the chart's labels and checksum win a clash, so the selector keeps matching and config still rolls pods
    clash = render(
        {"podLabels": {"app.kubernetes.io/instance": "other"}, "podAnnotations": {"checksum/config": "stale"}}
    )
    metadata = clash["StatefulSet"][0]["spec"]["template"]["metadata"]
    assert metadata["labels"]["app.kubernetes.io/instance"] == "mesh"
    assert len(metadata["annotations"]["checksum/config"]) == 64
    on_delete = render(VALUE_SETS["sqlite-persistent"])
    assert on_delete["StatefulSet"][0]["spec"]["updateStrategy"] == {"type": "OnDelete"}


def test_extra_env_env_from_and_volumes():
    m = render(VALUE_SETS["conventional"])
    container = pod_spec(m)["containers"][0]
    assert container["env"][-2:] == [
        {"name": "LOG_FORMAT", "value": "json"},
        {"name": "HTTPS_PROXY", "valueFrom": {"configMapKeyRef": {"name": "proxy", "key": "url"}}},
    ]
    assert container["envFrom"] == [
        {"configMapRef": {"name": "mesh-env"}},
        {"secretRef": {"name": "mesh-env-secret"}},
    ]
    assert pod_spec(m)["volumes"][-1] == {"name": "topology-data", "configMap": {"name": "lookup-tables"}}
    assert container["volumeMounts"][-1] == {"name": "topology-data", "mountPath": "/data", "readOnly": True}


def test_service_account_create_name_and_annotations():
    m = render(VALUE_SETS["conventional"])
    [account] = m["ServiceAccount"]
    assert account["metadata"]["name"] == "streams-mesh"
    assert account["metadata"]["annotations"] == {"iam.example/role": "arn:example:mesh"}
    assert pod_spec(m)["serviceAccountName"] == "streams-mesh"
    existing = render(VALUE_SETS["sqlite-persistent"])
    assert "ServiceAccount" not in existing
    assert pod_spec(existing)["serviceAccountName"] == "stream-runner"
    assert existing["RoleBinding"][0]["subjects"][0]["name"] == "stream-runner"
    assert pod_spec(render({"serviceAccount": {"create": False}}))["serviceAccountName"] == "default"
    assert render({"serviceAccount": {"name": "mine"}})["ServiceAccount"][0]["metadata"]["name"] == "mine"


def test_admin_token_comes_from_a_secret_never_the_config_map():
    m = render(VALUE_SETS["conventional"])
    assert env_of(m)["TUPLEMESH_ADMIN_TOKEN"] == {
        "name": "TUPLEMESH_ADMIN_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "mesh-admin", "key": "token"}},
    }
    assert "admin.token" not in yaml.safe_load(m["ConfigMap"][0]["data"]["tuplemesh.yaml"])
    keyed = render(VALUE_SETS["sqlite-emptydir-tls-token"])
    assert env_of(keyed)["TUPLEMESH_ADMIN_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "mesh-admin",
        "key": "admin.token",
    }


def test_mesh_secret_is_a_file_from_an_existing_secret_never_the_config_map_or_env():
    assert "TUPLEMESH_MESH_SECRET_FILE" not in env_of(render({}))
    m = render(VALUE_SETS["conventional"])
    env = env_of(m)
    assert env["TUPLEMESH_MESH_SECRET_FILE"] == {
        "name": "TUPLEMESH_MESH_SECRET_FILE",
        "value": "/etc/tuplemesh/mesh-secret/hmac",
    }
    assert "TUPLEMESH_MESH_SECRET" not in env
    pod = pod_spec(m)
    assert {
        "name": "mesh-secret",
        "secret": {"secretName": "mesh-transfer", "items": [{"key": "hmac", "path": "hmac"}]},
    } in pod["volumes"]
    assert {"name": "mesh-secret", "mountPath": "/etc/tuplemesh/mesh-secret", "readOnly": True} in pod[
        "containers"
    ][0]["volumeMounts"]
    conf = yaml.safe_load(m["ConfigMap"][0]["data"]["tuplemesh.yaml"])
    assert not any(key.startswith("mesh.") for key in conf)


def worker_config(m: dict[str, list[dict[str, Any]]]) -> tuple[str, dict[str, Any]]:
    """The worker config the chart renders: its text and what YAML reads in it."""
    text = next(c for c in m["ConfigMap"] if "tuplemesh.yaml" in c["data"])["data"]["tuplemesh.yaml"]
    return text, yaml.safe_load(text)


def test_mesh_secret_window_and_replay_cache_render_into_the_worker_config():
    from tuplemesh.config import Config

    text, conf = worker_config(render({"meshSecret": {"existingSecret": "mesh-transfer"}}))
    assert "mesh.secret.max.skew.secs" not in conf and "mesh.secret.replay.cache.entries" not in conf
    m = render(
        {
            "meshSecret": {
                "existingSecret": "mesh-transfer",
                "maxSkewSeconds": 30,
                "replayCacheEntries": 1_000_000,
            }
        }
    )
    text, conf = worker_config(m)
    # exactly the keys and values a worker reads
    assert "\nmesh.secret.max.skew.secs: 30\n" in f"\n{text}"
    assert "\nmesh.secret.replay.cache.entries: 1000000\n" in f"\n{text}"
    assert Config(conf)["mesh.secret.max.skew.secs"] == 30.0  # what the worker reads
    assert Config(conf)["mesh.secret.replay.cache.entries"] == 1_000_000
    assert env_of(m)["TUPLEMESH_MESH_SECRET_FILE"]["value"] == "/etc/tuplemesh/mesh-secret/secret"

    def checksum(v: dict[str, Any]) -> str:
        annotations = render(v)["StatefulSet"][0]["spec"]["template"]["metadata"]["annotations"]
        return str(annotations["checksum/config"])

    assert checksum({}) != checksum({"meshSecret": {"maxSkewSeconds": 30}})  # the pods roll
    # the keys through config still work when the meshSecret values are left at 0
    _, conf = worker_config(render({"config": {"mesh.secret.max.skew.secs": 45}}))
    assert conf["mesh.secret.max.skew.secs"] == 45


def test_redis_state_store_url_and_password_from_a_secret():
    m = render(VALUE_SETS["conventional"])
    env = env_of(m)
    assert env["TUPLEMESH_TOPOLOGY_STATE_BACKEND"] == {
        "name": "TUPLEMESH_TOPOLOGY_STATE_BACKEND",
        "value": "redis",
    }
    assert env["TUPLEMESH_TOPOLOGY_STATE_REDIS_URL"]["value"] == "redis://redis-master.data.svc:6379/0"
    assert env["TUPLEMESH_TOPOLOGY_STATE_REDIS_PASSWORD"] == {
        "name": "TUPLEMESH_TOPOLOGY_STATE_REDIS_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": "redis", "key": "redis-password"}},
    }
    assert "TUPLEMESH_TOPOLOGY_STATE_SQLITE_PATH" not in env
    assert "state" not in {v["name"] for v in pod_spec(m)["volumes"]}
    assert "volumeClaimTemplates" not in m["StatefulSet"][0]["spec"]
    no_password = env_of(render({"state": {"backend": "redis", "redis": {"url": "rediss://r:6380/1"}}}))
    assert no_password["TUPLEMESH_TOPOLOGY_STATE_REDIS_URL"]["value"] == "rediss://r:6380/1"
    assert "TUPLEMESH_TOPOLOGY_STATE_REDIS_PASSWORD" not in no_password


def test_sqlite_state_store_on_an_empty_dir_or_a_claim_per_pod():
    ephemeral = render(VALUE_SETS["sqlite-emptydir-tls-token"])
    env = env_of(ephemeral)
    assert env["TUPLEMESH_TOPOLOGY_STATE_BACKEND"]["value"] == "sqlite"
    assert env["TUPLEMESH_TOPOLOGY_STATE_SQLITE_PATH"]["value"] == "/var/lib/tuplemesh/state/state.sqlite"
    assert {"name": "state", "emptyDir": {}} in pod_spec(ephemeral)["volumes"]
    assert {"name": "state", "mountPath": "/var/lib/tuplemesh/state"} in pod_spec(ephemeral)["containers"][0][
        "volumeMounts"
    ]
    assert "volumeClaimTemplates" not in ephemeral["StatefulSet"][0]["spec"]
    # a file per pod serves one worker: the count stays 1 instead of following the replicas, so
    # a pod `kubectl scale` adds fails at start rather than joining with no state for its tasks
    assert env["TUPLEMESH_WORKERS"]["value"] == "1" and "TUPLEMESH_STATEFULSET" not in env

    persistent = render(VALUE_SETS["sqlite-persistent"])
    [sts] = persistent["StatefulSet"]
    assert "state" not in {v["name"] for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert {"name": "state", "mountPath": "/var/lib/tuplemesh/state"} in pod_spec(persistent)["containers"][
        0
    ]["volumeMounts"]
    assert sts["spec"]["volumeClaimTemplates"] == [
        {
            "metadata": {
                "name": "state",
                "labels": {"app.kubernetes.io/name": "wordcount", "app.kubernetes.io/instance": "mesh"},
                "annotations": {"a": "b"},
            },
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "fast-ssd",
                "resources": {"requests": {"storage": "5Gi"}},
            },
        }
    ]

    def claim_spec(storage_class: str) -> dict[str, Any]:
        values = {"workers": 1, "state": {"backend": "sqlite", "sqlite": {"persistence": {"enabled": True}}}}
        values["state"]["sqlite"]["persistence"]["storageClass"] = storage_class
        spec: dict[str, Any] = render(values)["StatefulSet"][0]["spec"]["volumeClaimTemplates"][0]["spec"]
        return spec

    assert "storageClassName" not in claim_spec("")  # the cluster's default class
    assert claim_spec("-")["storageClassName"] == ""  # no dynamic provisioning
    # persistence without the sqlite backend asks for no claim
    unused = render({"state": {"sqlite": {"persistence": {"enabled": True}}}})
    assert "volumeClaimTemplates" not in unused["StatefulSet"][0]["spec"]
    assert "TUPLEMESH_TOPOLOGY_STATE_BACKEND" not in env_of(unused)


def test_gateway_service_and_the_network_policy_rule_spark_needs():
    default = render({})
    gateway = next(s for s in default["Service"] if s["metadata"]["name"] == "mesh-tuplemesh-gateway")
    assert gateway["spec"] == {
        "type": "ClusterIP",
        "selector": {"app.kubernetes.io/name": "tuplemesh", "app.kubernetes.io/instance": "mesh"},
        "ports": [
            {
                "name": "gateway",
                "port": 6700,
                "targetPort": "transfer",
                "protocol": "TCP",
                "appProtocol": "grpc",
            }
        ],
    }
    assert "annotations" not in gateway["metadata"]
    assert len(default["NetworkPolicy"][0]["spec"]["ingress"]) == 2  # no gateway rule unless asked for

    m = render(VALUE_SETS["conventional"])
    gateway = next(s for s in m["Service"] if s["metadata"]["name"] == "streams-mesh-gateway")
    assert gateway["spec"]["type"] == "LoadBalancer"
    assert gateway["spec"]["ports"][0]["port"] == 443
    assert gateway["metadata"]["annotations"] == {"lb.example/internal": "true"}
    transfer_rule, gateway_rule, metrics_rule = m["NetworkPolicy"][0]["spec"]["ingress"]
    assert gateway_rule == {
        "from": [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "spark"}},
                "podSelector": {"matchLabels": {"spark-role": "executor"}},
            }
        ],
        "ports": [{"port": "transfer"}],
    }
    assert transfer_rule["ports"] == [{"port": "transfer"}] and metrics_rule == {
        "ports": [{"port": "metrics"}]
    }
    assert {s["metadata"]["name"] for s in render(VALUE_SETS["minimal"])["Service"]} == {
        "mesh-tuplemesh-headless"
    }


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"worker": 3}, "at '': additional properties 'worker' not allowed"),
        ({"image": {"repo": "x"}}, "at '/image': additional properties 'repo' not allowed"),
        (
            {"state": {"redis": {"urll": "redis://r"}}},
            "at '/state/redis': additional properties 'urll' not allowed",
        ),
        ({"state": {"backend": "mongo"}}, "/state/backend"),
        ({"gateway": {"service": {"typ": "NodePort"}}}, "at '/gateway/service': additional properties 'typ'"),
        ({"podLabels": {"tier": 3}}, "/podLabels/tier"),
        ({"updateStrategy": {"type": "Recreate"}}, "/updateStrategy/type"),
        ({"state": {"sqlite": {"persistence": {"size": "lots"}}}}, "/state/sqlite/persistence/size"),
        ({"admin": {"existingSecret": "Not_A_Name"}}, "/admin/existingSecret"),
        ({"meshSecret": {"maxSkewSeconds": -1}}, "/meshSecret/maxSkewSeconds"),
        ({"meshSecret": {"maxSkewSeconds": 2.5}}, "/meshSecret/maxSkewSeconds"),
        ({"meshSecret": {"replayCacheEntries": "lots"}}, "/meshSecret/replayCacheEntries"),
    ],
)
def test_schema_refuses_unknown_and_malformed_values(values: dict[str, Any], where: str):
    with pytest.raises(helm.HelmValuesError) as err:
        render(values)
    assert "don't meet the specifications of the schema" in str(err.value)
    assert where in str(err.value)


def test_every_object_of_the_schema_is_closed():
    """Every value object the chart defines refuses unknown keys; the ones left open are Kubernetes
    objects passed through (checked by kubernetes-validate once rendered) or tuplemesh config."""
    open_objects = {
        "/properties/config",
        "/properties/podSecurityContext",
        "/properties/securityContext",
        "/properties/affinity",
        "/properties/resources/properties/requests",
        "/properties/resources/properties/limits",
    }

    def objects(node: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
        if isinstance(node, dict):
            if node.get("type") == "object" and "additionalProperties" not in node:
                yield where, node
            for key, child in node.items():
                yield from objects(child, f"{where}/{key}")
        elif isinstance(node, list):
            for i, child in enumerate(node):
                yield from objects(child, f"{where}/{i}")

    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["additionalProperties"] is False
    leaky = {where for where, node in objects(schema, "") if "properties" in node or where in open_objects}
    # items of pass-through lists (env, volumes, peers) are Kubernetes objects too
    leaky = {where for where in leaky if "/items" not in where}
    assert leaky == open_objects


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"workers": 3, "state": {"backend": "sqlite"}},
            "3 workers need a store every pod reaches: state.backend redis",
        ),
        ({"state": {"backend": "redis"}}, "state.backend redis needs state.redis.url"),
        (
            {"state": {"backend": "redis", "redis": {"url": "redis://:hunter2@r:6379/0"}}},
            "state.redis.url carries a password",
        ),
        ({"config": {"admin.token": "t"}}, "config.admin.token would put a secret into a ConfigMap"),
        ({"config": {"mesh.secret": "hunter2"}}, "name that Secret in meshSecret.existingSecret"),
        (
            {"config": {"topology.state.redis.password": "p"}},
            "name that Secret in state.redis.existingSecret",
        ),
        ({"extraEnv": [{"name": "TUPLEMESH_WORKERS", "value": "9"}]}, "extraEnv sets TUPLEMESH_WORKERS"),
        (
            {"extraEnv": [{"name": "TUPLEMESH_STATEFULSET", "value": "x"}]},
            "extraEnv sets TUPLEMESH_STATEFULSET",
        ),
        (
            {"autoscaling": {"enabled": True}, "discovery": {"mode": "static"}},
            "autoscaling needs discovery.mode kubernetes",
        ),
        (
            {"workers": 1, "autoscaling": {"enabled": True}, "state": {"backend": "sqlite"}},
            "autoscaling needs a state store every pod reaches",
        ),
        (
            {"config": {"topology.state.backend": "sqlite"}},
            "config.topology.state.backend is set by the chart: use state.backend",
        ),
        (
            {"config": {"topology.state.sqlite.path": "/x"}},
            "config.topology.state.sqlite.path is set by the chart",
        ),
        ({"config": {"topology.state.redis.url": "redis://r"}}, "use state.redis.url"),
        ({"config": {"worker.cpus": "0"}}, "config.worker.cpus would pin every pod to the same CPUs"),
        (
            {"meshSecret": {"maxSkewSeconds": 30}, "config": {"mesh.secret.max.skew.secs": 60}},
            "config.mesh.secret.max.skew.secs and meshSecret.maxSkewSeconds are both set: set "
            "meshSecret.maxSkewSeconds only",
        ),
        (
            {"meshSecret": {"replayCacheEntries": 8}, "config": {"mesh.secret.replay.cache.entries": 9}},
            "config.mesh.secret.replay.cache.entries and meshSecret.replayCacheEntries are both set",
        ),
    ],
)
def test_secrets_and_stores_that_cannot_work_fail_at_render(values: dict[str, Any], message: str):
    with pytest.raises(helm.HelmError) as err:
        render(values)
    assert message in str(err.value)
    assert "hunter2" not in str(err.value)


def test_notes_with_tls_and_a_token_say_how_to_connect():
    text = notes(VALUE_SETS["sqlite-emptydir-tls-token"])
    assert "-plaintext" not in text
    flags = (
        "-cacert ca.crt -cert tls.crt -key tls.key"
        " -servername mesh-tuplemesh-0.mesh-tuplemesh-headless.streams.svc"
        ' -H "authorization: Bearer $TOKEN"'
    )
    assert f"grpcurl {flags} 127.0.0.1:6700 list" in text
    assert f"grpcurl {flags} -d '{{}}' 127.0.0.1:6700 tuplemesh.v1.Admin/GetStatus" in text
    assert (
        'kubectl -n streams get secret mesh-tls -o "jsonpath={.data.${f//./\\\\.}}" | base64 -d > "$f"'
        in text
    )
    assert (
        'TOKEN=$(kubectl -n streams get secret mesh-admin -o "jsonpath={.data.admin\\.token}" | base64 -d)'
        in text
    )
    assert "targets: mesh-tuplemesh-gateway.streams.svc:6700" in text
    named = notes(
        {"tls": {"enabled": True, "secretName": "t"}, "config": {"tls.server.name": "mesh.internal"}}
    )
    assert "-servername mesh.internal 127.0.0.1:6700 list" in named
    plain = notes({"networkPolicy": {"gatewayFrom": [{"podSelector": {}}]}})
    assert "list Spark's pods in networkPolicy.gatewayFrom" not in plain
    assert "list Spark's pods in networkPolicy.gatewayFrom" in notes({})


def _readme_module() -> Any:
    spec = importlib.util.spec_from_file_location("chart_readme", README_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_chart_readme_is_generated_from_values():
    chart_readme = _readme_module()
    current = (CHART / "README.md").read_text()
    assert current == chart_readme.render_readme(CHART), (
        "deploy/helm/tuplemesh/README.md is stale: run python deploy/helm/chart_readme.py"
    )
    assert '| `state.redis.existingSecret` | string | `""` |' in current
    assert (
        "| `workers` | int | `3` | Number of workers (one pod each: the StatefulSet's replicas)." in current
    )


def test_chart_readme_refuses_an_undocumented_value(tmp_path: Path):
    chart_readme = _readme_module()
    (tmp_path / "Chart.yaml").write_text((CHART / "Chart.yaml").read_text())
    (tmp_path / "values.yaml").write_text(
        "# -- The image.\nimage:\n  # -- Where from.\n  repository: x\n  tag: y\n# -- Workers.\nworkers: 1\n"
    )
    with pytest.raises(ValueError, match=r"no '# --' description for image\.tag$"):
        chart_readme.render_readme(tmp_path)


def test_autoscaling_is_an_hpa_on_the_statefulset_driven_by_backpressure():
    assert "HorizontalPodAutoscaler" not in render({})
    m = render(
        {
            "autoscaling": {
                "enabled": True,
                "minReplicas": 3,
                "maxReplicas": 12,
                "targetCongestedTasks": "500m",
            }
        }
    )
    [hpa] = m["HorizontalPodAutoscaler"]
    [statefulset] = m["StatefulSet"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": statefulset["metadata"]["name"],
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 12)
    [metric] = hpa["spec"]["metrics"]
    assert metric["type"] == "Pods"
    assert metric["pods"]["metric"]["name"] == "tuplemesh_backpressure_congested_tasks"
    assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": "500m"}
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 300
    with pytest.raises(helm.HelmError) as err:
        render({"autoscaling": {"enabled": True, "minReplicas": 5, "maxReplicas": 2}})
    assert "autoscaling.minReplicas (5) is above autoscaling.maxReplicas (2)" in str(err.value)
