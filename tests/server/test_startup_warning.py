"""A worker whose Transfer anyone reaching its port may use (neither tls.enabled nor a mesh
secret) says so in one WARNING once it serves; a worker with the mesh secret does not, and a worker
that cannot start says only why. The stderr of real worker processes."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.helpers import eventually
from tests.worker.conftest import start_mesh

TARGET = "tests.worker.topologies:small_wordcount"
WARNING = "Transfer is open to anyone who reaches port"
INFO = {"TUPLEMESH_LOG_LEVEL": "INFO"}  # to see the "serving" line the warning must follow


def stderr_of(logs: Path, index: int = 0) -> str:
    return (logs / f"worker-{index}.log").read_text()


def test_a_worker_with_neither_tls_nor_a_secret_warns_once_after_it_serves(tmp_path: Path):
    mesh = start_mesh(TARGET, 2, env=INFO, logs=tmp_path)
    try:
        for index in (0, 1):
            eventually(lambda i=index: WARNING in stderr_of(tmp_path, i), timeout=10, interval=0.05)
    finally:
        assert mesh.stop() == [0, 0]
    for index, port in enumerate(mesh.ports):
        lines = stderr_of(tmp_path, index).splitlines()
        [warning] = [n for n, line in enumerate(lines) if WARNING in line]
        [serving] = [n for n, line in enumerate(lines) if f"worker {index} serving on port {port}" in line]
        assert serving < warning
        assert lines[warning].endswith(
            f" WARNING tuplemesh.server.process: worker {index}: Transfer is open to anyone who reaches "
            f"port {port}: with neither tls.enabled nor a mesh secret, any client can inject tuples, "
            "forge senders and send shutdown notices; set mesh.secret.file (the same secret on every "
            "worker) or tls.enabled outside local development"
        )


def test_a_worker_with_the_mesh_secret_does_not_warn(tmp_path: Path):
    secret = tmp_path / "mesh-secret"
    secret.write_bytes(b"the mesh secret")
    mesh = start_mesh(TARGET, 1, env={**INFO, "TUPLEMESH_MESH_SECRET_FILE": str(secret)}, logs=tmp_path)
    assert mesh.stop() == [0]  # started serving (start_mesh waits for it), then stopped
    text = stderr_of(tmp_path)
    assert f"worker 0 serving on port {mesh.ports[0]}" in text
    assert WARNING not in text


def test_a_worker_that_cannot_start_says_only_why(tmp_path: Path):
    with socket.socket() as taken:  # its /metrics port is in use: the start fails before serving
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        mesh = start_mesh(TARGET, 1, wait=False, env={"TUPLEMESH_METRICS_PORT": str(port)}, logs=tmp_path)
        assert mesh.procs[0].wait(30) != 0
    text = stderr_of(tmp_path)
    assert f"metrics.port {port}: cannot serve /metrics on " in text
    assert WARNING not in text
