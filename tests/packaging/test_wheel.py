"""The release installs and runs on its own, built as a user builds it in a fresh venv: the sdist
(`python -m build --sdist`) carries what the build needs, and the wheel `pip wheel` builds from it
(with build isolation, as pip does for any sdist) has the hot path compiled for this CPython; it is
installed into that venv and run from a directory outside the checkout with no path to its
sources. (A wheel built straight from the tree is the image's path: tests/packaging/test_dockerfile.py.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.packaging import early
from tuplemesh._compiled import COMPILED_MODULES, GROUP_NAME, PURE_PYTHON_ENV

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

#: what the build copy leaves out: local environments, caches and earlier build output
NOT_SOURCES = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis")
#: and the extension modules built in place (pip compiles its own, or none for a pure build)
NOT_SOURCES += ("*.so",)

#: building, a fresh venv and its dependencies (from pip's cache when warm), then the runs
pytestmark = pytest.mark.timeout(900)

#: the wheel's tag for this interpreter: CPython, its ABI, this platform (never py3-none-any)
CPYTHON_TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"

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
    wheel: Path
    sdist: Path

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


def clean_env() -> dict[str, str]:
    """This environment minus what would let a build or a run see the checkout or this venv; and
    minus TUPLEMESH_PURE_PYTHON: every build here is the default, compiled one."""
    unwanted = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", PURE_PYTHON_ENV)
    return {k: v for k, v in os.environ.items() if k not in unwanted}


def source_copy(destination: Path) -> Path:
    """The checkout's sources (a build/ left in the checkout would put stale modules into a wheel)."""
    shutil.copytree(ROOT, destination, symlinks=True, ignore=shutil.ignore_patterns(*NOT_SOURCES))
    return destination


def fresh_venv(path: Path) -> Path:
    """A venv made by this interpreter, as `python3 -m venv` makes one: its own pip, nothing else."""
    _checked(early.run([sys.executable, "-m", "venv", str(path)], timeout=120))
    return path / "bin" / "python"


def pip(python: Path, *args: str, cwd: Path | None = None, timeout: float = 600) -> None:
    _checked(
        early.run(
            [str(python), "-m", "pip", "--disable-pip-version-check", "--quiet", *args],
            cwd=cwd, env=clean_env(), timeout=timeout,
        )
    )  # fmt: skip


def assert_compiled_wheel(wheel: Path) -> None:
    """A CPython wheel for this platform holding every compiled module's extension beside its source."""
    name, version, python_tag, abi_tag, platform_tag = wheel.name.removesuffix(".whl").split("-")
    assert (name, version) == ("tuplemesh", PROJECT["version"])
    assert (python_tag, abi_tag) == (CPYTHON_TAG, CPYTHON_TAG), wheel.name
    assert platform_tag != "any" and platform_tag.startswith("linux_") == sys.platform.startswith("linux")
    suffix = f".cpython-{CPYTHON_TAG[2:]}-"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    extensions = sorted(n.split(".")[0].replace("/", ".") for n in names if n.endswith(".so"))
    assert all(suffix in n for n in names if n.endswith(".so"))
    assert extensions == sorted([*COMPILED_MODULES, GROUP_NAME + "__mypyc"])
    for module in COMPILED_MODULES:  # the sources stay, for TUPLEMESH_PURE_PYTHON=1
        assert module.replace(".", "/") + ".py" in names


