"""``tuplemesh new NAME`` as a user runs it: the real command writes the project, whose own tests
then pass under pytest, whose topology runs to RESULT OK on the local transport and on gRPC worker
processes, and whose dependencies pip resolves without any package index."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.helpers import child_pythonpath, run_cli
from tuplemesh import build_info
from tuplemesh.scaffold import FILES

#: what the generated topology's check prints: 2 spout tasks x 1000 posts
RESULT = "RESULT OK: 6 hashtags, 3600 in total: every count exact"


def tuplemesh(*args: str, cwd: Path, pythonpath: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, env={"PYTHONPATH": pythonpath} if pythonpath else None)


def _without(*names: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in names}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    parent = tmp_path_factory.mktemp("projects")
    out = tuplemesh("new", "demo", cwd=parent)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    return parent / "demo"


def project_pythonpath(project: Path) -> str:
    """What the project's venv provides after `pip install -e .`: its package and tuplemesh."""
    return os.pathsep.join([str(project), child_pythonpath()])


def test_new_writes_the_project_files(demo: Path):
    written = sorted(str(p.relative_to(demo)) for p in demo.rglob("*") if p.is_file())
    assert written == sorted(path.format(name="demo") for _, path in FILES)
    assert written == sorted(
        [
            "pyproject.toml",
            "README.md",
            "Dockerfile",
            "deploy/values.yaml",
            "demo/__init__.py",
            "demo/topology.py",
            "tests/test_topology.py",
        ]
    )
    meta = tomllib.loads((demo / "pyproject.toml").read_text())
    assert meta["project"]["name"] == "demo"
    assert meta["project"]["dependencies"] == [f"tuplemesh=={build_info.version()}"]
    assert meta["tool"]["setuptools"]["packages"] == ["demo"]
    topology = (demo / "demo" / "topology.py").read_text()
    assert 'POSTS_KEY = "demo.posts"' in topology
    assert 'TopologyBuilder("demo")' in topology
    dockerfile = (demo / "Dockerfile").read_text()
    assert f"COPY dist/tuplemesh-{build_info.version()}.tar.gz dist/demo-1.0.0-py3-none-any.whl /dist/" in (
        dockerfile
    )
    assert 'CMD ["worker", "demo.topology:topology"]' in dockerfile
    assert "${" not in "".join(p.read_text() for p in demo.rglob("*") if p.is_file())


def test_the_projects_tests_pass(demo: Path):
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=demo,
        # the generated project's own pytest settings only (an outer PYTEST_ADDOPTS, say -v,
        # would change the summary line this test reads)
        env={**_without("PYTEST_ADDOPTS"), "PYTHONPATH": project_pythonpath(demo)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert re.search(r"^3 passed\b", out.stdout.splitlines()[-1]), out.stdout[-2000:]


@pytest.mark.parametrize(
    ("flags", "header"),
    [
        (["--transport", "local"], "topology demo on 1 worker(s) over local"),
        (["--workers", "2"], "topology demo on 2 worker(s) over grpc"),
    ],
)
def test_the_projects_topology_runs_to_result_ok(demo: Path, flags: list[str], header: str):
    out = tuplemesh(
        "run", "demo.topology:topology", "--quiet", *flags, cwd=demo, pythonpath=project_pythonpath(demo)
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith(header + ":"), out.stdout
    assert RESULT in lines, out.stdout


def test_pip_installs_the_project_against_the_installed_tuplemesh_without_an_index(demo: Path):
    """The pinned tuplemesh is the one installed from the checkout: pip asks no index for it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env |= {"PIP_CONFIG_FILE": os.devnull, "PYTHONPATH": child_pythonpath()}
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--no-build-isolation",
         "-e", ".[test]"],
        cwd=demo, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.splitlines()[-1] == "Would install demo-1.0.0", out.stdout[-2000:]


def test_new_refuses_an_existing_path(demo: Path):
    before = {p: p.read_bytes() for p in demo.rglob("*") if p.is_file()}
    out = tuplemesh("new", "demo", cwd=demo.parent)
    assert out.returncode == 2
    assert out.stderr == f"tuplemesh: error: {demo} already exists: choose another name or remove it\n"
    assert out.stdout == ""
    assert {p: p.read_bytes() for p in demo.rglob("*") if p.is_file()} == before


def test_a_name_with_underscores_is_the_package_and_with_hyphens_the_release_and_image(tmp_path: Path):
    out = tuplemesh("new", "hot_tags", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    project = tmp_path / "hot_tags"
    assert (project / "hot_tags" / "topology.py").is_file()
    readme = (project / "README.md").read_text()
    # Kubernetes names (the Helm release) allow no underscores
    assert "helm install hot-tags ../tuplemesh/deploy/helm/tuplemesh" in readme
    assert "--set image.repository=registry.example.com/hot-tags" in readme
    assert "--set topology.target=hot_tags.topology:topology" in readme
    assert "docker build -t registry.example.com/hot-tags:1.0.0 ." in readme
    assert tomllib.loads((project / "pyproject.toml").read_text())["project"]["name"] == "hot_tags"


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("My-Project", "is not a valid Python package name"),
        ("2fast", "is not a valid Python package name"),
        ("ends_", "is not a valid Python package name"),
        ("class", "is a Python keyword"),
        ("json", "is a standard library module"),
        ("tuplemesh", "is taken by tuplemesh itself"),
    ],
)
def test_new_refuses_a_name_that_is_not_a_package_name(tmp_path: Path, name: str, why: str):
    out = tuplemesh("new", name, cwd=tmp_path)
    assert out.returncode == 2
    [line] = out.stderr.splitlines()
    assert line.startswith(f"tuplemesh: error: {name!r} {why}"), line
    assert list(tmp_path.iterdir()) == []
