"""A restarted ``tuplemesh worker`` of a checkpointed topology says, once, which checkpoint it
resumes from and where that is kept, and reports it as its last committed checkpoint from the
start (not -1 until its next commit)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fault.harness import write_config
from tests.helpers import child_pythonpath, eventually
from tests.worker.conftest import ROOT, Mesh, wait_serving
from tuplemesh.netutil import free_ports
from tuplemesh.state import SqliteStore
from tuplemesh.v1 import admin_pb2

TOPOLOGY = "stateful-wordcount"


def start(mesh: Mesh, config: Path, log: Path) -> None:
    port, metrics_port = mesh.ports[0], mesh.metrics_ports[0]
    cmd = [sys.executable, "-m", "tuplemesh.cli", "worker", "examples.stateful_wordcount:topology",
           "--index", "0", "--workers", "1", "--port", str(port), "--config", str(config)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "TUPLEMESH_METRICS_PORT": str(metrics_port)}
    with log.open("w") as stderr:
        mesh.procs[:] = [subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=stderr)]
    wait_serving(mesh, 0)


def last_committed(mesh: Mesh) -> int:
    return mesh.admin(0).GetStatus(admin_pb2.GetStatusRequest(), timeout=5).checkpoints.last_committed


def test_a_restarted_worker_logs_its_resume_once_and_reports_the_stores_last_commit(tmp_path: Path):
    path = tmp_path / "state.sqlite"
    # no checkpoint but the final one a stopping worker takes: the restart has nothing to commit
    config = write_config(
        tmp_path / "tuplemesh.yaml",
        **{"topology.state.backend": "sqlite", "topology.state.sqlite.path": str(path),
           "topology.state.checkpoint.interval.ms": 600_000, "wordcount.rate": 50},
    )  # fmt: skip
    ports = free_ports(2)
    mesh = Mesh(ports[:1], [], ports[1:], [])
    start(mesh, config, tmp_path / "first.log")
    assert mesh.stop() == [0]
    store = SqliteStore(path)
    final = store.last_committed(TOPOLOGY)
    store.close()
    assert final is not None and final >= 1
    assert "committed in sqlite" not in (tmp_path / "first.log").read_text()  # a fresh start

    start(mesh, config, tmp_path / "second.log")
    try:
        assert eventually(lambda: last_committed(mesh) == final, message="the store's last commit")
    finally:
        assert mesh.stop() == [0]
    lines = [
        line for line in (tmp_path / "second.log").read_text().splitlines() if "committed in sqlite" in line
    ]
    assert len(lines) == 1, lines
    assert (
        f"WARNING tuplemesh.state.locations: topology '{TOPOLOGY}' resumes from checkpoint {final} "
        in lines[0]
    )
    assert f"committed in sqlite file {path} (worker start 2 of this topology)" in lines[0]
