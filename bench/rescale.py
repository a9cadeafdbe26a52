"""Live rescale: how long the sources stand still when a running mesh changes its worker count.

The stateful word count (``examples.stateful_wordcount``, sqlite state, a checkpoint every
500 ms, paced sentences) runs on 2 worker processes over grpc and is rescaled to 3 by
``Admin.Rebalance`` while sentences flow; the pause is measured from the first spout stopping to
the spouts of every worker emitting again at the new epoch (their counters, followed every
20 ms). The baseline, in the same run, alternating: what an operator does without a live
rescale, stopping every worker (SIGTERM, a whole-mesh stop with its final checkpoint) and
starting them again at the new count, measured the same way. Rates are pauses per second
(1 / pause), so the ratio is how many times shorter the live rescale's pause is.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from bench.records import Record
from tests.fault.harness import (
    SpoutProgress,
    rescale_pause,
    spouting,
    start_worker,
    stateful_wordcount_config,
)
from tests.helpers import eventually
from tests.worker.conftest import Mesh, wait_serving
from tuplemesh.launcher import stop_processes
from tuplemesh.netutil import free_ports
from tuplemesh.v1 import admin_pb2

TARGET = "examples.stateful_wordcount:topology"
BEFORE, AFTER = 2, 3


def _mesh() -> Mesh:
    ports = free_ports(2 * AFTER)
    return Mesh(ports[:AFTER], [None] * AFTER, ports[AFTER:], [None] * AFTER)  # type: ignore[list-item]


def one_round(directory: Path) -> tuple[float, float]:
    """(live rescale pause, stop-and-restart pause), seconds."""
    run = directory / f"round-{time.monotonic_ns()}"  # a store of its own
    run.mkdir()
    # more sentences than the round needs: the spouts never finish
    config = stateful_wordcount_config(run / "tuplemesh.yaml", 100_000, 1000.0)
    mesh = _mesh()
    try:
        for index in range(BEFORE):
            start_worker(mesh, TARGET, index, BEFORE, config)
        for index in range(BEFORE):
            wait_serving(mesh, index)
        with SpoutProgress([mesh.address(i) for i in range(AFTER)]) as progress:
            eventually(lambda: progress.emitting(0, spouting(mesh, BEFORE)), timeout=60, interval=0.05)
            time.sleep(2.0)  # a steady flow and a few checkpoints before the change
            start_worker(mesh, TARGET, AFTER - 1, AFTER, config)  # waits to be included
            reply = mesh.admin(0).Rebalance(admin_pb2.RebalanceRequest(workers=AFTER), timeout=30)
            assert reply.epoch.startswith(f"1/{AFTER}/"), reply.epoch
            live = rescale_pause(mesh, progress, 0, 1, AFTER)
            time.sleep(2.0)
            # the baseline: stop the whole mesh, start it again at the other count (epoch 2)
            codes = stop_processes(list(mesh.procs), 60)
            assert codes == [0] * AFTER, codes
            for index in range(BEFORE):
                start_worker(mesh, TARGET, index, BEFORE, config, "--epoch", "2")
            restart = rescale_pause(mesh, progress, 1, 2, BEFORE)
    finally:
        stop_processes([p for p in mesh.procs if p is not None and p.poll() is None], 60)
    return live, restart


def run(quick: bool = False) -> list[Record]:
    rounds = 1 if quick else 3
    live: list[float] = []
    restart: list[float] = []
    with tempfile.TemporaryDirectory(prefix="tuplemesh-bench-rescale-") as tmp:
        for _ in range(rounds):  # each round runs both, one after the other
            a, b = one_round(Path(tmp))
            live.append(a)
            restart.append(b)
    live_pause, restart_pause = statistics.median(live), statistics.median(restart)
    return [
        Record(
            "rescale",
            f"stateful word count, {BEFORE} -> {AFTER} workers by Admin.Rebalance while sentences flow: "
            "pauses per second (1 / pause, first spout stopped to every spout emitting)",
            "pauses",
            1 / live_pause,
            {f"stop every worker, start {BEFORE} again (SIGTERM, restart)": 1 / restart_pause},
            "pause <= 2 s",
            {
                "live rescale pause, s (median)": round(live_pause, 2),
                "stop-and-restart pause, s (median)": round(restart_pause, 2),
                "live pauses, s": [round(p, 2) for p in live],
                "stop-and-restart pauses, s": [round(p, 2) for p in restart],
            },
        )
    ]
