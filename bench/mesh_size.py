"""Mesh size: how a mesh of many worker processes on one machine forms, runs and stops.

``python -m bench.mesh_size --workers 64`` (or ``python -m bench mesh_size``: 16 workers, 4
with ``--quick``; ``python -m bench all`` leaves it out) starts N ``tuplemesh worker``
processes on loopback on default settings, each running one task of a finite spout and one
of a counting bolt, shuffle-grouped, so every worker sends to every other (N x (N - 1)
Transfer streams). It reports the formation time (from the first process started to every
worker SERVING), the workers' total resident memory once the run is done, the CPU each worker
uses once idle (the cost of its open links alone), and whether every tuple arrived; then it stops
every worker (SIGTERM, the whole-mesh drain) and checks they all exit 0. A development tool:
never part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from bench.procstat import cpu_seconds
from bench.records import Record
from tuplemesh.launcher import ProcessCluster
from tuplemesh.topology import Bolt, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple

#: Read when a worker imports this module: the spout and bolt tasks, one of each per worker.
TASKS_ENV = "BENCH_MESH_TASKS"
#: Tuples each spout task emits.
PER_TASK_ENV = "BENCH_MESH_TUPLES_PER_TASK"
TARGET = "bench.mesh_size:topology"


class Finite(Spout):
    """Emits ``count`` numbered tuples, then finishes."""

    def __init__(self, count: int) -> None:
        self.count = count

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["n"])

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.sent = 0

    def next_tuple(self) -> None:
        if self.sent < self.count:
            self.sent += 1
            self.collector.emit([self.sent])

    def is_finished(self) -> bool:
        return self.sent >= self.count


class Count(Bolt):
    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.count = 0

    def execute(self, tup: Tuple) -> None:
        self.count += 1

    def report(self) -> Any:
        return self.count


def build(tasks: int, per_task: int) -> Any:
    b = TopologyBuilder("meshsize")
    b.set_spout("numbers", Finite(per_task), parallelism=tasks)
    b.set_bolt("count", Count(), parallelism=tasks).shuffle_grouping("numbers")
    return b.build()


topology = build(int(os.environ.get(TASKS_ENV, "2")), int(os.environ.get(PER_TASK_ENV, "100")))


#: How long the finished mesh's CPU is sampled (every worker idle, its streams still open).
IDLE_SECONDS = 5.0


def idle_cpu(pids: list[int], seconds: float) -> float:
    """Cores the processes ``pids`` use together over ``seconds`` (Linux /proc)."""
    before = [cpu_seconds(pid) for pid in pids]
    time.sleep(seconds)
    return sum(cpu_seconds(pid) - b for pid, b in zip(pids, before, strict=True)) / seconds


def measure(workers: int, per_task: int, timeout: float = 600.0) -> dict[str, Any]:
    """One mesh of ``workers`` processes: formation seconds, total RSS, tuples counted, exit codes."""
    env = {TASKS_ENV: str(workers), PER_TASK_ENV: str(per_task)}
    cluster = ProcessCluster(TARGET, build(workers, per_task), workers, transport="grpc", env=env)
    started = time.monotonic()
    codes: list[int] = []
    try:
        cluster.start()
        cluster.wait_serving(timeout)
        formed = time.monotonic() - started
        done = cluster.wait_done(timeout)
        ran = time.monotonic() - started - formed
        idle = idle_cpu([proc.pid for proc in cluster.procs], IDLE_SECONDS)
        statuses = cluster.statuses()
        rss = sum(s.rss_bytes for s in statuses)
        counted = sum(cluster.reports().get("count", []))
    finally:
        codes = cluster.stop(120.0)
    return {
        "workers": workers,
        "formation_seconds": round(formed, 2),
        "run_seconds_after_formation": round(ran, 2),
        "completed": done,
        "rss_total_bytes": rss,
        "rss_per_worker_mib": round(rss / workers / 2**20, 1),
        "idle_cpu_percent_per_worker": round(idle / workers * 100, 2),
        "idle_cpu_cores_in_all": round(idle, 2),
        "tuples_expected": workers * per_task,
        "tuples_counted": counted,
        "every_tuple_arrived": counted == workers * per_task,
        "exit_codes_all_zero": codes == [0] * workers,
    }


def run(quick: bool = False) -> list[Record]:
    workers = 4 if quick else 16
    result = measure(workers, 100)
    return [
        Record(
            "mesh_size",
            f"{workers} worker processes on loopback, default settings, a spout and a bolt task on "
            "each (shuffle: every worker sends to every other): meshes formed per second "
            "(1 / formation time, first process started to every worker SERVING)",
            "meshes",
            1 / result["formation_seconds"],
            extra=result,
        )
    ]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mesh_size", description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=64, help="worker processes (default 64)")
    parser.add_argument("--tuples-per-task", type=int, default=100, help="tuples each spout task emits")
    args = parser.parse_args()
    if args.workers < 1 or args.tuples_per_task < 1:
        parser.error(
            f"--workers and --tuples-per-task must be >= 1, got {args.workers}, {args.tuples_per_task}"
        )
    result = measure(args.workers, args.tuples_per_task)
    for key, value in result.items():
        print(f"{key}: {value}")
    ok = result["completed"] and result["every_tuple_arrived"] and result["exit_codes_all_zero"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
