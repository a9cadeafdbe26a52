"""The hot modules run compiled by mypyc, or from their .py sources with TUPLEMESH_PURE_PYTHON=1;
the built extension modules are never older than the sources they were compiled from."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import child_pythonpath
from tests.pure_pass import PURE_PASS, pure_test_files
from tuplemesh._compiled import COMPILED_MODULES, GROUP_NAME, PURE_PYTHON_ENV

ROOT = Path(__file__).resolve().parents[1]
SOURCE_ROOT = ROOT / "services"

#: Imports every listed module in a fresh interpreter and prints where each came from.
REPORT = (
    "import importlib, json, sys, tuplemesh; from tuplemesh._compiled import COMPILED_MODULES; "
    "print(json.dumps({'files': [importlib.import_module(m).__file__ for m in COMPILED_MODULES], "
    "'compiled': tuplemesh.compiled_modules()}))"
)


def _run(pure: bool, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != PURE_PYTHON_ENV}
    env["PYTHONPATH"] = child_pythonpath()  # this checkout's sources and extension modules
    if pure:
        env[PURE_PYTHON_ENV] = "1"
    out = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out


def _extension(module: str) -> Path | None:
    """The in-place extension module built for ``module``, if there is one."""
    base = SOURCE_ROOT / module.replace(".", "/")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if base.with_name(base.name + suffix).exists():
            return base.with_name(base.name + suffix)
    return None


def test_every_compiled_module_has_tests_in_the_pure_python_pass():
    # `make test-pure` runs only these again without the compiled modules
    untested = [module for module in COMPILED_MODULES if not PURE_PASS.get(module)]
    assert not untested, f"compiled modules with no test in tests/pure_pass.py: {untested}"
    assert sorted(PURE_PASS) == sorted(COMPILED_MODULES), (
        "tests/pure_pass.py lists a module that is not compiled"
    )
    missing = [path for path in pure_test_files() if not (ROOT / path).is_file()]
    assert not missing, f"tests/pure_pass.py names test files that do not exist: {missing}"


def test_make_test_pure_runs_exactly_the_pure_pass_list():
    dry_run = subprocess.run(
        ["make", "-n", "-C", str(ROOT), f"PYTHON={sys.executable}", "test-pure"],
        env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL")},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert dry_run.returncode == 0, dry_run.stderr
    [pytest_line] = [line for line in dry_run.stdout.splitlines() if "/pytest " in line]
    assert pytest_line.startswith(f"{PURE_PYTHON_ENV}=1 ")
    assert pytest_line.split()[-len(pure_test_files()) :] == pure_test_files()


def test_compiled_modules_are_not_older_than_their_sources():
    # a module's extension is a shim; its code is in the group's shared library
    shared = _extension(GROUP_NAME + "__mypyc")
    stale = [
        module
        for module in COMPILED_MODULES
        if (ext := _extension(module)) is not None
        and min(ext.stat().st_mtime, shared.stat().st_mtime if shared else 0)
        < (SOURCE_ROOT / (module.replace(".", "/") + ".py")).stat().st_mtime
    ]
    assert not stale, f"compiled modules older than their .py sources: {stale}; run make to rebuild them"


def test_by_default_every_listed_module_is_the_compiled_one():
    report = json.loads(_run(False, "-c", REPORT).stdout)
    assert [Path(f).suffix for f in report["files"]] == [".so"] * len(COMPILED_MODULES)
    assert report["compiled"] == list(COMPILED_MODULES)
    version = _run(False, "-m", "tuplemesh.cli", "--version").stdout
    assert version.strip().endswith(f"(compiled: {len(COMPILED_MODULES)} modules)")


def test_pure_python_at_run_time_imports_the_sources_beside_the_extension_modules():
    report = json.loads(_run(True, "-c", REPORT).stdout)
    assert report["files"] == [
        str(SOURCE_ROOT / (module.replace(".", "/") + ".py")) for module in COMPILED_MODULES
    ]
    assert report["compiled"] == []
    assert _run(True, "-m", "tuplemesh.cli", "--version").stdout.strip().endswith("(pure Python)")


def test_pure_python_reaches_worker_processes_through_the_environment():
    # a process started by a pure-Python one (as a worker is, with sys.executable) stays pure
    child = f"import subprocess, sys; sys.exit(subprocess.run([sys.executable, '-c', {REPORT!r}]).returncode)"
    report = json.loads(_run(True, "-c", child).stdout)
    assert report["compiled"] == [] and all(f.endswith(".py") for f in report["files"])


def test_the_bench_runner_compares_compiled_with_pure_python_in_one_run(tmp_path):
    from bench.modes import PURE

    args = ("-m", "bench", "hotpath", "--quick", "--json", "--pure-vs-compiled", "1")
    out = _run(False, *args, "--output", str(tmp_path / "r.json"))
    records = json.loads(out.stdout.splitlines()[-1])
    # emit, emit_many and emit_columns, local and remote; emit_columns fields-grouped
    assert [r["part"] for r in records] == ["hotpath compiled"] * 7
    for record in records:
        [baseline] = record["baselines"]
        assert baseline["name"] == PURE
        ratio = record["tuples_per_second"] / baseline["tuples_per_second"]
        # the record rounds the ratio to 3 decimals (and the rates to 0.1): compare to that precision
        assert baseline["ratio"] == pytest.approx(ratio, abs=1e-3)
