"""The image's build stage compiles the hot path. There is no Docker engine here, so this does what
the build stage does: the paths its COPY lines name (from the build context, .dockerignore applied)
into an empty directory, then the same `pip install` it runs; the installed package must be the
compiled one, with its protos, and run the example the final stage ships on worker processes."""

from __future__ import annotations

import fnmatch
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.packaging import early
from tests.packaging.test_wheel import ROOT, clean_env, fresh_venv, pip
from tuplemesh._compiled import COMPILED_MODULES

DOCKERFILE = ROOT / "deploy" / "Dockerfile"

#: a fresh venv, the compiled build and the dependencies (from pip's cache when warm), one run
pytestmark = pytest.mark.timeout(900)


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, argument) in order, continuations joined, comments dropped."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, arg = line.partition(" ")
            out.append((word.upper(), arg.strip()))
    return out


def stages(text: str) -> list[list[tuple[str, str]]]:
    """The instructions of each stage, each starting with its FROM."""
    out: list[list[tuple[str, str]]] = []
    for word, arg in instructions(text):
        if word == "FROM":
            out.append([])
        out[-1].append((word, arg))
    return out


def dockerignored(patterns: list[str]):
    """A copytree ignore function leaving out what .dockerignore keeps out of the build context."""

    def ignored(directory: str, names: list[str]) -> set[str]:
        relative = Path(directory).relative_to(ROOT)
        out = set()
        for name in names:
            path = str(relative / name) if str(relative) != "." else name
            for pattern in patterns:
                deep = pattern.removeprefix("**/")
                if fnmatch.fnmatch(path, pattern) or (
                    pattern.startswith("**/")
                    and (fnmatch.fnmatch(path, deep) or fnmatch.fnmatch(path, "*/" + deep))
                ):
                    out.add(name)
        return out

    return ignored


def copy_into(workdir: Path, copy_arg: str, ignore) -> None:
    """What `COPY <src>... <dest>` does, with dest relative to the stage's WORKDIR (``workdir``)."""
    *sources, destination = shlex.split(copy_arg)
    assert not destination.startswith("/") or destination.startswith("/src"), copy_arg
    target = workdir / destination.removeprefix("/src").lstrip("/")
    for source in sources:
        origin = ROOT / source
        if origin.is_dir():
            # a directory's contents go into dest; symlinks stay links, as COPY keeps them
            shutil.copytree(origin, target, symlinks=True, ignore=ignore, dirs_exist_ok=True)
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, target / origin.name)


@dataclass
class BuildStage:
    tmp_path: Path
    prefix: Path  # what the stage's pip installed into (its /install)
    final: list[tuple[str, str]]  # the final stage's instructions
    ignore: Callable[[str, list[str]], set[str]]


def run_the_build_stage(tmp_path: Path) -> BuildStage:
    """The build stage's COPY lines and its pip install (run early: tests/packaging/early.py)."""
    build, final = stages(DOCKERFILE.read_text())
    assert build[0][1].endswith(" AS build") and ("WORKDIR", "/src") in build
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    ignore = dockerignored(patterns)
    workdir = tmp_path / "src"
    workdir.mkdir()
    for word, arg in build:
        if word == "COPY":
            copy_into(workdir, arg, ignore)
    assert (workdir / "setup.py").is_file()  # without it pip would build the pure package
    assert not list(workdir.rglob("*.so"))  # nothing built in place reaches the image

    # the stage's pip command (it also installs a C compiler, which this machine has)
    [install] = [shlex.split(arg) for word, arg in build if word == "RUN" and arg.startswith("pip install")]
    assert install[:2] == ["pip", "install"] and "--prefix=/install" in install
    prefix = tmp_path / "install"
    # --no-cache-dir only changes where the bytes come from; pip's warm cache keeps this test quick
    args = [str(prefix) if a == "/install" else a.replace("=/install", f"={prefix}") for a in install[2:]]
    args.remove("--no-cache-dir")
    python = fresh_venv(tmp_path / "venv")  # the base image's Python: pip, and nothing else
    pip(python, "install", *args, cwd=workdir, timeout=800)
    return BuildStage(tmp_path, prefix, final, ignore)


BUILD_STAGE = early.Build("image", run_the_build_stage)


def test_the_image_build_stage_installs_the_compiled_package():
    built = BUILD_STAGE.result()
    tmp_path, prefix, final, ignore = built.tmp_path, built.prefix, built.final, built.ignore
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    site_packages = prefix / "lib" / f"python{version}" / "site-packages"
    env = {**clean_env(), "PYTHONPATH": str(site_packages)}
    tuplemesh = str(prefix / "bin" / "tuplemesh")
    app = tmp_path / "app"  # the final stage: the examples in /app, the working directory
    [examples] = [arg for word, arg in final if word == "COPY" and arg.startswith("examples ")]
    assert examples == "examples /app/examples"
    shutil.copytree(ROOT / "examples", app / "examples", ignore=ignore)

    out = subprocess.run(
        [tuplemesh, "--version"], cwd=app, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith(f"(compiled: {len(COMPILED_MODULES)} modules)")
    package = site_packages / "tuplemesh"
    assert sorted(p.name for p in (package / "protos" / "tuplemesh" / "v1").glob("*.proto")) == [
        f"{name}.proto" for name in ("admin", "gateway", "messages", "transfer")
    ]
    assert (site_packages / "zmq").is_dir()  # the image's extra

    run = subprocess.run(
        [tuplemesh, "run", "examples.wordcount:topology", "--workers", "2", "--quiet"],
        cwd=app, env={**env, "HOME": str(app)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "RESULT OK: 66 distinct words, 356000 in total: all counts exact" in run.stdout
