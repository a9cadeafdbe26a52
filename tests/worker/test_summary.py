"""`summarize` and the snapshot <-> proto conversion: the same RunSummary in both run modes."""

from __future__ import annotations

from dataclasses import replace

from examples import wordcount
from tuplemesh.config import Config
from tuplemesh.core.stats import (
    ExecutorSnapshot,
    HistogramSnapshot,
    PeerSnapshot,
    QueueSnapshot,
    ReceiveSnapshot,
    TransferTotals,
    WorkerSnapshot,
)
from tuplemesh.core.summary import summarize
from tuplemesh.discovery import DiscoveryStats
from tuplemesh.server.status_proto import snapshot_from_proto, snapshot_to_proto
from tuplemesh.transport.stats import BindingStats, ConnectionStats
from tuplemesh.worker.local_cluster import LocalCluster


def worker_snapshot(index: int, *, scale: int, broadcasts: int | None) -> WorkerSnapshot:
    """A worker of a spout ``s`` (one executor) and an export bolt ``out`` (two executors)."""
    histogram = HistogramSnapshot((0.001,), (2 * scale, scale), 0.5 * scale)
    return WorkerSnapshot(
        topology="t",
        worker=index,
        workers=2,
        uptime_seconds=12.25,
        executors=(
            ExecutorSnapshot(
                f"s-{index}",
                "s",
                (1 + index,),
                True,
                True,
                emitted=10 * scale,
                spout_errors=scale,
                dropped_on_stop=2 * scale,
                delivered=10 * scale,
            ),
            ExecutorSnapshot(
                f"out-a-{index}",
                "out",
                (3 + index,),
                False,
                False,
                executed=4 * scale,
                received=4 * scale,
                errors=1,
                acked=4 * scale,
                execute_seconds=histogram,
            ),
            ExecutorSnapshot(
                f"out-b-{index}",
                "out",
                (5 + index,),
                False,
                False,
                executed=6 * scale,
                received=6 * scale,
                deserialize_errors=scale,
                abandoned_on_halt=3 * scale,
                inbox_wait=histogram,
            ),
        ),
        queues=(
            QueueSnapshot(f"inbox:s-{index}", 0, 8, 3, 8),
            QueueSnapshot("transfer", 1, 16, 40 * scale, 16),
        ),
        peers=(
            PeerSnapshot(
                worker=1 - index,
                transferred_tuples=7 * scale,
                transferred_batches=2 * scale,
                connection=ConnectionStats(
                    f"127.0.0.1:{6700 + 1 - index}",
                    "READY",
                    sent_batches=3 * scale,
                    sent_tuples=7 * scale,
                    sent_bytes=99 * scale,
                    resent_batches=scale,
                    retargets=1,
                    lost_on_close=5 * scale,
                    unknown_tasks=scale,
                ),
            ),
        ),
        binding=BindingStats(
            received_batches=2 * scale,
            received_tuples=7 * scale,
            received_bytes=99 * scale,
            received_tuples_from={1 - index: 7 * scale},
            received_bytes_from={1 - index: 99 * scale},
            duplicate_batches=scale,
            rejected_batches=2 * scale,
            rejected_frames=3 * scale,
            sequence_gaps=4 * scale,
            broadcast_messages=broadcasts,
        ),
        receive=ReceiveSnapshot(
            messages=7 * scale, unknown_tasks=scale, undeliverable=2 * scale, overflow_batches=0
        ),
        transfer=TransferTotals(
            2 * scale,
            7 * scale,
            lost_tuples=scale,
            stranded_tuples=3 * scale,
            retargets=1,
            batch_sizes=histogram,
        ),
        export_lost={"out": 6 * scale},
        discovery=DiscoveryStats(relists=1, api_errors=2),
        consumed=11 * scale,
        delivered=10 * scale + 1,
        injected=1,
        local_queues_empty=False,
        spouts_finished=True,
    )


SNAPSHOTS = [worker_snapshot(0, scale=1, broadcasts=None), worker_snapshot(1, scale=10, broadcasts=4)]


def summary_of(snapshots: list[WorkerSnapshot]):
    return summarize(
        snapshots, topology="t", workers=2, transport="grpc", seconds=2.0, completed=True, matched=True,
        message="ok",
    )  # fmt: skip


def test_summarize_sums_components_across_workers_and_executors():
    summary = summary_of(SNAPSHOTS)
    assert summary.components["s"] == {
        "emitted": 110, "executed": 0, "received": 0, "acked": 0, "failed": 0, "timed_out": 0,
        "errors": 0, "spout_errors": 11, "deserialize_errors": 0, "dropped_on_stop": 22,
        "abandoned_on_halt": 0, "delivered": 110,
    }  # fmt: skip
    out = summary.components["out"]
    assert (out["executed"], out["received"], out["acked"], out["errors"]) == (110, 110, 44, 2)
    assert (out["deserialize_errors"], out["export_lost"]) == (11, 66)
    assert out["abandoned_on_halt"] == 33  # 3 x (1 + 10): both workers' halted executors
    assert "export_lost" not in summary.components["s"]


def test_summarize_counts_every_loss_and_refusal():
    assert summary_of(SNAPSHOTS).transfer == {
        "batches": 22, "messages": 77, "lost": 11, "stranded": 33, "lost_on_close": 55,
        "unknown_task": 11, "undeliverable": 22, "duplicates": 11, "rejected_batches": 22,
        "rejected_frames": 33, "sequence_gaps": 44,
    }  # fmt: skip
    assert summary_of([]).transfer["duplicates"] == 0 and summary_of([]).components == {}


def test_a_snapshot_survives_the_trip_through_admin_unchanged():
    for snapshot in SNAPSHOTS:
        status = snapshot_to_proto(snapshot, transport="grpc", state="SERVING")
        assert status.idle is False and status.state == "SERVING"
        assert snapshot_from_proto(status) == snapshot
    idle = replace(SNAPSHOTS[0], local_queues_empty=True, peers=())
    assert snapshot_to_proto(idle).idle is True


def test_process_mode_and_local_mode_summaries_are_the_same():
    """The launcher's path (GetStatus protos) gives the RunSummary local mode gives."""
    cluster = LocalCluster(wordcount.build(repeat=3), 2, Config({"messaging.transport": "local"}))
    local = cluster.run(30.0)
    assert local.completed and local.matched, local.message
    snapshots = cluster.snapshots()
    through_admin = [snapshot_from_proto(snapshot_to_proto(s)) for s in snapshots]
    assert through_admin == snapshots
    assert summary_of(through_admin).as_dict() == summary_of(snapshots).as_dict()
    assert summary_of(snapshots).components == local.components
    assert summary_of(snapshots).transfer == local.transfer
    assert local.components["count"]["executed"] == sum(wordcount.expected_counts(3).values())