def build_and_install_the_wheel(base: Path) -> Installed:
    """The sdist, the wheel pip builds from it, a venv it is installed in (run early: early.py)."""
    assert not base.is_relative_to(ROOT)
    dist, workdir = base / "dist", base / "work"
    workdir.mkdir()
    source = source_copy(base / "source")
    python = fresh_venv(base / "venv")
    pip(python, "install", "build")  # the PyPA front end a user makes an sdist with
    build = [str(python), "-m", "build", "--sdist", "--outdir", str(base / "sdist"), str(source)]
    _checked(early.run(build, env=clean_env(), timeout=600))
    [sdist] = (base / "sdist").glob("tuplemesh-*.tar.gz")
    pip(python, "wheel", "--no-deps", "-w", str(dist), str(sdist))
    [wheel] = dist.glob("tuplemesh-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        modules = sorted(n for n in archive.namelist() if n.startswith("tuplemesh/") and n.endswith(".py"))
    package = ROOT / "services"
    assert modules == sorted(str(p.relative_to(package)) for p in (package / "tuplemesh").rglob("*.py"))
    # the runtime dependencies first, from the same list the wheel declares (pip's cache makes this quick)
    pip(python, "install", *PROJECT["dependencies"])
    pip(python, "install", str(wheel))
    (workdir / "mytopo.py").write_text(textwrap.dedent(TOPOLOGY))
    return Installed(base / "venv", workdir, clean_env(), wheel, sdist)


WHEEL = early.Build("wheel", build_and_install_the_wheel)


@pytest.fixture(scope="module")
def installed() -> Installed:
    return WHEEL.result()


def test_the_wheel_is_compiled_for_this_cpython(installed: Installed):
    assert_compiled_wheel(installed.wheel)
    report = installed.python(
        "import json, tuplemesh; from tuplemesh._compiled import COMPILED_MODULES; "
        "print(json.dumps({'compiled': tuplemesh.compiled_modules(), 'all': list(COMPILED_MODULES)}))"
    )
    compiled = json.loads(report)
    assert compiled["compiled"] == compiled["all"] == list(COMPILED_MODULES)


def test_the_installed_package_is_the_wheel_with_its_protos_and_license(installed: Installed):
    where = Path(installed.python("import tuplemesh; print(tuplemesh.__file__)")).parent
    assert where.is_relative_to(installed.venv)  # not the checkout's sources
    protos = sorted(str(p.relative_to(where / "protos")) for p in (where / "protos").rglob("*.proto"))
    assert protos == [
        "tuplemesh/hotkeys/v1/hotkeys.proto",
        *(f"tuplemesh/v1/{name}.proto" for name in ("admin", "gateway", "messages", "transfer")),
    ]
    for name in protos:
        assert (where / "protos" / name).read_text() == (ROOT / "protos" / name).read_text()
    # the web UI's page, script and style (served from the package by every worker), and the
    # script and style of the hot keys' panel on it, from the feature's own package
    for package, names in (
        ("ui", ["app.css", "app.js", "index.html"]),
        ("hotkeys", ["panel.css", "panel.js"]),
    ):
        static = ROOT / "services" / "tuplemesh" / package / "static"
        assert sorted(p.name for p in (where / package / "static").iterdir()) == names
        for name in names:
            assert (where / package / "static" / name).read_bytes() == (static / name).read_bytes()
    # the feature's own generated code, declaring the call it adds to Admin
    assert (
        installed.python(
            "from tuplemesh.hotkeys.v1 import hotkeys_pb2; "
            "print(hotkeys_pb2.DESCRIPTOR.services_by_name['Admin'].methods_by_name['HotKeys'].full_name)"
        )
        == "tuplemesh.hotkeys.v1.Admin.HotKeys"
    )
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
    version = _checked(installed.tuplemesh("--version")).stdout.strip()
    assert version == f"tuplemesh {PROJECT['version']} (compiled: {len(COMPILED_MODULES)} modules)"


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


def test_the_sdist_carries_the_build_and_no_build_output(installed: Installed):
    top = f"tuplemesh-{PROJECT['version']}"
    with tarfile.open(installed.sdist) as archive:
        names = {n.removeprefix(top + "/") for n in archive.getnames()}
    for needed in ("setup.py", "pyproject.toml", "LICENSE", "README.md", "services/tuplemesh/_compiled.py"):
        assert needed in names, f"{needed} missing from the sdist"
    protos = {
        f"services/tuplemesh/protos/tuplemesh/v1/{n}.proto"
        for n in ("admin", "gateway", "messages", "transfer")
    }
    assert protos <= names
    assert not [n for n in names if n.endswith((".so", ".c"))]  # mypyc's output is built, never shipped
