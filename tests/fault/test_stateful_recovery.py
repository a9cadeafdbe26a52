"""Exactly-once state through worker deaths: the stateful word count on three worker processes.

``examples.stateful_wordcount`` counts words in checkpointed state, fed by a replayable spout
paced to run for several seconds. Workers are SIGKILLed mid-run and started again; the mesh
rolls back to its last complete checkpoint each time and replays, and the final counts must be
EXACTLY those of a run without failures (at-least-once would count some sentences twice).

Task placement (executors dealt round-robin): worker 0 holds the coordinator, a count and a
split task; workers 1 and 2 each hold a spout task, a split task and a count task, so every kill
loses state, and killing 1 or 2 a spout's position too.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from examples.wordcount import expected_counts
from tests.fault.harness import reports, statuses, wait_settled, write_config
from tests.helpers import eventually
from tests.worker.conftest import Mesh, start_mesh
from tuplemesh.state import PartKey, SqliteStore

TARGET = "examples.stateful_wordcount:topology"
TOPOLOGY = "stateful-wordcount"
REPEAT = 1500  # 18000 sentences, 117000 words
RATE = 1200.0  # sentences per second per spout task: the run takes about 7.5 s


def config(tmp_path: Path) -> tuple[Path, Path]:
    store = tmp_path / "state.sqlite"
    path = write_config(
        tmp_path / "tuplemesh.yaml",
        **{
            "wordcount.repeat": REPEAT,
            "wordcount.rate": RATE,
            "topology.state.backend": "sqlite",
            "topology.state.sqlite.path": str(store),
            "topology.state.checkpoint.interval.ms": 200,
            "storm.messaging.netty.min_wait_ms": 20,
            "storm.messaging.netty.max_wait_ms": 200,
        },
    )
    return path, store


def coordinator(mesh: Mesh) -> dict[str, Any]:
    report: dict[str, Any] = reports(mesh)["__checkpoint"][0]
    return report


def spout_emitted(mesh: Mesh) -> int:
    return sum(e.emitted for status in statuses(mesh) for e in status.executors if e.spout)


def last_committed(store: Path) -> int:
    opened = SqliteStore(store)
    try:
        return opened.last_committed(TOPOLOGY) or 0
    finally:
        opened.close()


def wait_commits(store: Path, beyond: int) -> int:
    """Wait until a checkpoint numbered above ``beyond`` is committed; its number."""

    def committed() -> int:
        last = last_committed(store)
        return last if last > beyond else 0

    return eventually(committed, 30, 0.05, f"a checkpoint above {beyond} committed")


def wait_attempt(mesh: Mesh, attempt: int) -> None:
    """Wait until the coordinator began ``attempt`` (every worker start so far counted)."""
    eventually(lambda: coordinator(mesh)["attempt"] == attempt, 30, 0.05, f"attempt {attempt} begun")


def final_counts(mesh: Mesh) -> Counter[str]:
    merged: Counter[str] = Counter()
    for report in reports(mesh)["count"]:
        assert not merged.keys() & report["counts"].keys(), "a word counted by two tasks"
        merged.update(report["counts"])
    return merged


def assert_exact(mesh: Mesh) -> None:
    counts = final_counts(mesh)
    expected = expected_counts(REPEAT)
    wrong = {w: (counts[w], expected[w]) for w in expected.keys() | counts.keys() if counts[w] != expected[w]}
    assert not wrong, f"{len(wrong)} words counted wrong (got, want): {dict(list(wrong.items())[:5])}"


def assert_committed_checkpoint_is_whole(store_path: Path) -> None:
    """Every part of the last committed checkpoint is in the store: one per spout and count task."""
    store = SqliteStore(store_path)
    try:
        last = store.last_committed(TOPOLOGY)
        assert last is not None
        # tasks: __checkpoint 1, count 2-4, sentences 5-6, split 7-9 (sorted component names)
        parts = [PartKey(TOPOLOGY, "count", t) for t in (2, 3, 4)] + [
            PartKey(TOPOLOGY, "sentences", t) for t in (5, 6)
        ]
        assert all(store.get_part(key, last) is not None for key in parts)
    finally:
        store.close()


def test_two_workers_killed_one_after_the_other_counts_stay_exact(tmp_path: Path):
    conf, store = config(tmp_path)
    mesh = start_mesh(TARGET, 3, conf)
    try:
        wait_attempt(mesh, 3)  # the three first starts
        committed = wait_commits(store, 2)
        mesh.kill(1)
        mesh.restart(1)
        wait_attempt(mesh, 4)
        assert coordinator(mesh)["restored_from"] >= committed  # a committed checkpoint, not the beginning
        committed = wait_commits(store, committed + 2)
        assert spout_emitted(mesh) < REPEAT * 12  # still mid-run when the second kill comes
        mesh.kill(0)  # the coordinator's worker: a new coordinator takes over from the store
        mesh.restart(0)
        wait_attempt(mesh, 5)
        assert coordinator(mesh)["restored_from"] >= committed
        wait_settled(mesh, timeout=90.0)
        assert_exact(mesh)
        assert coordinator(mesh)["abandoned"] == 0  # interrupted checkpoints are dropped, not timed out
    finally:
        codes = mesh.stop()
    assert codes == [0, 0, 0]
    assert_committed_checkpoint_is_whole(store)


@pytest.mark.parametrize("how", ["killed", "stopped"])
def test_the_whole_mesh_ended_and_started_again_resumes_from_its_checkpoint(tmp_path: Path, how: str):
    conf, store = config(tmp_path)
    mesh = start_mesh(TARGET, 3, conf)
    try:
        wait_attempt(mesh, 3)
        wait_commits(store, 3)
        if how == "killed":
            for index in range(3):
                mesh.kill(index)
    finally:
        mesh.stop()  # SIGTERM: the workers drain and exit
    resumed_from = last_committed(store)
    mesh = start_mesh(TARGET, 3, conf)
    try:
        wait_attempt(mesh, 6)
        assert coordinator(mesh)["restored_from"] >= resumed_from
        wait_settled(mesh, timeout=90.0)
        assert_exact(mesh)
        # the spouts went on from their checkpointed positions: they did not emit everything again
        assert sum(r["emitted"] for r in reports(mesh)["sentences"]) < REPEAT * len(expected_counts(1))
    finally:
        codes = mesh.stop()
    assert codes == [0, 0, 0]
