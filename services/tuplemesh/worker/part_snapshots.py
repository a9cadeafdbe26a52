"""How each part of a worker reads into its snapshot (`tuplemesh.core.stats`): an executor, a ring,
the receive path, the transfer path and its connections. `Worker.snapshot` puts them together
and adds what only the whole worker knows (consumed and delivered, idleness, features' fields).

Each function reads its part's counters once, from any thread.
"""

from __future__ import annotations

from typing import Any

from tuplemesh.core.budget import ByteBudget
from tuplemesh.core.stats import (
    ExecutorSnapshot,
    HistogramSnapshot,
    PeerSnapshot,
    QueueSnapshot,
    ReceiveSnapshot,
    TransferTotals,
)
from tuplemesh.disruptor import RingBuffer
from tuplemesh.worker.executor import SpoutExecutor
from tuplemesh.worker.executor_base import Executor
from tuplemesh.worker.receive import ReceivePath
from tuplemesh.worker.transfer import TransferPath, TransferStats

__all__ = ["executor_snapshot", "peer_snapshots", "queue_snapshot", "receive_snapshot", "transfer_totals"]


def executor_snapshot(executor: Executor[Any], counters: dict[str, int]) -> ExecutorSnapshot:
    """``executor``'s snapshot, with ``counters`` (its counters, read once by the caller)."""
    outbox = executor.outbox
    return ExecutorSnapshot(
        name=executor.name,
        component=executor.component,
        tasks=executor.task_ids,
        spout=isinstance(executor, SpoutExecutor),
        finished=isinstance(executor, SpoutExecutor) and executor.finished.is_set(),
        delivered=outbox.delivered,
        backpressure_holds=outbox.backpressure_holds,
        backpressure_hold_seconds=outbox.backpressure_hold_seconds,
        execute_seconds=HistogramSnapshot.of(executor.execute_seconds),
        inbox_wait=HistogramSnapshot.of(executor.inbox_wait),
        first_error=executor.first_error,
        **{**counters, **executor.features.fields()},
    )


def queue_snapshot(name: str, ring: RingBuffer[Any]) -> QueueSnapshot:
    """One ring's depth, size, publishes, queue-time limit and producer waits."""
    sequencer = ring.sequencer
    return QueueSnapshot(
        name,
        ring.buffer_size - ring.remaining_capacity(),
        ring.buffer_size,
        ring.cursor + 1,
        sequencer.limit,
        sequencer.producer_waits,
        sequencer.producer_wait_seconds,
    )


def receive_snapshot(receive: ReceivePath) -> ReceiveSnapshot:
    """What the receive path took in, refused and holds."""
    return ReceiveSnapshot(
        messages=receive.received,
        unknown_tasks=receive.unknown,
        undeliverable=receive.undeliverable,
        overflow_batches=receive.overflowing,
        held_bytes=receive.reclaim(),
        held_bytes_capacity=receive.max_held_bytes,
        ceiling_waits=receive.ceiling_waits,
        ceiling_wait_seconds=receive.ceiling_wait_seconds,
    )


def transfer_totals(transfer: TransferPath, stats: TransferStats, budget: ByteBudget) -> TransferTotals:
    """The transfer path's totals (``stats``: its counters, read once by the caller) and the
    worker's ceiling on bytes queued for other workers (``budget``)."""
    return TransferTotals(
        sent_batches=stats.sent_batches,
        sent_tuples=stats.sent_tuples,
        lost_tuples=stats.lost_tuples,
        stranded_tuples=stats.stranded_tuples,
        retargets=stats.retargets,
        batch_sizes=HistogramSnapshot.of(transfer.batch_sizes),
        held_bytes=budget.used,
        held_bytes_capacity=budget.limit,
        ceiling_waits=budget.waits,
        ceiling_wait_seconds=budget.wait_seconds,
    )


def peer_snapshots(transfer: TransferPath, stats: TransferStats) -> tuple[PeerSnapshot, ...]:
    """Each connection to a peer, by peer index, with what was sent to it."""
    return tuple(
        PeerSnapshot(
            worker=peer,
            transferred_tuples=stats.sent_tuples_to.get(peer, 0),
            transferred_batches=stats.sent_batches_to.get(peer, 0),
            connection=connection.stats(),
        )
        for peer, connection in sorted(transfer.connections.items())
    )
