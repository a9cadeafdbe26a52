"""The packaging tests' builds start when the session does, on background threads, and each test
waits for its own build's result, then checks it exactly as it would a build it ran itself.

Each build (a fresh venv, pip and mypyc, gcc compiling the generated C: minutes of one core) used to
run inside its test, while the rest of the suite mostly keeps one of the machine's cores busy. Run
early, the builds use the core the suite leaves idle: one build at a time, so the builds and the
suite together keep both cores busy without crowding either. (Not niced: on a machine busy with
other work a niced build starves past its own timeouts.) A build that fails fails its test: the
test re-raises what the build raised (the same assertion, with the same output). Whatever a build
still runs when the session ends (a `-x` stop, Ctrl-C) is stopped, with its process group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest

T = TypeVar("T")

#: one at a time: the suite keeps one of the two cores busy, a build (mostly one process) the other
WORKERS = 1

_lock = threading.Lock()
_running: set[subprocess.Popen[str]] = set()
_stopping = threading.Event()


class Build(Generic[T]):
    """One test module's build: ``make(directory)`` builds in that empty directory and returns what
    the tests check. The session starts it (see ``started``); ``result`` waits for it."""

    def __init__(self, name: str, make: Callable[[Path], T]) -> None:
        self.name = name
        self.make = make
        self.future: Future[T] | None = None

    def start(self, executor: ThreadPoolExecutor, factory: pytest.TempPathFactory) -> None:
        if self.future is None:
            self.future = executor.submit(self.make, factory.mktemp(self.name))

    def result(self) -> T:
        """What the build returned, or what it raised (an AssertionError naming the failed step)."""
        assert self.future is not None, f"the {self.name} build was never started (tests/conftest.py)"
        return self.future.result()


def run(args: list[str], *, timeout: float, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)``, in a
    process group of its own that the end of the session stops if it is still running."""
    with _lock:
        if _stopping.is_set():
            raise RuntimeError(f"the session ended before {args[:3]} started")
        proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, process_group=0, **kwargs
        )
        _running.add(proc)
    try:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop(proc)
            proc.communicate()
            raise
    finally:
        with _lock:
            _running.discard(proc)
    return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to the process group (a `tuplemesh run` stops its workers on it), SIGKILL if it stays."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def builds_of(items: Iterable[pytest.Item]) -> list[Build[Any]]:
    """The builds of the test modules these items are in, in the order of their first test."""
    found: dict[int, Build[Any]] = {}
    for item in items:
        module = getattr(item, "module", None)
        for value in vars(module).values() if module is not None else ():
            if isinstance(value, Build):
                found.setdefault(id(value), value)
    return list(found.values())


@contextmanager
def started(items: Iterable[pytest.Item], factory: pytest.TempPathFactory) -> Iterator[None]:
    """Start the builds the selected tests need; at the end, stop what is still running."""
    builds = builds_of(items)
    if not builds:
        yield
        return
    _stopping.clear()
    executor = ThreadPoolExecutor(WORKERS, thread_name_prefix="packaging-build")
    try:
        for build in builds:
            build.start(executor, factory)
        yield
    finally:
        with _lock:
            _stopping.set()
            running = list(_running)
        for proc in running:
            _stop(proc)
        executor.shutdown(wait=True, cancel_futures=True)
