"""`make run` works on a fresh checkout with the machine's own python3: it makes the venv, installs the
runtime and what compiling needs (a venv's own setuptools is too old, or absent on 3.12+), compiles
the hot path and runs the example on worker processes that load the compiled modules. It installs no
test, lint, code-generation or Spark tooling (the dev extra is over a gigabyte)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.packaging import early
from tests.packaging.test_wheel import NOT_SOURCES, ROOT
from tuplemesh._compiled import COMPILED_MODULES, GROUP_NAME, PURE_PYTHON_ENV

#: a fresh venv, the runtime and build dependencies (from pip's cache when warm), mypyc, two runs
pytestmark = pytest.mark.timeout(1200)

DEV_ONLY = ("pytest", "ruff", "grpcio-tools", "pyspark", "pyarrow", "hypothesis", "helm-python-sdk")
WORKERS = 3  # what the run target asks for


def _normalized(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _make_run(source: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # the interpreter running this test plays the machine's python3
    return early.run(["make", "-C", str(source), f"PYTHON={sys.executable}", "run"], env=env, timeout=1100)


@dataclass
class FirstRun:
    source: Path
    env: dict[str, str]
    first: subprocess.CompletedProcess[str]


def first_make_run(tmp_path: Path) -> FirstRun:
    """`make run` on a fresh copy of the checkout (run early: tests/packaging/early.py)."""
    source = tmp_path / "checkout"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(*NOT_SOURCES))
    unwanted = ("PYTHONPATH", "VIRTUAL_ENV", "MAKEFLAGS", "MAKELEVEL", PURE_PYTHON_ENV)
    env = {k: v for k, v in os.environ.items() if k not in unwanted}
    return FirstRun(source, env, _make_run(source, env))


FIRST_RUN = early.Build("make-run", first_make_run)


def test_make_run_on_a_fresh_checkout_compiles_and_runs_the_example():
    made = FIRST_RUN.result()
    source, env, first = made.source, made.env, made.first
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "RESULT OK: 66 distinct words, 356000 in total: all counts exact" in first.stdout
    assert "setup.py --quiet build_ext --inplace" in first.stdout  # it compiled on the way

    venv = source / ".venv"
    version = subprocess.run([str(venv / "bin" / "tuplemesh"), "--version"],
                             cwd=source, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip().endswith(f"(compiled: {len(COMPILED_MODULES)} modules)")

    listed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"],
                            capture_output=True, text=True, check=True, env=env)  # fmt: skip
    installed = {_normalized(p["name"]) for p in json.loads(listed.stdout)}
    dev_tools = installed & set(DEV_ONLY)
    assert not dev_tools, f"dev tools installed by the run target: {sorted(dev_tools)}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"]:
        name = _normalized(re.split(r"[<>=\[;~ ]", requirement, maxsplit=1)[0])
        assert name in installed, f"runtime dependency {name} missing"

    # Again, now that everything is built (make only runs the example), with every process saying
    # where each module came from: the CLI and its WORKERS worker processes load the compiled group,
    # and no process imports the .py source of a compiled module.
    second = _make_run(source, {**env, "PYTHONVERBOSE": "1"})
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "RESULT OK" in second.stdout
    assert "setup.py" not in second.stdout  # nothing to rebuild
    # (not to the end of the line: the processes share one stderr, and their lines can interleave)
    loaded = re.findall(
        rf"# extension module '{re.escape(GROUP_NAME)}__mypyc' loaded from '([^']+)'", second.stderr
    )
    assert len(loaded) == 1 + WORKERS, f"the compiled group loaded by {len(loaded)} processes"
    assert all(Path(path).is_relative_to(source / "services") for path in loaded)
    # (an import from a .py or its .pyc goes through the SourceFileLoader)
    from_source = [
        m
        for m in COMPILED_MODULES
        if f"import {m!r} # <_frozen_importlib_external.SourceFileLoader" in second.stderr
    ]
    assert not from_source, f"compiled modules imported from their sources: {from_source}"
