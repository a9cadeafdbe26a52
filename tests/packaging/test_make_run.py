"""`make run` installs the runtime only: a fresh checkout's first `make run` must not pull in the
test, lint, code-generation or Spark tooling (the dev extra is over a gigabyte)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.packaging.test_wheel import NOT_SOURCES, ROOT

#: a fresh venv and the runtime dependencies (from pip's cache when warm), then one run
pytestmark = pytest.mark.timeout(900)

DEV_ONLY = ("pytest", "ruff", "grpcio-tools", "pyspark", "pyarrow", "hypothesis", "helm-python-sdk")


def _normalized(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_run_target_installs_the_runtime_and_runs_the_example(tmp_path: Path):
    source = tmp_path / "checkout"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCES))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MAKEFLAGS")}
    # the install step `make run` depends on, with the interpreter running this test
    make = subprocess.run(
        ["make", "-C", str(source), f"PYTHON={sys.executable}", ".venv/.installed-runtime"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert make.returncode == 0, make.stdout[-2000:] + make.stderr[-2000:]
    python = source / ".venv" / "bin" / "python"
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=json"],
                            capture_output=True, text=True, check=True, env=env)  # fmt: skip
    installed = {_normalized(p["name"]) for p in json.loads(listed.stdout)}
    dev_tools = installed & set(DEV_ONLY)
    assert not dev_tools, f"dev tools installed by the run target: {sorted(dev_tools)}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"]:
        name = _normalized(re.split(r"[<>=\[;~ ]", requirement, maxsplit=1)[0])
        assert name in installed, f"runtime dependency {name} missing"
    # the example runs from that venv (pure Python here: compiling is the next make step)
    run = subprocess.run(
        [str(source / ".venv" / "bin" / "tuplemesh"), "run", "examples.wordcount:topology",
         "--transport", "local", "--workers", "2"],
        cwd=source, env={**env, "TUPLEMESH_PURE_PYTHON": "1"}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "RESULT OK" in run.stdout
