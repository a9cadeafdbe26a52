"""The wheel installs and runs on its own: built from the checkout, installed into a fresh
virtual environment, and run from a directory outside the checkout with no path to its sources."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tuplemesh._compiled import COMPILED_MODULES, PURE_PYTHON_ENV

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

#: what the build copy leaves out: local environments, caches and earlier build output
NOT_SOURCES = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis")
#: and the extension modules built in place (pip compiles its own, or none for a pure build)
NOT_SOURCES += ("*.so",)

#: building, a fresh venv and its dependencies (from pip's cache when warm), then the runs
pytestmark = pytest.mark.timeout(900)

#: a user's topology: numbers through a squaring bolt into one summing task, checked exactly
TOPOLOGY = """
from tuplemesh.topology import BasicBolt, Bolt, Spout, TopologyBuilder

N = 500


class Numbers(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(["n"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.mine = iter(range(context.task_index, N, len(context.component_tasks)))
        self.done = False

    def next_tuple(self):
        n = next(self.mine, None)
        if n is None:
            self.done = True
        else:
            self.collector.emit([n])

    def is_finished(self):
        return self.done


class Square(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["square"])

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.emit([tup.values[0] ** 2])


class Total(Bolt):
    def prepare(self, conf, context, collector):
        self.total = 0
        self.seen = 0

    def execute(self, tup):
        self.total += tup.values[0]
        self.seen += 1

    def report(self):
        return {"total": self.total, "seen": self.seen}


def check(reports):
    [got] = reports["total"]
    want = {"total": sum(n * n for n in range(N)), "seen": N}
    return got == want, f"got {got}, want {want}"


builder = TopologyBuilder("squares")
builder.set_spout("numbers", Numbers(), parallelism=2)
builder.set_bolt("square", Square(), parallelism=2).shuffle_grouping("numbers")
builder.set_bolt("total", Total()).global_grouping("square")
topology = builder.build(check=check)
"""


@dataclass
class Installed:
    venv: Path
    workdir: Path  # outside the checkout, holding the user's topology module
    env: dict[str, str]  # no PYTHONPATH: only what the wheel installed is importable

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, cwd=self.workdir, env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def tuplemesh(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.venv / "bin" / "tuplemesh"), *args, timeout=timeout)

    def python(self, code: str) -> str:
        out = self.run(str(self.venv / "bin" / "python"), "-c", code)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()


def _checked(out: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert out.returncode == 0, (
        f"{out.args}: exit {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    )
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("wheel")
    assert not base.is_relative_to(ROOT)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    dist, venv, workdir = base / "dist", base / "venv", base / "work"
    workdir.mkdir()
    pip = ("-m", "pip", "--disable-pip-version-check", "--quiet")
    # build from a copy: a build/ left in the checkout would put stale modules into the wheel
    source = base / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCES))
    _checked(subprocess.run([sys.executable, *pip, "wheel", "--no-deps", "-w", str(dist), str(source)],
                            env=env, capture_output=True, text=True, timeout=300))  # fmt: skip
    [wheel] = dist.glob("tuplemesh-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        modules = sorted(n for n in archive.namelist() if n.startswith("tuplemesh/") and n.endswith(".py"))
    package = ROOT / "services"
    assert modules == sorted(str(p.relative_to(package)) for p in (package / "tuplemesh").rglob("*.py"))
    _checked(
        subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=120)
    )
    # the runtime dependencies first, from the same list the wheel declares (pip's cache makes this quick)
    _checked(subprocess.run([str(venv / "bin" / "python"), *pip, "install", *PROJECT["dependencies"]],
                            env=env, capture_output=True, text=True, timeout=600))  # fmt: skip
    _checked(subprocess.run([str(venv / "bin" / "python"), *pip, "install", str(wheel)],
                            env=env, capture_output=True, text=True, timeout=120))  # fmt: skip
    (workdir / "mytopo.py").write_text(textwrap.dedent(TOPOLOGY))
    yield Installed(venv, workdir, env)


def test_the_installed_package_is_the_wheel_with_its_protos_and_license(installed: Installed):
    where = Path(installed.python("import tuplemesh; print(tuplemesh.__file__)")).parent
    assert where.is_relative_to(installed.venv)  # not the checkout's sources
    protos = sorted(str(p.relative_to(where / "protos")) for p in (where / "protos").rglob("*.proto"))
    assert protos == [f"tuplemesh/v1/{name}.proto" for name in ("admin", "gateway", "messages", "transfer")]
    for name in protos:
        assert (where / "protos" / name).read_text() == (ROOT / "protos" / name).read_text()
    [license_file] = where.parent.glob("tuplemesh-*.dist-info/licenses/LICENSE")
    assert license_file.read_text() == (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_file.read_text()
    # grpcio-tools is for generating code only: not installed, and nothing asked for it
    assert installed.python("import importlib.util; print(importlib.util.find_spec('grpc_tools'))") == "None"


def test_help_and_version(installed: Installed):
    help_text = _checked(installed.tuplemesh("--help")).stdout
    assert help_text.startswith("usage: tuplemesh")
    for command in ("run", "worker", "top", "config"):
        assert command in help_text
    # pip builds the wheel from source: the hot path compiled, unless this run is the pure-Python one
    compiled = f"compiled: {len(COMPILED_MODULES)} modules"
    build = "pure Python" if os.environ.get(PURE_PYTHON_ENV) else compiled
    version = _checked(installed.tuplemesh("--version")).stdout.strip()
    assert version == f"tuplemesh {PROJECT['version']} ({build})"


def test_run_a_user_topology_in_process(installed: Installed):
    out = _checked(installed.tuplemesh("run", "mytopo:topology", "--transport", "local", "--workers", "2"))
    assert "over local" in out.stdout
    assert "RESULT OK: got {'total': 41541750, 'seen': 500}" in out.stdout


def test_run_a_user_topology_on_two_worker_processes_over_grpc(installed: Installed):
    out = _checked(installed.tuplemesh("run", "mytopo:topology", "--workers", "2", "--json", timeout=180))
    summary = json.loads(out.stdout)
    assert (summary["transport"], summary["workers"]) == ("grpc", 2)
    assert summary["completed"] is True and summary["matched"] is True
    assert summary["components"]["total"]["executed"] == 500
    assert summary["transfer"]["lost"] == 0
