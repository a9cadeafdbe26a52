"""The tutorial (docs/tutorial.md), driven: its `tuplemesh new` command writes the user's project,
which must be the files the tutorial shows word for word; its pytest and `tuplemesh run`
commands run for real, its Helm commands rendered by the real Helm engine
and validated, its Dockerfile checked against tuplemesh's own image and the chart, and the rendered
container command run as worker processes that must serve.

Code blocks are found by their markers: ``{code-block}`` with ``:caption: PATH`` is a file of the
user's project, with ``:name: tutorial-STEP`` the commands of a step. No Docker and no cluster
here: the test environment stands in for the tutorial's virtual environment (the project and
this checkout on PYTHONPATH), and a test API server stands in for the cluster's EndpointSlices.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tomllib
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.deploy.test_helm_chart import CRD_KINDS, KUBE_VERSIONS
from tests.discovery.apiserver import FakeApiServer, endpoint_slice
from tests.helpers import child_pythonpath, eventually
from tuplemesh.netutil import free_ports

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial.md"
#: where the tutorial keeps the tuplemesh checkout, relative to the user's project
CHECKOUT = "../tuplemesh"

#: a fenced block, plain (```text) or a code-block directive with its options (```{code-block} toml)
BLOCK = re.compile(
    r"^```(?:\{code-block\} )?(?P<lang>\S+)\n(?P<options>(?::[\w-]+: [^\n]*\n)*)\n?(?P<body>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)
OPTION = re.compile(r":(?P<name>[\w-]+): (?P<value>.*)")


@dataclass(frozen=True)
class Block:
    lang: str
    options: dict[str, str]
    body: str


def blocks() -> list[Block]:
    found = []
    for match in BLOCK.finditer(TUTORIAL.read_text()):
        options = {m["name"]: m["value"] for m in OPTION.finditer(match["options"])}
        found.append(Block(match["lang"], options, match["body"]))
    return found


def files() -> dict[str, str]:
    """The user's project: path -> text."""
    return {b.options["caption"]: b.body for b in blocks() if "caption" in b.options}


def commands(step: str) -> list[list[str]]:
    """The commands of ``tutorial-STEP``, one word list each (backslash continuations joined)."""
    [block] = [b for b in blocks() if b.options.get("name") == f"tutorial-{step}"]
    text = block.body.replace("\\\n", " ")
    return [shlex.split(line) for line in text.splitlines() if line.strip()]


def the_command(step: str, *prefix: str) -> list[str]:
    """The one command of ``tutorial-STEP`` that starts with ``prefix``."""
    [found] = [words for words in commands(step) if words[: len(prefix)] == list(prefix)]
    return found


