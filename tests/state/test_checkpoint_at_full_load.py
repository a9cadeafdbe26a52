"""Checkpoints commit while the spouts run flat out, on default queue settings: the barriers
wait behind the queue time each ring allows (`topology.backpressure.target.ms`), not behind
1024 full slots per ring."""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench.state import _committed, _config, _statuses
from tests.helpers import eventually
from tests.worker.conftest import start_mesh


def test_checkpoints_commit_and_none_is_abandoned_with_spouts_flat_out():
    with tempfile.TemporaryDirectory() as directory:
        config = _config(Path(directory), 1000)  # only the store and the 1 s interval are set
        # far more sentences than the test can count: the spouts never run out
        mesh = start_mesh("bench.state:stateful", 2, config, env={"STATE_BENCH_REPEAT": "5000000"})
        try:
            eventually(lambda: _committed(mesh) >= 3, timeout=120, interval=0.5,
                       message=lambda: f"committed {_committed(mesh)} checkpoint(s)")  # fmt: skip
            (checkpoints,) = [s.checkpoints for s in _statuses(mesh) if s.HasField("checkpoints")]
            assert checkpoints.abandoned == 0
            counted = sum(e.executed for s in _statuses(mesh) for e in s.executors if e.component == "count")
            finished = [e.finished for s in _statuses(mesh) for e in s.executors if e.spout]
            assert counted > 0 and not any(finished)  # committed while the spouts were still emitting
        finally:
            for index in range(len(mesh.procs)):
                mesh.kill(index)
