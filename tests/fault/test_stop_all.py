"""SIGTERM to every worker of a loaded mesh at once (helm uninstall, a node drain).

Three worker processes run ``tests.fault.numbered:numbered`` with acking off and the spouts flat
out. Every worker must exit within ``topology.shutdown.timeout.secs`` with code 0, and every
number a spout emitted before it stopped must have reached a sink exactly once: the workers
drain into each other instead of refusing each other's in-flight tuples.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from tests.fault.harness import statuses, write_config
from tests.fault.numbered import read_outcome
from tests.helpers import eventually
from tests.worker.conftest import Mesh, start_mesh

WORKERS = 3
SHUTDOWN_TIMEOUT = 10.0


def spout_emitted(mesh: Mesh) -> int:
    return sum(e.emitted for status in statuses(mesh) for e in status.executors if e.spout)


def sigterm_all(mesh: Mesh) -> list[tuple[int, float]]:
    """SIGTERM every worker at once; (exit code, seconds until it exited) of each."""
    signalled = time.monotonic()
    for proc in mesh.procs:
        proc.send_signal(signal.SIGTERM)
    ended: list[tuple[int, float]] = []
    for proc in mesh.procs:
        code = proc.wait(3 * SHUTDOWN_TIMEOUT)  # bounded: a hung worker fails the test, not the suite
        ended.append((code, time.monotonic() - signalled))
    return ended


def test_sigterm_to_every_worker_under_full_load_ends_in_time_with_nothing_lost(tmp_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    config = write_config(
        tmp_path / "tuplemesh.yaml",
        **{
            "numbered.dir": str(out),
            "topology.acker.executors": 0,
            "topology.shutdown.timeout.secs": SHUTDOWN_TIMEOUT,
        },
    )
    mesh = start_mesh("tests.fault.numbered:numbered", WORKERS, config)
    try:
        # every queue on the path fills: the spouts are only held back by backpressure
        eventually(lambda: spout_emitted(mesh) >= 50_000, timeout=60, interval=0.2)
        ended = sigterm_all(mesh)
    finally:
        for proc in mesh.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    codes = [code for code, _ in ended]
    slowest = max(seconds for _, seconds in ended)
    emitted, seen = read_outcome(out)
    print(f"stop-all: exits after {[round(s, 2) for _, s in ended]} s, {sum(emitted.values())} tuples")
    assert codes == [0] * WORKERS
    assert slowest < SHUTDOWN_TIMEOUT
    assert len(emitted) == 3 and all(n > 0 for n in emitted.values())
    expected = {(task, n) for task, count in emitted.items() for n in range(count)}
    missing = expected - seen.keys()
    assert not missing, f"{len(missing)} tuple(s) lost, e.g. {sorted(missing)[:5]}"
    assert seen.keys() == expected  # nothing a spout did not emit
    twice = [key for key, times in seen.items() if times != 1]
    assert not twice, f"{len(twice)} tuple(s) delivered more than once, e.g. {twice[:5]}"