def executable(words: list[str]) -> list[str]:
    """A tutorial command as this environment runs it: the same program from this interpreter."""
    programs = {
        "tuplemesh": [sys.executable, "-m", "tuplemesh.cli"],
        "pytest": [sys.executable, "-m", "pytest"],
    }
    return [*programs[words[0]], *words[1:]]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project the tutorial's `tuplemesh new` writes, in the directory it is run from."""
    install = commands("install")
    new = the_command("install", "tuplemesh", "new")
    # the project is made next to the checkout, and the rest of the tutorial runs inside it
    assert install[install.index(new) + 1] == ["cd", new[2]]
    assert ["pip", "install", "./" + Path(CHECKOUT).name] in install
    parent = tmp_path_factory.mktemp("user")
    out = subprocess.run(
        executable(new), cwd=parent, env={**os.environ, "PYTHONPATH": child_pythonpath()},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return parent / new[2]


def project_files(project: Path) -> dict[str, str]:
    return {str(p.relative_to(project)): p.read_text() for p in project.rglob("*") if p.is_file()}


def user_env(project: Path) -> dict[str, str]:
    """What the tutorial's venv provides: tuplemesh and the user's package importable."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), child_pythonpath()])}


def run(words: list[str], project: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        executable(words), cwd=project, env=user_env(project), capture_output=True, text=True, timeout=timeout
    )


# -- the project and the local steps ---------------------------------------------------------------


def test_the_layout_lists_exactly_the_files_tuplemesh_new_writes(project: Path):
    tree = next(b for b in blocks() if b.lang == "text" and b.body.startswith("trending/"))
    listed = {line.split("── ")[1] for line in tree.body.splitlines() if "── " in line}
    assert listed == set(project_files(project))
    # every file but the README is shown
    assert set(files()) == listed - {"README.md"}


def test_the_files_the_tutorial_shows_are_what_tuplemesh_new_writes_word_for_word(project: Path):
    written = project_files(project)
    for path, text in files().items():
        assert text == written[path], path


def test_the_projects_readme_gives_the_tutorials_commands(project: Path):
    shell = re.findall(
        r"^```shell\n(.*?)^```$", (project / "README.md").read_text(), re.MULTILINE | re.DOTALL
    )
    lines = "".join(shell).replace("\\\n", " ").splitlines()
    readme = [shlex.split(line, comments=True) for line in lines]
    for step in ("pytest", "run", "image", "helm-install"):
        for words in commands(step):
            assert words in readme, (step, words)


def test_the_users_pytest_passes_on_local_workers(project: Path):
    [words] = commands("pytest")
    out = run(words, project)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert re.search(r"\b3 passed\b", out.stdout), out.stdout[-2000:]


def test_tuplemesh_run_on_worker_processes_prints_the_documented_result(project: Path):
    [words] = commands("run")
    out = run(words, project)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    [documented] = [line for line in TUTORIAL.read_text().splitlines() if line.startswith("RESULT OK:")]
    assert documented in out.stdout.splitlines(), out.stdout
    assert "over grpc" in out.stdout and "on 3 worker(s)" in out.stdout


# -- Helm ------------------------------------------------------------------------------------------


@dataclass
class HelmCall:
    release: str
    chart: Path
    namespace: str
    values: dict[str, Any] = field(default_factory=dict)


def set_value(values: dict[str, Any], assignment: str) -> None:
    """``--set a.b=c`` as Helm reads it: dotted path, integers and booleans typed."""
    path, _, text = assignment.partition("=")
    value: Any = int(text) if text.isdigit() else {"true": True, "false": False}.get(text, text)
    *parents, leaf = path.split(".")
    for key in parents:
        values = values.setdefault(key, {})
    values[leaf] = value


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = deep_merge(out[key], value) if both else value
    return out


def helm_call(words: list[str], project: Path, previous: HelmCall | None = None) -> HelmCall:
    assert words[:2] in (["helm", "install"], ["helm", "upgrade"]), words
    release, chart = words[2], words[3]
    assert chart.startswith(CHECKOUT + "/"), chart
    call = HelmCall(release, ROOT / chart.removeprefix(CHECKOUT + "/"), "default")
    rest = iter(words[4:])
    for word in rest:
        if word in ("-n", "--namespace"):
            call.namespace = next(rest)
        elif word in ("-f", "--values"):
            call.values = deep_merge(call.values, yaml.safe_load((project / next(rest)).read_text()))
        elif word == "--set":
            set_value(call.values, next(rest))
        elif word == "--reuse-values":
            assert previous is not None, "--reuse-values needs the install before it"
            call.values = deep_merge(previous.values, call.values)
        else:
            assert word == "--create-namespace", f"unexpected helm argument {word!r}"
    return call


def install(project: Path) -> HelmCall:
    return helm_call(the_command("helm-install", "helm"), project)


def scale(project: Path) -> HelmCall:
    return helm_call(the_command("scale", "helm"), project, previous=install(project))


def render(call: HelmCall) -> dict[str, list[dict[str, Any]]]:
    with helm.Chart.load(call.chart) as chart:
        out = chart.render(values=call.values, name=call.release, namespace=call.namespace)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for path, text in out.items():
        if not path.endswith("NOTES.txt"):
            for doc in yaml.safe_load_all(text):
                if doc:
                    by_kind.setdefault(doc["kind"], []).append(doc)
    return by_kind


def worker_container(manifests: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    [sts] = manifests["StatefulSet"]
    [container] = sts["spec"]["template"]["spec"]["containers"]
    return container


@pytest.mark.parametrize("step", ["install", "scale"])
def test_the_helm_commands_render_valid_kubernetes(project: Path, step: str):
    call = install(project) if step == "install" else scale(project)
    manifests = render(call)
    for kind, docs in manifests.items():
        if kind not in CRD_KINDS:
            for doc in docs:
                for kube in KUBE_VERSIONS:
                    kubernetes_validate.validate(doc, kube, strict=True)
    assert helm.lint(str(call.chart), call.values, strict=True).get("errors", []) == []


def test_the_release_runs_the_users_image_and_topology_and_feeds_prometheus_and_grafana(project: Path):
    manifests = render(install(project))
    [sts] = manifests["StatefulSet"]
    container = worker_container(manifests)
    built = the_command("image", "docker", "build")
    image = built[built.index("-t") + 1]
    assert container["image"] == image == "registry.example.com/trending:1.0.0"
    assert the_command("image", "docker", "push") == ["docker", "push", image]
    assert container["args"] == ["worker", "trending.topology:topology"]
    assert sts["spec"]["replicas"] == 3
    config = next(c for c in manifests["ConfigMap"] if "tuplemesh.yaml" in c["data"])
    assert yaml.safe_load(config["data"]["tuplemesh.yaml"])["trending.posts"] == 0
    [monitor] = manifests["ServiceMonitor"]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert any(
        c["metadata"].get("labels", {}).get("grafana_dashboard") == "1" for c in manifests["ConfigMap"]
    )


def test_scaling_sets_the_replicas_the_workers_follow(project: Path):
    manifests = render(scale(project))
    [sts] = manifests["StatefulSet"]
    env = {e["name"]: e for e in worker_container(manifests)["env"]}
    assert sts["spec"]["replicas"] == 5
    # no count in the pod template: the workers read and follow the StatefulSet's replicas
    assert env["TUPLEMESH_STATEFULSET"]["value"] == sts["metadata"]["name"]
    assert "TUPLEMESH_WORKERS" not in env
    assert worker_container(manifests)["image"] == "registry.example.com/trending:1.0.0"


def test_the_pods_the_tutorial_watches_are_the_releases(project: Path):
    call = install(project)
    [sts] = render(call)["StatefulSet"]
    forwards = [w for w in commands("top") if w[:2] == ["kubectl", "-n"]]
    assert [w[1:5] for w in forwards] == [
        ["-n", call.namespace, "port-forward", f"pod/{sts['metadata']['name']}-{i}"] for i in range(3)
    ]
    [pods] = commands("pods")
    assert pods[pods.index("-n") + 1] == call.namespace
    assert f"app.kubernetes.io/instance={call.release}" in pods


# -- the image -------------------------------------------------------------------------------------


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, argument) in order, continuations joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, arg = line.partition(" ")
            out.append((word.upper(), arg.strip()))
    return out


def final_stage(instructions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    last_from = max(i for i, (word, _) in enumerate(instructions) if word == "FROM")
    return instructions[last_from:]


def stages(instructions: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The instructions split at each FROM."""
    out: list[list[tuple[str, str]]] = []
    for word, arg in instructions:
        if word == "FROM":
            out.append([])
        out[-1].append((word, arg))
    return out


def test_the_dockerfile_compiles_tuplemesh_from_its_sdist_and_keeps_the_worker_command(project: Path):
    tuplemesh_image = final_stage(dockerfile_instructions((ROOT / "deploy" / "Dockerfile").read_text()))
    [build, image] = stages(dockerfile_instructions(files()["Dockerfile"]))
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    meta = tomllib.loads(files()["pyproject.toml"])["project"]

    # the tutorial's commands make exactly the two files the Dockerfile copies
    sdist = f"tuplemesh-{version}.tar.gz"  # what `python -m build --sdist` names tuplemesh's
    wheel = f"{meta['name']}-{meta['version']}-py3-none-any.whl"  # what `pip wheel` names the user's
    build_sdist = ["python", "-m", "build", "--sdist", "--outdir", "dist", CHECKOUT]
    assert the_command("image", "python") == build_sdist
    assert the_command("image", "pip", "wheel") == ["pip", "wheel", "--no-deps", "-w", "dist", "."]
    # and the project depends on that very tuplemesh
    assert meta["dependencies"] == [f"tuplemesh=={version}"]

    # the build stage: the full Python image (a C compiler for mypyc) makes the wheels
    assert build[0] == ("FROM", "python:3.11 AS build")
    assert ("COPY", f"dist/{sdist} dist/{wheel} /dist/") in build
    [wheels] = [arg for word, arg in build if word == "RUN"]
    assert shlex.split(wheels) == [
        "pip", "wheel", "--no-cache-dir", "--wheel-dir", "/wheels", f"/dist/{sdist}[zmq]", f"/dist/{wheel}",
    ]  # fmt: skip

    # the image: tuplemesh's own base, only those wheels (no index), the `tuplemesh` entrypoint
    assert image[0] == tuplemesh_image[0]
    assert image[0][1].startswith("python:3.11-slim")
    pip_install = next(arg for word, arg in image if word == "RUN" and "pip install" in arg)
    assert pip_install.startswith("--mount=type=bind,from=build,source=/wheels,target=/wheels ")
    assert "--no-index --find-links /wheels" in pip_install
    assert shlex.split(pip_install)[-2:] == ["tuplemesh[zmq]", meta["name"]]
    assert ("ENTRYPOINT", '["tuplemesh"]') in image
    assert ("ENTRYPOINT", '["tuplemesh"]') in tuplemesh_image

    # it ends as the user the chart runs as, as tuplemesh's own image does
    image_user = [arg for word, arg in image if word == "USER"][-1]
    assert image_user == [arg for word, arg in tuplemesh_image if word == "USER"][-1]
    chart_values = yaml.safe_load((ROOT / "deploy" / "helm" / "tuplemesh" / "values.yaml").read_text())
    pod = chart_values["podSecurityContext"]
    assert image_user == f"{pod['runAsUser']}:{pod['runAsGroup']}"

    # CMD is the chart's args: the container runs `tuplemesh worker TARGET`, as `tuplemesh run` does
    cmd = json.loads(dict(image)["CMD"])
    assert cmd == worker_container(render(install(project)))["args"]


# -- the rendered container, run ------------------------------------------------------------------


def container_env(
    container: dict[str, Any], index: int, namespace: str, config_file: Path, port: int
) -> dict[str, str]:
    """The container's env as the kubelet resolves it for pod ``index``, with the two things a
    pod has of its own moved onto this host: the mounted config file, and a port per worker
    (pods each have an IP; here they share 127.0.0.1)."""
    field_values = {
        "metadata.labels['apps.kubernetes.io/pod-index']": str(index),
        "metadata.namespace": namespace,
    }
    env: dict[str, str] = {}
    for var in container["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            env[var["name"]] = field_values[var["valueFrom"]["fieldRef"]["fieldPath"]]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts[env["TUPLEMESH_CONFIG"]]["subPath"] == "tuplemesh.yaml"
    env["TUPLEMESH_CONFIG"] = str(config_file)
    assert env["TUPLEMESH_PORT"] == str(container["ports"][0]["containerPort"])
    env["TUPLEMESH_PORT"] = str(port)
    return env


def health(address: str, service: str = "") -> bool:
    try:
        with grpc.insecure_channel(address) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=1
            )
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)
    except grpc.RpcError:
        return False


