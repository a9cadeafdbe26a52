"""`WorkerSnapshot` <-> Admin's `WorkerStatus`: the one conversion each way.

Admin (GetStatus, WatchStats) sends a snapshot as a WorkerStatus; the process launcher, the live
progress table and ``tuplemesh top`` turn it back into the same snapshot, so every reader sums
the same fields the same way whether the workers run in this process or behind gRPC.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

from tuplemesh.core.stats import (
    EXECUTOR_COUNTERS,
    AlignmentSnapshot,
    CheckpointSnapshot,
    ErrorSnapshot,
    ExecutorSnapshot,
    HistogramSnapshot,
    PeerSnapshot,
    QueueSnapshot,
    ReceiveSnapshot,
    TransferTotals,
    WorkerSnapshot,
)
from tuplemesh.discovery.base import DiscoveryStats
from tuplemesh.transport.stats import BindingStats, ConnectionStats
from tuplemesh.v1 import admin_pb2

__all__ = ["snapshot_from_proto", "snapshot_to_proto"]

M = TypeVar("M")
S = TypeVar("S")


def snapshot_to_proto(
    snapshot: WorkerSnapshot,
    *,
    transport: str = "",
    state: str = "",
    reports_json: str = "",
    rss_bytes: int = 0,
) -> admin_pb2.WorkerStatus:
    """The WorkerStatus of ``snapshot``, with what only the process knows (its transport alias,
    serving state, resident memory and, when asked for, the task reports)."""
    s = snapshot
    binding = s.binding
    return admin_pb2.WorkerStatus(
        topology=s.topology,
        worker=s.worker,
        workers=s.workers,
        epoch=s.epoch,
        congested_tasks=s.congested_tasks,
        congested_task_ids=s.congested_task_ids,
        tasks=s.tasks,
        uptime_seconds=s.uptime_seconds,
        executors=[
            admin_pb2.ExecutorStatus(
                name=e.name,
                component=e.component,
                tasks=list(e.tasks),
                spout=e.spout,
                finished=e.finished,
                execute_seconds=_histogram_to_proto(e.execute_seconds),
                inbox_wait=_histogram_to_proto(e.inbox_wait),
                alignment=_fields_to_proto(e.alignment, admin_pb2.AlignmentStatus),
                first_error=_fields_to_proto(e.first_error, admin_pb2.UserError),
                **e.counters(),
            )
            for e in s.executors
        ],
        peers=[
            admin_pb2.PeerStatus(
                worker=p.worker,
                transferred_tuples=p.transferred_tuples,
                transferred_batches=p.transferred_batches,
                address=p.connection.address,
                state=p.connection.state,
                channel_state=p.connection.channel_state,
                sent_batches=p.connection.sent_batches,
                sent_tuples=p.connection.sent_tuples,
                sent_bytes=p.connection.sent_bytes,
                unacked_batches=p.connection.unacked_batches,
                resent_batches=p.connection.resent_batches,
                reconnects=p.connection.reconnects,
                retargets=p.connection.retargets,
                lost_on_close=p.connection.lost_on_close,
                unknown_tasks=p.connection.unknown_tasks,
                unacked_tuples=p.connection.unacked_tuples,
                unacked_bytes=p.connection.unacked_bytes,
                window_waits=p.connection.window_waits,
                window_wait_seconds=p.connection.window_wait_seconds,
                window_limit_tuples=p.connection.window_limit_tuples,
                coalesced_batches=p.connection.coalesced_batches,
            )
            for p in s.peers
        ],
        queues=[
            admin_pb2.QueueInfo(
                name=q.name, depth=q.depth, capacity=q.capacity, published=q.published, limit=q.limit
            )
            for q in s.queues
        ],
        binding=admin_pb2.BindingStatus(
            received_batches=binding.received_batches,
            received_tuples=binding.received_tuples,
            received_bytes=binding.received_bytes,
            received_tuples_from=binding.received_tuples_from,
            received_bytes_from=binding.received_bytes_from,
            rejected_batches=binding.rejected_batches,
            rejected_frames=binding.rejected_frames,
            sequence_gaps=binding.sequence_gaps,
            broadcast_messages=binding.broadcast_messages,
            shutdown_messages=binding.shutdown_messages,
            epoch_refused_batches=binding.epoch_refused_batches,
            refused=binding.refused,
        ),
        duplicate_batches=binding.duplicate_batches,
        received_messages=s.receive.messages,
        unknown_task_messages=s.receive.unknown_tasks,
        undeliverable_messages=s.receive.undeliverable,
        overflow_batches=s.receive.overflow_batches,
        receive_held_bytes=s.receive.held_bytes,
        receive_held_bytes_capacity=s.receive.held_bytes_capacity,
        receive_ceiling_waits=s.receive.ceiling_waits,
        receive_ceiling_wait_seconds=s.receive.ceiling_wait_seconds,
        transfer_held_bytes=s.transfer.held_bytes,
        transfer_held_bytes_capacity=s.transfer.held_bytes_capacity,
        transfer_ceiling_waits=s.transfer.ceiling_waits,
        transfer_ceiling_wait_seconds=s.transfer.ceiling_wait_seconds,
        transferred_batches=s.transfer.sent_batches,
        transferred_tuples=s.transfer.sent_tuples,
        lost_tuples=s.transfer.lost_tuples,
        stranded_tuples=s.transfer.stranded_tuples,
        transfer_retargets=s.transfer.retargets,
        batch_sizes=_histogram_to_proto(s.transfer.batch_sizes),
        export_lost=s.export_lost,
        discovery=admin_pb2.DiscoveryStatus(
            relists=s.discovery.relists,
            watch_restarts=s.discovery.watch_restarts,
            api_errors=s.discovery.api_errors,
            endpoint_problems=s.discovery.endpoint_problems,
        ),
        checkpoints=_fields_to_proto(s.checkpoints, admin_pb2.CheckpointStatus),
        consumed=s.consumed,
        delivered=s.delivered,
        injected=s.injected,
        local_queues_empty=s.local_queues_empty,
        idle=s.idle,
        spouts_finished=s.spouts_finished,
        spouts_quiet=s.spouts_quiet,
        transport=transport,
        state=state,
        reports_json=reports_json,
        rss_bytes=rss_bytes,
    )


def spouts_quiet(status: admin_pb2.WorkerStatus) -> bool:
    """The status's ``spouts_quiet``; a worker of a release without the field reports none, and
    its drain never counted on it: taken as quiet (at its NOT_SERVING, as that release was)."""
    return status.spouts_quiet if status.HasField("spouts_quiet") else True


def snapshot_from_proto(status: admin_pb2.WorkerStatus) -> WorkerSnapshot:
    """The WorkerSnapshot a WorkerStatus was made from (``snapshot_to_proto`` reversed)."""
    binding = status.binding
    return WorkerSnapshot(
        topology=status.topology,
        worker=status.worker,
        workers=status.workers,
        epoch=status.epoch,
        congested_tasks=status.congested_tasks,
        congested_task_ids=tuple(status.congested_task_ids),
        tasks=status.tasks,
        uptime_seconds=status.uptime_seconds,
        executors=tuple(
            ExecutorSnapshot(
                name=e.name,
                component=e.component,
                tasks=tuple(e.tasks),
                spout=e.spout,
                finished=e.finished,
                execute_seconds=_histogram_from_proto(e.execute_seconds),
                inbox_wait=_histogram_from_proto(e.inbox_wait),
                alignment=(
                    _fields_from_proto(e.alignment, AlignmentSnapshot) if e.HasField("alignment") else None
                ),
                first_error=(
                    _fields_from_proto(e.first_error, ErrorSnapshot) if e.HasField("first_error") else None
                ),
                **{name: getattr(e, name) for name in EXECUTOR_COUNTERS},
            )
            for e in status.executors
        ),
        queues=tuple(QueueSnapshot(q.name, q.depth, q.capacity, q.published, q.limit) for q in status.queues),
        peers=tuple(
            PeerSnapshot(
                worker=p.worker,
                transferred_tuples=p.transferred_tuples,
                transferred_batches=p.transferred_batches,
                connection=ConnectionStats(
                    address=p.address,
                    state=p.state,
                    channel_state=p.channel_state,
                    sent_batches=p.sent_batches,
                    sent_tuples=p.sent_tuples,
                    sent_bytes=p.sent_bytes,
                    unacked_batches=p.unacked_batches,
                    resent_batches=p.resent_batches,
                    reconnects=p.reconnects,
                    retargets=p.retargets,
                    lost_on_close=p.lost_on_close,
                    unknown_tasks=p.unknown_tasks,
                    unacked_tuples=p.unacked_tuples,
                    unacked_bytes=p.unacked_bytes,
                    window_waits=p.window_waits,
                    window_wait_seconds=p.window_wait_seconds,
                    window_limit_tuples=p.window_limit_tuples,
                    coalesced_batches=p.coalesced_batches,
                ),
            )
            for p in status.peers
        ),
        binding=BindingStats(
            received_batches=binding.received_batches,
            received_tuples=binding.received_tuples,
            received_bytes=binding.received_bytes,
            received_tuples_from=dict(binding.received_tuples_from),
            received_bytes_from=dict(binding.received_bytes_from),
            duplicate_batches=status.duplicate_batches,
            rejected_batches=binding.rejected_batches,
            rejected_frames=binding.rejected_frames,
            sequence_gaps=binding.sequence_gaps,
            broadcast_messages=(
                binding.broadcast_messages if binding.HasField("broadcast_messages") else None
            ),
            shutdown_messages=binding.shutdown_messages,
            epoch_refused_batches=binding.epoch_refused_batches,
            refused=dict(binding.refused),
        ),
        receive=ReceiveSnapshot(
            messages=status.received_messages,
            unknown_tasks=status.unknown_task_messages,
            undeliverable=status.undeliverable_messages,
            overflow_batches=status.overflow_batches,
            held_bytes=status.receive_held_bytes,
            held_bytes_capacity=status.receive_held_bytes_capacity,
            ceiling_waits=status.receive_ceiling_waits,
            ceiling_wait_seconds=status.receive_ceiling_wait_seconds,
        ),
        transfer=TransferTotals(
            sent_batches=status.transferred_batches,
            sent_tuples=status.transferred_tuples,
            lost_tuples=status.lost_tuples,
            stranded_tuples=status.stranded_tuples,
            retargets=status.transfer_retargets,
            batch_sizes=_histogram_from_proto(status.batch_sizes),
            held_bytes=status.transfer_held_bytes,
            held_bytes_capacity=status.transfer_held_bytes_capacity,
            ceiling_waits=status.transfer_ceiling_waits,
            ceiling_wait_seconds=status.transfer_ceiling_wait_seconds,
        ),
        export_lost=dict(status.export_lost),
        discovery=DiscoveryStats(
            relists=status.discovery.relists,
            watch_restarts=status.discovery.watch_restarts,
            api_errors=status.discovery.api_errors,
            endpoint_problems=status.discovery.endpoint_problems,
        ),
        checkpoints=(
            _fields_from_proto(status.checkpoints, CheckpointSnapshot)
            if status.HasField("checkpoints")
            else None
        ),
        consumed=status.consumed,
        delivered=status.delivered,
        injected=status.injected,
        local_queues_empty=status.local_queues_empty,
        spouts_finished=status.spouts_finished,
        spouts_quiet=spouts_quiet(status),
    )


def _histogram_to_proto(histogram: HistogramSnapshot) -> admin_pb2.Histogram:
    return admin_pb2.Histogram(bounds=histogram.bounds, counts=histogram.counts, sum=histogram.sum)


def _histogram_from_proto(histogram: admin_pb2.Histogram) -> HistogramSnapshot:
    return HistogramSnapshot(tuple(histogram.bounds), tuple(histogram.counts), histogram.sum)


def _fields_to_proto(snapshot: Any, message: type[M]) -> M | None:
    """A flat snapshot (every field a number or a string) as the proto message of the same field names."""
    return (
        None if snapshot is None else message(**{f.name: getattr(snapshot, f.name) for f in fields(snapshot)})
    )


def _fields_from_proto(message: Any, snapshot: type[S]) -> S:
    return snapshot(**{f.name: getattr(message, f.name) for f in fields(snapshot)})  # type: ignore[arg-type]
