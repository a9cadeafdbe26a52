"""Checkpoint counts in the worker snapshot, on /metrics and through Admin's WorkerStatus: the
coordinator's on the one worker that runs it, each aligned bolt executor's on its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from examples.wordcount import expected_counts
from tests.helpers import eventually
from tests.state.test_checkpointing import _FLAKY, FlakyStore, counts, word_count
from tuplemesh.core.stats import CheckpointSnapshot, WorkerSnapshot
from tuplemesh.metrics import WorkerCollector
from tuplemesh.server.status_proto import snapshot_from_proto, snapshot_to_proto
from tuplemesh.state.protocol import COORDINATOR
from tuplemesh.worker.local_cluster import LocalCluster

REPEAT = 100


@pytest.fixture
def clusters() -> Iterator[list[LocalCluster]]:
    """Running clusters; a test that stops one itself (to read counts that no longer move)
    takes it out of the list."""
    running: list[LocalCluster] = []
    yield running
    FlakyStore.down.clear()
    for cluster in running:
        cluster.stop()


def start(clusters: list[LocalCluster]) -> LocalCluster:
    """The stateful word count on two workers, checkpoints every 30 ms in a store that can fail."""
    cluster = LocalCluster(
        word_count(REPEAT),
        2,
        {
            "messaging.transport": "local",
            "topology.state.backend": "tests.state.test_checkpointing:FlakyStore",
            "topology.state.checkpoint.interval.ms": 30,
            "wordcount.rate": 600,
        },
    )
    clusters.append(cluster)
    cluster.start()
    return cluster


def coordinating(cluster: LocalCluster) -> tuple[int, CheckpointSnapshot]:
    """(worker index, coordinator counts) of the one worker that runs the coordinator."""
    found = [(s.worker, s.checkpoints) for s in cluster.snapshots() if s.checkpoints is not None]
    assert len(found) == 1, f"coordinator counts on {len(found)} workers"
    return found[0]


def alignment_totals(snapshots: list[WorkerSnapshot], component: str) -> dict[str, int]:
    totals: dict[str, int] = {}
    for snapshot in snapshots:
        for executor in snapshot.executors:
            if executor.component == component:
                assert executor.alignment is not None, f"{executor.name} aligns but has no counts"
                for name in ("parts_stored", "parts_failed", "stale_dropped", "alignments_given_up"):
                    totals[name] = totals.get(name, 0) + getattr(executor.alignment, name)
    return totals


def test_a_clean_run_counts_every_committed_checkpoint_and_every_stored_part(clusters: list[LocalCluster]):
    cluster = start(clusters)
    assert cluster.run_until_done(60)
    assert counts(cluster) == expected_counts(REPEAT)
    clusters.remove(cluster)
    assert cluster.stop()  # checkpoints go on after the run: stopped, the counts hold still
    snapshots = cluster.snapshots()
    index, checkpoints = coordinating(cluster)
    assert checkpoints.committed >= 2
    assert checkpoints.last_committed == _FLAKY.last_committed(cluster.topology.name)
    assert checkpoints.abandoned == checkpoints.store_errors == 0
    assert checkpoints.attempt == 2  # two worker starts
    assert checkpoints.rollbacks in (1, 2)  # the first tick may have seen one start or both
    assert 0.0 < checkpoints.last_duration_seconds < 10.0
    # two count tasks store a part of every committed checkpoint (and of one still under way)
    count = alignment_totals(snapshots, "count")
    assert 2 * checkpoints.committed <= count["parts_stored"] <= 2 * (checkpoints.committed + 1)
    assert count["parts_failed"] == count["alignments_given_up"] == 0
    # a first tick that saw one worker started rolls back again once the other starts: tuples
    # of the first attempt still on their way are then stale, dropped (and replayed: the counts
    # above are exact); with one rollback there is no earlier attempt to drop from
    assert count["stale_dropped"] == 0 or checkpoints.rollbacks == 2
    # split aligns (it forwards barriers) but keeps no state; spouts and the coordinator do not align
    assert alignment_totals(snapshots, "split")["parts_stored"] == 0
    assert all(
        e.alignment is None for s in snapshots for e in s.executors if e.spout or e.component == COORDINATOR
    )

    # Admin carries it all, and /metrics exports it
    for snapshot in snapshots:
        assert snapshot_from_proto(snapshot_to_proto(snapshot)) == snapshot
    registry = CollectorRegistry()
    registry.register(WorkerCollector(cluster.workers[index]))
    exposition = generate_latest(registry).decode()
    label = f'{{worker="{index}"}}'
    assert f"tuplemesh_checkpoints_committed_total{label} {float(checkpoints.committed)}" in exposition
    assert f"tuplemesh_checkpoint_last_committed{label} {float(checkpoints.last_committed)}" in exposition
    stored = sum(
        e.alignment.parts_stored
        for e in snapshots[index].executors
        if e.component == "count" and e.alignment is not None
    )
    assert (
        f'tuplemesh_checkpoint_parts_stored_total{{component="count",worker="{index}"}} {float(stored)}'
        in exposition
    )
    other = cluster.workers[1 - index]
    registry = CollectorRegistry()
    registry.register(WorkerCollector(other))
    assert "tuplemesh_checkpoints_committed_total{" not in generate_latest(registry).decode()


def test_a_store_outage_counts_failed_parts_and_abandoned_checkpoints(clusters: list[LocalCluster]):
    cluster = start(clusters)
    eventually(lambda: coordinating(cluster)[1].committed >= 2, timeout=20)
    FlakyStore.down.set()
    eventually(lambda: coordinating(cluster)[1].abandoned >= 2, timeout=20)
    stalled = coordinating(cluster)[1]
    failed = alignment_totals(cluster.snapshots(), "count")["parts_failed"]
    assert failed >= 2  # a refused part abandons its checkpoint
    eventually(lambda: coordinating(cluster)[1].abandoned > stalled.abandoned, timeout=20)
    assert coordinating(cluster)[1].committed == stalled.committed  # nothing commits meanwhile
    FlakyStore.down.clear()
    eventually(lambda: coordinating(cluster)[1].committed >= stalled.committed + 2, timeout=20)
    failed = alignment_totals(cluster.snapshots(), "count")["parts_failed"]  # the store is back
    assert cluster.run_until_done(60)
    assert counts(cluster) == expected_counts(REPEAT)
    assert alignment_totals(cluster.snapshots(), "count")["parts_failed"] == failed  # none since
