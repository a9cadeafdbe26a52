"""setup.py builds the hot path compiled, or stops with one line naming the cause and the way to build
pure Python on purpose; it never quietly builds a package that runs several times slower."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.packaging.test_wheel import clean_env, source_copy
from tuplemesh._compiled import COMPILED_MODULES, PURE_PYTHON_ENV

#: mypy type-checks the package once per build that gets that far (the C compiler is never reached)
pytestmark = pytest.mark.timeout(300)

ON_PURPOSE = f"; to build pure Python on purpose, set {PURE_PYTHON_ENV}=1"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return source_copy(tmp_path_factory.mktemp("setup") / "source")


def _setup(source: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=source, env={**clean_env(), **(env or {})},
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip


def _extensions(source: Path) -> list[Path]:
    return sorted((source / "services").rglob("*.so"))


def test_without_mypyc_the_build_stops_naming_it(source: Path):
    # as if mypy were not installed: importing mypyc fails
    hide_mypyc = (
        "import runpy, sys; sys.modules['mypyc'] = None; sys.argv = ['setup.py', 'build_ext', '--inplace']; "
        "runpy.run_path('setup.py', run_name='__main__')"
    )
    out = _setup(source, "-c", hide_mypyc)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (
        "error: tuplemesh's hot modules cannot be compiled: mypyc is not installed "
        f"(pip install 'mypy>=1.10'){ON_PURPOSE}"
    )
    assert _extensions(source) == []


def test_without_a_c_compiler_the_build_stops_and_leaves_no_extension_behind(source: Path):
    out = _setup(source, "setup.py", "--quiet", "build_ext", "--inplace", "--force", env={"CC": "false"})
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "error: tuplemesh's hot modules cannot be compiled: compiling mypyc's C code failed ("
    )
    assert last.endswith(f"it needs a C compiler and the Python headers){ON_PURPOSE}")
    assert _extensions(source) == []


def test_a_type_error_in_a_compiled_module_stops_the_build(tmp_path: Path):
    broken = source_copy(tmp_path / "broken")
    module = broken / "services" / (COMPILED_MODULES[-1].replace(".", "/") + ".py")
    module.write_text(module.read_text() + "\n\nNOT_AN_INT: int = 'text'\n")
    out = _setup(broken, "setup.py", "--quiet", "build_ext", "--inplace")
    assert out.returncode == 1
    assert "Incompatible types in assignment" in out.stdout + out.stderr  # mypy's own report, above
    assert out.stderr.strip().splitlines()[-1] == (
        "error: tuplemesh's hot modules cannot be compiled: "
        f"mypy found errors (listed above, exit status 1){ON_PURPOSE}"
    )
    assert _extensions(broken) == []


def test_pure_python_on_purpose_builds_no_extension(source: Path):
    out = _setup(source, "setup.py", "--quiet", "build_ext", "--inplace", env={PURE_PYTHON_ENV: "1"})
    assert out.returncode == 0, out.stderr
    assert f"note: {PURE_PYTHON_ENV} is set: building tuplemesh as pure Python" in out.stderr
    assert _extensions(source) == []
