"""`local_session`: a local Spark session ready for ``format("tuplemesh")``."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tuplemesh.spark.source import register

__all__ = ["local_session", "popen_without_fork_handlers"]

# One session start at a time swaps PySpark's Popen (a module global).
_LAUNCH_LOCK = threading.Lock()


def popen_without_fork_handlers(args: Any, **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen``, with a ``preexec_fn`` replaced by a process group of the child's own.

    PySpark starts its JVM with a ``preexec_fn`` that ignores SIGINT, so the terminal's Ctrl-C does
    not reach the JVM. A ``preexec_fn`` makes Python ``fork()`` instead of ``vfork()``, which runs
    gRPC's fork handlers in the child: with gRPC channels busy in this process (a Gateway client, a
    worker in the same interpreter) they restart gRPC's poller there, the child's fd cleanup closes
    its epoll fd and the child dies before it runs Java, 1 to 2 starts in 100 ("Java gateway
    process exited before sending its port number"; gRPC issue 43055). A process group of its own
    keeps the terminal's Ctrl-C from the JVM just as well, without the ``fork()``.
    """
    if kwargs.pop("preexec_fn", None) is not None:
        kwargs["process_group"] = 0
    return subprocess.Popen(args, **kwargs)


@contextmanager
def _jvm_launched_without_fork_handlers() -> Iterator[None]:
    import pyspark.java_gateway as java_gateway

    with _LAUNCH_LOCK:
        original = java_gateway.Popen
        java_gateway.Popen = popen_without_fork_handlers  # type: ignore[assignment,misc]
        try:
            yield
        finally:
            java_gateway.Popen = original  # type: ignore[misc]


def local_session(app: str, cores: int = 2) -> Any:
    """A quiet ``local[cores]`` session with ``tuplemesh`` registered (examples, tests, benchmarks).

    Sets what a local PySpark needs here: this interpreter for the Python workers, loopback only,
    no UI; and starts the JVM safely beside busy gRPC channels (`popen_without_fork_handlers`).
    """
    import os
    import sys

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with _jvm_launched_without_fork_handlers():
        session = (
            SparkSession.builder.master(f"local[{cores}]")
            .appName(app)
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", str(cores))
            .getOrCreate()
        )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session
