"""Following a mesh of worker processes through faults: settle detection and merged reports.

A SIGKILLed worker takes its counters with it, so the consumed == delivered balance that
``tuplemesh run`` uses cannot prove quiescence after a restart. A fault test instead waits until
every worker says its spouts are finished (with acking on: every tree acked) and it is idle (no
queued tuple, no unacknowledged send), twice in a row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import grpc

from examples.wordcount import expected_counts
from tests.helpers import child_pythonpath, eventually
from tests.worker.conftest import ROOT, Mesh
from tuplemesh.launcher import is_serving, merge_reports
from tuplemesh.topology.assignment import Epoch
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc


def write_config(path: Path, **values: Any) -> Path:
    path.write_text("".join(f"{key}: {json.dumps(value)}\n" for key, value in values.items()))
    return path


def start_worker(
    mesh: Mesh, target: str, index: int, workers: int, config: Path, *extra: str
) -> subprocess.Popen[bytes]:
    """Start worker ``index`` of ``mesh`` (every address of ``mesh`` in its ``--peers``: the
    workers a rescale may add) as a member of a ``workers``-worker mesh, and record its command."""
    peers = ",".join(f"127.0.0.1:{p}" for p in mesh.ports)
    cmd = [sys.executable, "-m", "tuplemesh.cli", "worker", target, "--index", str(index),
           "--workers", str(workers), "--port", str(mesh.ports[index]), "--peers", peers,
           "--config", str(config), *extra]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": child_pythonpath(),
        "TUPLEMESH_METRICS_PORT": str(mesh.metrics_ports[index]),
        "TUPLEMESH_ADMIN_REBALANCE_ENABLED": "true",  # the rescale tests call Admin.Rebalance
    }
    mesh.procs[index] = subprocess.Popen(cmd, cwd=ROOT, env=env)
    mesh.commands[index] = (cmd, env)
    return mesh.procs[index]


def numbered_config(tmp_path: Path, *, acking: bool = False, **extra: Any) -> tuple[Path, Path]:
    """Config of the numbered pipeline (``tests.fault.numbered``), acking off unless asked, and
    the directory its spouts and sinks report to: (config, directory)."""
    out = tmp_path / "out"
    out.mkdir()
    acker = {} if acking else {"topology.acker.executors": 0}
    return write_config(tmp_path / "tuplemesh.yaml", **{"numbered.dir": str(out), **acker, **extra}), out


def stateful_wordcount_config(path: Path, repeat: int, rate: float, **extra: Any) -> Path:
    """Config of the paced stateful word count the elastic-mesh tests run: a sqlite store beside
    ``path``, a checkpoint every 500 ms, quick reconnects."""
    return write_config(
        path,
        **{
            "wordcount.repeat": repeat,
            "wordcount.rate": rate,
            "topology.state.backend": "sqlite",
            "topology.state.sqlite.path": str(path.parent / "state.sqlite"),
            "topology.state.checkpoint.interval.ms": 500,
            "storm.messaging.netty.min_wait_ms": 20,
            "storm.messaging.netty.max_wait_ms": 200,
            **extra,
        },
    )


def assert_exact_counts(mesh: Mesh, repeat: int) -> None:
    """The word count's merged counts equal the corpus's, no word counted by two tasks."""
    counts: dict[str, int] = {}
    for report in reports(mesh)["count"]:
        assert not counts.keys() & report["counts"].keys(), "a word counted by two tasks"
        counts.update(report["counts"])
    assert counts == dict(expected_counts(repeat))


def statuses(mesh: Mesh, reports: bool = False) -> list[admin_pb2.WorkerStatus]:
    request = admin_pb2.GetStatusRequest(include_reports=reports)
    return [mesh.admin(i).GetStatus(request, timeout=10.0) for i in range(len(mesh.ports))]


def wait_settled(mesh: Mesh, timeout: float, drained: bool = False) -> None:
    """Every spout finished (or, ``drained``, deactivated by Admin.Drain) and every worker idle,
    seen twice 0.3 s apart; AssertionError otherwise."""
    streak = 0
    last: list[admin_pb2.WorkerStatus] = []

    def settled_twice_in_a_row() -> bool:
        nonlocal streak, last
        for index, proc in enumerate(mesh.procs):
            assert proc.poll() is None, f"worker {index} exited with {proc.returncode}"
        last = statuses(mesh)
        streak = streak + 1 if all((drained or s.spouts_finished) and s.idle for s in last) else 0
        return streak >= 2

    eventually(
        settled_twice_in_a_row,
        timeout=timeout,
        interval=0.3,
        message=lambda: (
            f"mesh settled; (spouts_finished, idle) per worker: {[(s.spouts_finished, s.idle) for s in last]}"
        ),
    )


def reports(mesh: Mesh) -> dict[str, list[Any]]:
    """Every task's report; asked again while a restarted worker restores its tasks' state
    (it answers UNAVAILABLE until then, not the empty state its tasks start with)."""
    found: list[dict[str, list[Any]]] = []

    def answered() -> bool:
        try:
            found.append(merge_reports(statuses(mesh, reports=True)))
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            return False
        return True

    eventually(answered, timeout=30, interval=0.05, message="reports (a worker restoring its state)")
    return found[-1]


def proc_status(pid: int) -> tuple[int, int]:
    """(RSS bytes, threads) of a process, from /proc."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["Threads"])