@pytest.fixture
def rendered_workers(project: Path, tmp_path: Path) -> Iterator[tuple[dict[str, Any], list[int], list[int]]]:
    """The install's StatefulSet container, run as its 3 pods would run it: (container, transfer
    ports, metrics ports)."""
    call = install(project)
    manifests = render(call)
    [sts] = manifests["StatefulSet"]
    container = worker_container(manifests)
    workers = sts["spec"]["replicas"]
    config_map = next(c for c in manifests["ConfigMap"] if "tuplemesh.yaml" in c["data"])
    config_file = tmp_path / "tuplemesh.yaml"
    config_file.write_text(config_map["data"]["tuplemesh.yaml"])
    api_port, *ports = free_ports(1 + 2 * workers)
    transfer, metrics = ports[:workers], ports[workers:]
    apiserver = FakeApiServer(api_port)
    apiserver.up()
    kubeconfig = apiserver.kubeconfig(tmp_path / "kubeconfig")
    # the workers take their count from the StatefulSet, as in the cluster
    apiserver.put({**sts, "metadata": {**sts["metadata"], "namespace": call.namespace}})
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i in range(workers):
            env = container_env(container, i, call.namespace, config_file, transfer[i])
            service = env["TUPLEMESH_DISCOVERY_SERVICE"]
            pod = f"{sts['metadata']['name']}-{i}"
            apiserver.put(
                endpoint_slice(f"{service}-{i}", service, [(pod, "127.0.0.1", True)], port=transfer[i])
            )
            assert "PYTHONPATH" not in env, "the image's own packages, not a mounted source"
            env = {
                **user_env(project),
                **env,
                "KUBECONFIG": str(kubeconfig),  # in a pod: the service account
                "TUPLEMESH_METRICS_PORT": str(metrics[i]),  # in a pod: 9100 on its own IP
            }
            # ENTRYPOINT ["tuplemesh"] + the rendered args, from a directory without the project
            argv = executable(["tuplemesh", *container["args"]])
            procs.append(subprocess.Popen(argv, cwd=tmp_path, env=env))
        yield container, transfer, metrics
    finally:
        stop(procs)
        apiserver.down()


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM (drain), then, for a worker still draining its endless stream, the second SIGTERM
    that exits at once: this test is about starting and serving, not draining."""
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_the_rendered_container_command_serves_and_top_and_prometheus_see_it(
    project: Path, rendered_workers: tuple[dict[str, Any], list[int], list[int]]
):
    container, transfer, metrics = rendered_workers
    liveness = container["livenessProbe"]["grpc"]["service"]
    for port in transfer:
        eventually(lambda p=port: health(f"127.0.0.1:{p}", liveness), timeout=60, interval=0.1,
                   message=f"worker on {port} alive (the liveness probe)")  # fmt: skip
    for port in transfer:
        # readiness: SERVING once every peer, found through the EndpointSlices, is connected
        eventually(lambda p=port: health(f"127.0.0.1:{p}"), timeout=60, interval=0.1,
                   message=f"worker on {port} ready (the readiness probe)")  # fmt: skip

    # `tuplemesh top` as the tutorial runs it, through the forwarded ports (here: the real ones)
    top = the_command("top", "tuplemesh")
    forwarded = [f"127.0.0.1:{6700 + i}" for i in range(len(transfer))]
    assert top[top.index("--target") + 1] == ",".join(forwarded)
    top[top.index("--target") + 1] = ",".join(f"127.0.0.1:{p}" for p in transfer)
    out = run([*top, "--once"], project, timeout=60)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    for component in ("posts", "hashtags", "counts"):
        assert component in out.stdout, out.stdout

    # every metric the tutorial's Prometheus queries name is exported, and tuples are flowing
    queries = next(b.body for b in blocks() if b.lang == "text" and "tuplemesh_" in b.body)
    names = set(re.findall(r"tuplemesh_\w+", queries))
    assert names

    def flowing() -> str:
        """Worker 0's /metrics once it has executed tuples, else ''."""
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics[0]}/metrics", timeout=5) as reply:
            text: str = reply.read().decode()
        return text if re.search(r"tuplemesh_tuples_executed_total\{[^}]*\} [1-9]", text) else ""

    text = eventually(flowing, timeout=30, interval=0.2, message="tuples executed on worker 0")
    for name in names:
        assert f"\n{name}" in text, name
