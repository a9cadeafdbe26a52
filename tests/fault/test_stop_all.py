"""SIGTERM to every worker of a loaded mesh at once (helm uninstall, a node drain).

Three worker processes run ``tests.fault.numbered:numbered`` with acking off and the spouts flat
out. Every worker must exit within ``topology.shutdown.timeout.secs`` with code 0, and every
number a spout emitted before it stopped must have reached a sink exactly once: the workers
drain into each other instead of refusing each other's in-flight tuples. A checkpointed mesh
(the stateful word count) also leaves a final checkpoint that holds everything it processed.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from examples.wordcount import CORPUS
from tests.fault.harness import numbered_config, reports, statuses, write_config
from tests.fault.numbered import assert_each_once
from tests.helpers import eventually
from tests.worker.conftest import Mesh, start_mesh
from tuplemesh.state import DictState, PartKey, SqliteStore
from tuplemesh.state.codec import decode_value

WORKERS = 3
SHUTDOWN_TIMEOUT = 10.0


def spout_emitted(mesh: Mesh) -> int:
    return sum(e.emitted for status in statuses(mesh) for e in status.executors if e.spout)


def every_spout_under_load(mesh: Mesh, total: int) -> bool:
    """Every worker's spouts have emitted, and all of them ``total`` tuples: a worker's spouts
    start once its epoch is confirmed, which may come after the others have emitted ``total``."""
    per_worker = [sum(e.emitted for e in status.executors if e.spout) for status in statuses(mesh)]
    return all(per_worker) and sum(per_worker) >= total


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


@pytest.mark.parametrize("sender", ["threads", "event-loop"])
def test_sigterm_to_every_worker_under_full_load_ends_in_time_with_nothing_lost(tmp_path: Path, sender: str):
    """Over grpc, with the links on threads (what ``auto`` picks for 3 workers) and on the event
    loop (what it picks above 16)."""
    config, out = numbered_config(
        tmp_path, **{"topology.shutdown.timeout.secs": SHUTDOWN_TIMEOUT, "messaging.grpc.sender": sender}
    )
    mesh = start_mesh("tests.fault.numbered:numbered", WORKERS, config)
    try:
        # every queue on the path fills: the spouts are only held back by backpressure
        eventually(lambda: every_spout_under_load(mesh, 50_000), timeout=60, interval=0.2)
        ended = sigterm_all(mesh)
    finally:
        for proc in mesh.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    codes = [code for code, _ in ended]
    slowest = max(seconds for _, seconds in ended)
    emitted = assert_each_once(out)
    print(f"stop-all: exits after {[round(s, 2) for _, s in ended]} s, {sum(emitted.values())} tuples")
    assert codes == [0] * WORKERS
    assert slowest < SHUTDOWN_TIMEOUT
    assert len(emitted) == 3 and all(n > 0 for n in emitted.values())


def test_a_checkpointed_mesh_stopped_at_once_leaves_a_final_checkpoint_of_all_it_processed(tmp_path: Path):
    store_path = tmp_path / "state.sqlite"
    config = write_config(
        tmp_path / "tuplemesh.yaml",
        **{
            "wordcount.repeat": 5000,
            "wordcount.rate": 2000.0,
            "topology.state.backend": "sqlite",
            "topology.state.sqlite.path": str(store_path),
            # the first periodic checkpoint would come a minute after the start: any before is the stop's
            "topology.state.checkpoint.interval.ms": 60_000,
            "topology.shutdown.timeout.secs": SHUTDOWN_TIMEOUT,
        },
    )
    mesh = start_mesh("examples.stateful_wordcount:topology", WORKERS, config)
    store = SqliteStore(store_path)
    try:
        eventually(lambda: spout_emitted(mesh) >= 3000, timeout=30, interval=0.1)
        # a spout task's positions keep the parity of its first sentence (task index 0 or 1)
        before = {r["position"] % 2: r["position"] for r in reports(mesh)["sentences"]}
        assert store.last_committed("stateful-wordcount") is None
        ended = sigterm_all(mesh)
    finally:
        for proc in mesh.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    print(f"stop-all with state: exits after {[round(s, 2) for _, s in ended]} s")
    assert [code for code, _ in ended] == [0] * WORKERS
    assert max(seconds for _, seconds in ended) < SHUTDOWN_TIMEOUT
    try:
        final = store.last_committed("stateful-wordcount")
        assert final is not None
        # tasks: __checkpoint 1, count 2-4, sentences 5-6, split 7-9 (sorted component names)
        positions = [
            decode_value(store.get_part(PartKey("stateful-wordcount", "sentences", t), final) or b"")
            for t in (5, 6)
        ]
        counts: Counter[str] = Counter()
        for task in (2, 3, 4):
            blob = store.get_part(PartKey("stateful-wordcount", "count", task), final)
            assert blob is not None
            counts.update(dict(DictState.restore(blob).items()))
    finally:
        store.close()
    # the spouts kept their places past what they had emitted before the stop
    assert all(position >= before[index] for index, position in enumerate(positions))
    # and the counts hold exactly the words of every sentence before those places
    expected: Counter[str] = Counter()
    for first_index, position in enumerate(positions):
        for i in range(first_index, position, 2):
            expected.update(CORPUS[i % len(CORPUS)].split())
    assert counts == expected
