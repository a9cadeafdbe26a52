"""Windows survive a SIGKILL: the checkpointed windowed averages on three worker processes.

``examples.windowed_averages:stateful`` averages sensors over sliding event-time windows whose
tuples in flight, watermark and results are checkpointed. A worker is SIGKILLed mid-run (its
windows half full) and started again; the mesh rolls back to the last complete checkpoint and
replays, and every window average and every late reading must be EXACTLY those computed without
windows (a lost window content would change an average; a replay counted twice, a reading count).
"""

from __future__ import annotations

from pathlib import Path

from examples.windowed_averages import check
from tests.fault.harness import reports, statuses, wait_settled, write_config
from tests.helpers import eventually
from tests.worker.conftest import start_mesh
from tuplemesh.state import SqliteStore

TARGET = "examples.windowed_averages:stateful"
TOPOLOGY = "windowed-averages-stateful"
STEPS = 1200  # 7200 readings
RATE = 1000.0  # readings per second: the run takes about 7 s


def last_committed(store: Path) -> int:
    opened = SqliteStore(store)
    try:
        return opened.last_committed(TOPOLOGY) or 0
    finally:
        opened.close()


def test_a_worker_killed_mid_window_recomputes_the_same_windows(tmp_path: Path):
    store = tmp_path / "state.sqlite"
    conf = write_config(
        tmp_path / "tuplemesh.yaml",
        **{
            "windows.steps": STEPS,
            "windows.rate": RATE,
            "topology.state.backend": "sqlite",
            "topology.state.sqlite.path": str(store),
            "topology.state.checkpoint.interval.ms": 200,
            "storm.messaging.netty.min_wait_ms": 20,
            "storm.messaging.netty.max_wait_ms": 200,
        },
    )
    mesh = start_mesh(TARGET, 3, conf)
    try:
        eventually(lambda: last_committed(store) >= 3, 30, 0.05, "three checkpoints committed")

        def emitted() -> int:
            return sum(e.emitted for status in statuses(mesh) for e in status.executors if e.spout)

        eventually(lambda: emitted() >= 1500, 30, 0.05, "a fifth of the log emitted")
        assert emitted() < STEPS * 6  # mid-run: windows are open on every averaging task
        mesh.kill(1)
        mesh.restart(1)
        eventually(lambda: reports(mesh)["__checkpoint"][0]["attempt"] == 4, 30, 0.1, "attempt 4 begun")
        wait_settled(mesh, timeout=90.0)
        merged = reports(mesh)
        assert merged["__checkpoint"][0]["restored_from"] >= 3  # from a checkpoint, not the beginning
        matched, message = check(merged)
        assert matched, message
    finally:
        codes = mesh.stop()
    assert codes == [0, 0, 0]