def sink_counts(merged: dict[str, list[Any]]) -> Counter[int]:
    seen: Counter[int] = Counter()
    for report in merged["count"]:
        seen.update({int(k): v for k, v in report["seen"].items()})
    return seen


class SpoutProgress:
    """Follows the spouts of every worker address from a thread of its own and records, per
    worker and assignment epoch, when they moved (emitted more than at the previous look; a
    worker at a new epoch counts from 0), so a test can measure a rescale's pause as the sources
    see it. Use as a context manager."""

    def __init__(self, addresses: list[str], interval: float = 0.02) -> None:
        # a restarting worker must be seen as soon as it serves: short reconnect backoffs
        options = [("grpc.initial_reconnect_backoff_ms", 20), ("grpc.max_reconnect_backoff_ms", 100)]
        self._channels = [grpc.insecure_channel(a, options=options) for a in addresses]
        self._stubs = [admin_pb2_grpc.AdminStub(c) for c in self._channels]
        self._interval = interval
        #: (worker, epoch counter) -> times at which its spouts had emitted more than before
        self._moves: dict[tuple[int, int], list[float]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="spout-progress", daemon=True)

    def __enter__(self) -> SpoutProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        for channel in self._channels:
            channel.close()

    def _follow(self) -> None:
        emitted: dict[tuple[int, int], int] = {}
        request = admin_pb2.GetStatusRequest()
        while not self._stop.wait(self._interval):
            for index, stub in enumerate(self._stubs):
                try:
                    status = stub.GetStatus(request, timeout=0.5)
                except grpc.RpcError:
                    continue  # down or restarting
                now = sum(e.emitted for e in status.executors if e.spout)
                key = (index, int(status.epoch.split("/")[0]))
                if now > emitted.get(key, 0):
                    with self._lock:
                        self._moves.setdefault(key, []).append(time.monotonic())
                emitted[key] = now

    def emitting(self, counter: int, workers: set[int]) -> bool:
        """Every one of ``workers`` was seen emitting at epoch ``counter``."""
        with self._lock:
            return all((w, counter) in self._moves for w in workers)

    def pause(self, old: int, new: int, workers: set[int]) -> float:
        """From the first spout that stopped at epoch ``old`` (its worker's last move there) to
        the last of ``workers`` (those with spout tasks) emitting at epoch ``new`` (its first
        move there): the longest any source stood still."""
        with self._lock:
            stopped = min(times[-1] for (_, c), times in self._moves.items() if c == old)
            resumed = max(self._moves[(w, new)][0] for w in workers)
        return resumed - stopped


def head(mesh: Mesh, workers: int) -> Mesh:
    """The mesh of workers 0 .. ``workers`` - 1 (a rescaled mesh's remaining workers)."""
    return Mesh(
        mesh.ports[:workers], mesh.procs[:workers], mesh.metrics_ports[:workers], mesh.commands[:workers]
    )


def epoch_of(mesh: Mesh, index: int) -> Epoch | None:
    """The assignment epoch worker ``index`` routes by; None while it does not answer."""
    try:
        return Epoch.parse(mesh.admin(index).GetAssignment(admin_pb2.GetAssignmentRequest(), timeout=2).epoch)
    except grpc.RpcError:
        return None


def epoch_counter_of(mesh: Mesh, index: int) -> int | None:
    """The counter of worker ``index``'s epoch, asked once; None while it does not answer."""
    epoch = epoch_of(mesh, index)
    return None if epoch is None else epoch.counter


def emitted(mesh: Mesh, workers: int) -> int:
    """What the spouts of the first ``workers`` workers emitted (since each worker started)."""
    return sum(e.emitted for s in statuses(head(mesh, workers)) for e in s.executors if e.spout)


def wait_rescaled(mesh: Mesh, workers: int, counter: int) -> None:
    """Until every one of ``workers`` workers serves at epoch ``counter`` and the spouts emit."""

    def resumed() -> bool:
        for index in range(workers):
            epoch = epoch_of(mesh, index)
            if epoch is None or (epoch.counter, epoch.workers) != (counter, workers):
                return False
            if not is_serving(mesh.health(index)):
                return False
        return emitted(mesh, workers) > 0

    eventually(
        resumed, timeout=60, interval=0.02, message=f"the mesh serving {workers} workers at epoch {counter}"
    )


def spouting(mesh: Mesh, workers: int) -> set[int]:
    """Which of the first ``workers`` workers run spout tasks."""
    return {i for i, s in enumerate(statuses(head(mesh, workers))) if any(e.spout for e in s.executors)}


def rescale_pause(mesh: Mesh, progress: SpoutProgress, old: int, new: int, workers: int) -> float:
    """Wait until every one of the first ``workers`` workers that has spout tasks emits at epoch
    ``new``; the pause from epoch ``old`` (`SpoutProgress.pause`)."""

    def spouting_again() -> set[int] | None:
        try:
            running = spouting(mesh, workers)
        except grpc.RpcError:
            return None  # a worker is not serving yet
        return running if running and progress.emitting(new, running) else None

    running = eventually(spouting_again, timeout=60, interval=0.05, message=f"every spout emitting at {new}")
    assert running is not None
    return progress.pause(old, new, running)
