"""Start real ``tuplemesh worker`` processes on loopback for a test module."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2_grpc

from tests.helpers import child_pythonpath, eventually
from tuplemesh.launcher import is_serving, stop_processes
from tuplemesh.netutil import free_ports
from tuplemesh.v1 import admin_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Mesh:
    ports: list[int]
    procs: list[subprocess.Popen[bytes]]
    metrics_ports: list[int]
    commands: list[tuple[list[str], dict[str, str]]]  # (argv, env) of each worker, for restarts
    hosts: list[str] | None = None  # each worker's address; 127.0.0.1 for all when None

    def metrics_url(self, index: int = 0) -> str:
        return f"http://127.0.0.1:{self.metrics_ports[index]}/metrics"

    def address(self, index: int = 0) -> str:
        host = "127.0.0.1" if self.hosts is None else self.hosts[index]
        return f"{host}:{self.ports[index]}"

    def admin(self, index: int = 0) -> admin_pb2_grpc.AdminStub:
        return admin_pb2_grpc.AdminStub(grpc.insecure_channel(self.address(index)))

    def health(self, index: int = 0) -> health_pb2_grpc.HealthStub:
        return health_pb2_grpc.HealthStub(grpc.insecure_channel(self.address(index)))

    def stop(self) -> list[int]:
        return stop_processes(self.procs, 30)

    def kill(self, index: int) -> None:
        """SIGKILL worker ``index`` and reap it."""
        self.procs[index].kill()
        self.procs[index].wait(10)

    def restart(self, index: int, wait: bool = True) -> None:
        """Start worker ``index`` again with its original command line and environment."""
        argv, env = self.commands[index]
        self.procs[index] = subprocess.Popen(argv, cwd=ROOT, env=env)
        if wait:
            wait_serving(self, index)


def start_mesh(
    target: str,
    workers: int,
    config: Path | None = None,
    wait: bool = True,
    env: dict[str, str] | None = None,
    logs: Path | None = None,
) -> Mesh:
    """Worker processes on loopback. Admin Emit, Drain, Rebalance and WatchTuples are on (tests use
    them) unless ``env`` says. With ``logs`` each worker's stderr goes to ``logs/worker-<index>.log``."""
    ports = free_ports(2 * workers)
    ports, metrics_ports = ports[:workers], ports[workers:]
    peers = ",".join(f"127.0.0.1:{p}" for p in ports)
    procs = []
    commands = []
    for index, port in enumerate(ports):
        cmd = [sys.executable, "-m", "tuplemesh.cli", "worker", target, "--index", str(index),
               "--workers", str(workers), "--port", str(port), "--peers", peers]  # fmt: skip
        if config is not None:
            cmd += ["--config", str(config)]
        proc_env = {
            **os.environ,
            "PYTHONPATH": child_pythonpath(),
            "TUPLEMESH_METRICS_PORT": str(metrics_ports[index]),
            "TUPLEMESH_ADMIN_EMIT_ENABLED": "true",
            "TUPLEMESH_ADMIN_DRAIN_ENABLED": "true",
            "TUPLEMESH_ADMIN_REBALANCE_ENABLED": "true",
            "TUPLEMESH_ADMIN_WATCH_TUPLES_ENABLED": "true",
            **(env or {}),
        }
        stderr = None if logs is None else (logs / f"worker-{index}.log").open("wb")
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=proc_env, stderr=stderr))
        if stderr is not None:
            stderr.close()  # the worker holds its own copy
        commands.append((cmd, proc_env))
    mesh = Mesh(ports, procs, metrics_ports, commands)
    if wait:
        for index in range(workers):
            wait_serving(mesh, index)
    return mesh


def wait_serving(mesh: Mesh, index: int, timeout: float = 30.0) -> None:
    stub = mesh.health(index)

    def serving() -> bool:
        assert mesh.procs[index].poll() is None, f"worker {index} exited"
        return is_serving(stub)

    eventually(serving, timeout=timeout, interval=0.05, message=f"worker {index} SERVING")


@pytest.fixture(scope="module")
def wordcount_mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    config = tmp_path_factory.mktemp("conf") / "tuplemesh.yaml"
    config.write_text("messaging.max.message.bytes: 1048576\n")
    mesh = start_mesh("tests.worker.topologies:small_wordcount", 2, config)
    yield mesh
    assert mesh.stop() == [0, 0]
