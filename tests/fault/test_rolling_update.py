"""A rolling update of a live mesh, as the StatefulSet controller does it: one pod at a time,
highest ordinal first, each replaced only once its predecessor exited and the successor is ready.

A worker that stops alone refuses its running peers' batches; they keep them and resend them to
its successor. With acking off nothing else recovers a tuple, so the numbered pipeline must
come out with every number of every spout life at a sink exactly once. The checkpointed word
count rolls back and replays after each restart, and its counts must be exact.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fault.harness import (
    assert_exact_counts,
    numbered_config,
    reports,
    stateful_wordcount_config,
    statuses,
    wait_settled,
)
from tests.fault.numbered import assert_each_once
from tests.helpers import eventually
from tests.worker.conftest import Mesh, start_mesh, wait_serving
from tuplemesh.v1 import admin_pb2

WORKERS = 3
SHUTDOWN_TIMEOUT = 15.0
#: The StatefulSet's update order: highest ordinal first.
ROLLING_ORDER = (2, 1, 0)


@dataclass
class Restart:
    """One step of the rolling update, as measured."""

    index: int
    exit_seconds: float  # SIGTERM until the process exited
    serving_seconds: float  # start of the successor until its health said SERVING (readiness)
    flowing_seconds: float  # start of the successor until tuples flowed through it
    resent_to_it: int  # batches its running peers sent to it again (refused while it stopped)


def spout_emitted(status: admin_pb2.WorkerStatus) -> int:
    return sum(e.emitted for e in status.executors if e.spout)


def resent_to(mesh: Mesh, index: int) -> int:
    """Batches the other workers resent to worker ``index`` (each counts its own, since it started)."""
    return sum(
        peer.resent_batches
        for other, status in enumerate(statuses(mesh))
        if other != index
        for peer in status.peers
        if peer.worker == index
    )


def roll(mesh: Mesh, index: int, flowing: int) -> Restart:
    """Replace worker ``index`` as the StatefulSet controller does; ready once its successor
    serves, its spouts emitted ``flowing`` tuples and it received tuples from every peer."""
    resent_before = resent_to(mesh, index)
    signalled = time.monotonic()
    mesh.procs[index].send_signal(signal.SIGTERM)
    code = mesh.procs[index].wait(SHUTDOWN_TIMEOUT + 10)
    exit_seconds = time.monotonic() - signalled
    assert code == 0, f"worker {index} exited with {code}"
    # the drain is bounded by the shutdown timeout; the server's grace and the exit come after it
    assert exit_seconds < SHUTDOWN_TIMEOUT + 5, f"worker {index} took {exit_seconds:.1f} s to exit"
    started = time.monotonic()
    mesh.restart(index, wait=False)
    wait_serving(mesh, index, timeout=60.0)
    serving_seconds = time.monotonic() - started
    peers = {other for other in range(len(mesh.ports)) if other != index}

    def flowing_through_it() -> bool:
        status = statuses(mesh)[index]
        from_peers = {w for w, n in status.binding.received_tuples_from.items() if n > 0}
        return spout_emitted(status) >= flowing and peers <= from_peers

    eventually(flowing_through_it, timeout=60, interval=0.1, message=f"tuples flowing through worker {index}")
    flowing_seconds = time.monotonic() - started
    return Restart(
        index, exit_seconds, serving_seconds, flowing_seconds, resent_to(mesh, index) - resent_before
    )


def coordinator(mesh: Mesh) -> dict[str, Any]:
    report: dict[str, Any] = reports(mesh)["__checkpoint"][0]
    return report


def checkpoint_after_rollback(mesh: Mesh, attempt: int) -> float:
    """Wait until the mesh rolled back past ``attempt`` and committed a checkpoint since; seconds."""
    started = time.monotonic()

    def checkpointed_again() -> bool:
        report = coordinator(mesh)
        return bool(report["attempt"] > attempt and report["last_committed"] > report["restored_from"])

    eventually(checkpointed_again, timeout=30, interval=0.05, message=f"a checkpoint after attempt {attempt}")
    return time.monotonic() - started


def print_restarts(what: str, restarts: list[Restart]) -> None:
    for r in restarts:
        print(
            f"{what}: worker {r.index} exited after {r.exit_seconds:.2f} s; its successor served after "
            f"{r.serving_seconds:.2f} s, tuples flowed through it after {r.flowing_seconds:.2f} s; "
            f"{r.resent_to_it} batch(es) resent to it"
        )


@pytest.mark.parametrize("transport", ["grpc", "zmq"])
def test_a_rolling_restart_under_full_load_with_acking_off_loses_and_duplicates_nothing(
    tmp_path: Path, transport: str
):
    config, out = numbered_config(
        tmp_path, **{"messaging.transport": transport, "topology.shutdown.timeout.secs": SHUTDOWN_TIMEOUT}
    )
    mesh = start_mesh("tests.fault.numbered:numbered", WORKERS, config)
    restarts: list[Restart] = []

    def every_spout_emitting() -> bool:
        # each worker's spout in its first life, not only the mesh in sum: a worker rolled before
        # its spout emitted would leave that life with nothing to check
        emitted = [spout_emitted(s) for s in statuses(mesh)]
        return sum(emitted) >= 20_000 and min(emitted) >= 1_000

    try:
        eventually(every_spout_emitting, timeout=60, interval=0.2, message="every spout emitting")
        for index in ROLLING_ORDER:
            restarts.append(roll(mesh, index, flowing=5_000))
        unknown = [s.unknown_task_messages for s in statuses(mesh)]
    finally:
        codes = mesh.stop()
    print_restarts(f"rolling update over {transport}", restarts)
    assert codes == [0] * WORKERS
    assert unknown == [0] * WORKERS, f"messages for tasks a worker does not own, per worker: {unknown}"
    # every restart happened under load: the running peers had batches for the stopping worker
    # that it refused, and sent them again to its successor
    assert all(r.resent_to_it > 0 for r in restarts), restarts
    produced = assert_each_once(out)
    assert len(produced) == 2 * WORKERS  # three spout tasks, each in its first and second life
    assert all(count > 0 for count in produced.values()), produced


REPEAT = 2500  # 30000 sentences
RATE = 800.0  # sentences per second per spout task: about 19 s of input, the restarts take part of it


def test_a_rolling_restart_of_the_stateful_word_count_keeps_its_counts_exact(tmp_path: Path):
    config = stateful_wordcount_config(
        tmp_path / "tuplemesh.yaml", REPEAT, RATE, **{"topology.shutdown.timeout.secs": SHUTDOWN_TIMEOUT}
    )
    mesh = start_mesh("examples.stateful_wordcount:topology", WORKERS, config)
    restarts: list[Restart] = []
    checkpointed: list[float] = []
    try:
        eventually(lambda: sum(map(spout_emitted, statuses(mesh))) >= 2_000, timeout=30, interval=0.1)
        for index in ROLLING_ORDER:
            attempt = coordinator(mesh)["attempt"]
            # worker 0 holds no spout task: its successor flows once its bolts receive
            restarts.append(roll(mesh, index, flowing=0))
            checkpointed.append(checkpoint_after_rollback(mesh, attempt))
            assert not all(s.spouts_finished for s in statuses(mesh)), "the input ran out mid-update"
        wait_settled(mesh, timeout=120.0)
        assert_exact_counts(mesh, REPEAT)
        unknown = [s.unknown_task_messages for s in statuses(mesh)]
    finally:
        codes = mesh.stop()
    print_restarts("stateful rolling update", restarts)
    after = [round(seconds, 2) for seconds in checkpointed]
    print(f"stateful rolling update: a checkpoint committed {after} s after each successor was ready")
    assert codes == [0] * WORKERS
    assert unknown == [0] * WORKERS
    assert all(r.resent_to_it > 0 for r in restarts), restarts  # each restart under load
