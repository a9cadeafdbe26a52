"""`EXPORTS`: which `WorkerSnapshot` field becomes which Prometheus metric.

The collector builds every worker metric from this table and nothing else, and a test walks the
snapshot's fields against it: a field is either here or listed as Admin-only in
docs/operations.md. Where the field sits decides the labels besides ``worker``: fields of
``executors`` are summed by ``component`` (or their maximum taken, ``Export.combine``), of
``queues`` labelled by ``queue``, of ``peers`` by ``peer``; a mapping field is labelled by its
key (``Export.key``). An optional part that is absent (None) gives no sample.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["EXPORTS", "Export"]


@dataclass(frozen=True, slots=True)
class Export:
    metric: str
    doc: str
    kind: Literal["counter", "gauge", "histogram"] = "counter"
    #: The label of a mapping field's keys.
    key: str | None = None
    #: Turns the field's value into the sample (e.g. a state into 1 or 0).
    value: Callable[[Any], float] | None = None
    #: How the values of one component's executors make its sample: a high-water mark takes the max.
    combine: Literal["sum", "max"] = "sum"


def _ready(state: str) -> float:
    return 1.0 if state == "READY" else 0.0


EXPORTS: dict[str, Export] = {
    # executors, summed by component
    "executors.emitted": Export(
        "tuplemesh_tuples_emitted_total", "Tuples emitted (emit calls) by component."
    ),
    "executors.executed": Export(
        "tuplemesh_tuples_executed_total", "Tuples executed by component (a broadcast counts per task)."
    ),
    "executors.received": Export(
        "tuplemesh_tuples_received_total", "Tuples taken from the component's inboxes."
    ),
    "executors.acked": Export("tuplemesh_tuples_acked_total", "Tuples acked by component."),
    "executors.failed": Export(
        "tuplemesh_tuples_failed_total", "Tuples failed by component (including bolt errors)."
    ),
    "executors.delivered": Export(
        "tuplemesh_tuples_delivered_total", "(task, tuple) deliveries the component's emits made."
    ),
    "executors.backpressure_holds": Export(
        "tuplemesh_backpressure_holds_total",
        "Times a component's emits were held on a congested task of another worker (per-task "
        "backpressure: its inbox is above topology.backpressure.watermark), or on a task of its "
        "own worker that sets them aside while it aligns a checkpoint's barriers.",
    ),
    "executors.backpressure_hold_seconds": Export(
        "tuplemesh_backpressure_hold_seconds_total",
        "Time a component's emits were held on congested tasks of other workers, or on aligning "
        "tasks of their own, counted as each hold goes.",
    ),
    "executors.errors": Export(
        "tuplemesh_bolt_errors_total", "Exceptions raised by bolt code, by component."
    ),
    "executors.spout_errors": Export(
        "tuplemesh_spout_errors_total", "Exceptions raised by spout code, by component."
    ),
    "executors.timed_out": Export(
        "tuplemesh_spout_timed_out_total",
        "Tuple trees failed by topology.message.timeout.secs (acking on), by spout component.",
    ),
    "executors.deserialize_errors": Export(
        "tuplemesh_deserialize_errors_total", "Payloads that could not be decoded, by component."
    ),
    "executors.dropped_on_stop": Export(
        "tuplemesh_tuples_dropped_on_stop_total",
        "Emitted tuples abandoned at stop because a destination had halted (lost), by component.",
    ),
    "executors.abandoned_on_halt": Export(
        "tuplemesh_tuples_abandoned_on_halt_total",
        "Tuples a bolt executor halted at the shutdown timeout left unexecuted (lost), by component.",
    ),
    "executors.execute_seconds": Export(
        "tuplemesh_execute_seconds",
        "Execute time per tuple: each inbox batch is timed as a whole and its mean is observed "
        "once per tuple it executed, so the count equals tuples executed.",
        "histogram",
    ),
    "executors.inbox_wait": Export(
        "tuplemesh_inbox_wait_seconds",
        "Time a batch waited in an executor inbox before its first tuple ran.",
        "histogram",
    ),
    # checkpoint alignment, by (stateful or downstream-of-state) bolt component
    "executors.alignment.stale_dropped": Export(
        "tuplemesh_checkpoint_stale_tuples_dropped_total",
        "Tuples of an earlier attempt dropped after a rollback (the rewound spouts send them again).",
    ),
    "executors.alignment.alignments_given_up": Export(
        "tuplemesh_checkpoint_alignments_given_up_total",
        "Checkpoints a task stopped aligning for (hold-back buffer full, or a newer barrier came).",
    ),
    "executors.alignment.parts_stored": Export(
        "tuplemesh_checkpoint_parts_stored_total", "Task state parts of checkpoints stored."
    ),
    "executors.alignment.parts_failed": Export(
        "tuplemesh_checkpoint_parts_failed_total",
        "Task state parts the store refused or that could not be serialized (each abandons its checkpoint).",
    ),
    "executors.alignment.held_max": Export(
        "tuplemesh_checkpoint_held_tuples_max",
        "The most tuples one task held back at once while aligning barriers.",
        "gauge",
        combine="max",
    ),
    # queues, by queue
    "queues.depth": Export("tuplemesh_queue_depth_slots", "Slots in use (each holds a batch).", "gauge"),
    "queues.capacity": Export("tuplemesh_queue_capacity_slots", "Slots in all.", "gauge"),
    "queues.limit": Export(
        "tuplemesh_queue_limit_slots",
        "Slots producers may fill now: those the consumer drains in topology.backpressure.target.ms "
        "(the capacity when that is 0).",
        "gauge",
    ),
    "queues.producer_waits": Export(
        "tuplemesh_queue_producer_waits_total",
        "Claims (of one slot or more) that waited for room: the queue was full, or filled to the "
        "slots topology.backpressure.target.ms allows.",
    ),
    "queues.producer_wait_seconds": Export(
        "tuplemesh_queue_producer_wait_seconds_total",
        "Time producers waited for room in the queue, counted as each wait goes.",
    ),
    "queues.published": Export(
        "tuplemesh_queue_published_batches_total", "Batches published into the queue."
    ),
    # peers, by peer
    "peers.transferred_tuples": Export(
        "tuplemesh_transfer_tuples_sent_total", "Tuples handed to the transport, per peer."
    ),
    "peers.transferred_batches": Export(
        "tuplemesh_transfer_batches_sent_total", "Batches handed to the transport, per peer."
    ),
    "peers.connection.channel_state": Export(
        "tuplemesh_peer_connected", "1 while the connection to the peer is up.", "gauge", value=_ready
    ),
    "peers.connection.sent_batches": Export(
        "tuplemesh_peer_written_batches_total", "Batches written to the peer, resends included."
    ),
    "peers.connection.sent_bytes": Export(
        "tuplemesh_transfer_bytes_sent_total", "Packed bytes queued to the transport, per peer."
    ),
    "peers.connection.unacked_batches": Export(
        "tuplemesh_peer_unacked_batches", "Batches sent and not yet acknowledged.", "gauge"
    ),
    "peers.connection.unacked_tuples": Export(
        "tuplemesh_peer_unacked_tuples", "Tuples sent and not yet acknowledged (in flight).", "gauge"
    ),
    "peers.connection.unacked_bytes": Export(
        "tuplemesh_peer_unacked_bytes", "Framed bytes sent and not yet acknowledged (in flight).", "gauge"
    ),
    "peers.connection.window_limit_tuples": Export(
        "tuplemesh_peer_window_limit_tuples",
        "Tuples the send window lets be in flight to the peer now: its throughput times "
        "messaging.window.target.ms (0: not sized by time, or not measured yet).",
        "gauge",
    ),
    "peers.connection.window_limit_bytes": Export(
        "tuplemesh_peer_window_limit_bytes",
        "Bytes the send window lets be in flight to the peer now: its throughput in bytes times "
        "its round trip plus messaging.window.target.ms, never below 1 MiB (0: not sized by time, "
        "or not held back by it yet).",
        "gauge",
    ),
    "peers.connection.granted_bytes": Export(
        "tuplemesh_peer_granted_bytes",
        "Unacknowledged bytes the peer lets this worker have in flight to it now: its share of "
        "the room under its topology.receive.max.bytes (0: it grants none).",
        "gauge",
    ),
    "peers.connection.window_waits": Export(
        "tuplemesh_peer_window_waits_total",
        "Batches that waited for room in the peer's send window (batches, bytes or its credit).",
    ),
    "peers.connection.window_wait_seconds": Export(
        "tuplemesh_peer_window_wait_seconds_total",
        "Time batches spent waiting for room in the peer's send window.",
    ),
    "peers.connection.coalesced_batches": Export(
        "tuplemesh_peer_coalesced_batches_total",
        "Batches that joined the one waiting to go to the peer instead of a message of their own.",
    ),
    "peers.connection.resent_batches": Export(
        "tuplemesh_peer_resent_batches_total", "Batches resent after a reconnect, a retarget or a gap."
    ),
    "peers.connection.reconnects": Export("tuplemesh_peer_reconnects_total", "Reconnections to the peer."),
    "peers.connection.retargets": Export(
        "tuplemesh_peer_retargets_total", "Times the peer moved and its connection followed."
    ),
    "peers.connection.lost_on_close": Export(
        "tuplemesh_peer_tuples_lost_on_close_total",
        "Tuples still unacknowledged when the connection closed (lost).",
    ),
    "peers.connection.unknown_tasks": Export(
        "tuplemesh_peer_unknown_task_tuples_total", "Tuples the peer reported it does not own."
    ),
    # the binding
    "binding.received_batches": Export(
        "tuplemesh_transfer_batches_received_total",
        "Batches the transport delivered (duplicates not included).",
    ),
    "binding.received_tuples_from": Export(
        "tuplemesh_transfer_tuples_received_total", "Tuples received, per sending peer.", key="peer"
    ),
    "binding.received_bytes_from": Export(
        "tuplemesh_transfer_bytes_received_total", "Packed bytes received, per sending peer.", key="peer"
    ),
    "binding.duplicate_batches": Export(
        "tuplemesh_duplicate_batches_total", "Resent batches discarded as duplicates."
    ),
    "binding.rejected_batches": Export(
        "tuplemesh_rejected_batches_total",
        "Batches refused as wrong (another topology, an undecodable body).",
    ),
    "binding.rejected_frames": Export(
        "tuplemesh_rejected_frames_total", "Transport frames that were not even a batch."
    ),
    "binding.sequence_gaps": Export(
        "tuplemesh_sequence_gap_batches_total",
        "Batches that arrived after a missing one: neither delivered nor acknowledged (resent).",
    ),
    "congested_tasks": Export(
        "tuplemesh_backpressure_congested_tasks",
        "Tasks of this worker whose inbox is above topology.backpressure.watermark now "
        "(senders hold back for them): the per-worker load signal to autoscale on.",
        "gauge",
    ),
    "tasks": Export("tuplemesh_tasks", "Tasks this worker runs.", "gauge"),
    "binding.epoch_refused_batches": Export(
        "tuplemesh_epoch_refused_batches_total",
        "Batches refused because their sender routes by another assignment epoch (it keeps them).",
    ),
    "binding.refused": Export(
        "tuplemesh_transfer_refused_total",
        "Transfer streams and batches, and Admin.Rebalance calls naming an epoch, refused by who "
        "sent them, by reason: unauthenticated, not_a_worker, not_a_member, sender_mismatch, no_epoch.",
        key="reason",
    ),
    "binding.broadcast_messages": Export(
        "tuplemesh_broadcast_messages_total",
        "Messages with no task (broadcasts), where the transport counts them.",
    ),
    # the receive path
    "receive.messages": Export("tuplemesh_received_messages_total", "Messages the receive path was handed."),
    "receive.unknown_tasks": Export(
        "tuplemesh_unknown_task_messages_total", "Messages for tasks this worker does not own."
    ),
    "receive.undeliverable": Export(
        "tuplemesh_undeliverable_messages_total",
        "Messages refused because their inbox had halted (the sender keeps and resends them).",
    ),
    "receive.overflow_batches": Export(
        "tuplemesh_receive_overflow_batches", "Batches waiting for a full inbox.", "gauge"
    ),
    "receive.held_bytes": Export(
        "tuplemesh_receive_held_bytes",
        "Payload bytes received and not yet taken by an executor (every inbox and overflow).",
        "gauge",
    ),
    "receive.held_bytes_capacity": Export(
        "tuplemesh_receive_held_bytes_capacity",
        "The ceiling on received bytes held (topology.receive.max.bytes; 0: none).",
        "gauge",
    ),
    "receive.ceiling_waits": Export(
        "tuplemesh_receive_ceiling_waits_total",
        "Received batches that waited for the ceiling on bytes held (their sender waited too).",
    ),
    "receive.ceiling_wait_seconds": Export(
        "tuplemesh_receive_ceiling_wait_seconds_total",
        "Time received batches spent waiting for the ceiling on bytes held.",
    ),
    # the transfer path
    "transfer.held_bytes": Export(
        "tuplemesh_transfer_held_bytes",
        "Serialized bytes held for other workers, not yet acknowledged by them (queued or in a send window).",
        "gauge",
    ),
    "transfer.held_bytes_capacity": Export(
        "tuplemesh_transfer_held_bytes_capacity",
        "The ceiling on bytes held for other workers (topology.transfer.max.bytes; 0: none).",
        "gauge",
    ),
    "transfer.ceiling_waits": Export(
        "tuplemesh_transfer_ceiling_waits_total",
        "Batches whose executor waited for the ceiling on bytes queued for other workers.",
    ),
    "transfer.ceiling_wait_seconds": Export(
        "tuplemesh_transfer_ceiling_wait_seconds_total",
        "Time executors spent waiting for the ceiling on bytes queued for other workers.",
    ),
    "transfer.lost_tuples": Export(
        "tuplemesh_transfer_tuples_lost_total", "Tuples a transport refused (counted, logged)."
    ),
    "transfer.stranded_tuples": Export(
        "tuplemesh_transfer_tuples_stranded_total",
        "Tuples left in the transfer queue when its thread was halted (lost).",
    ),
    "transfer.batch_sizes": Export(
        "tuplemesh_transfer_batch_size_tuples", "Tuples per batch handed to the transport.", "histogram"
    ),
    # the checkpoint coordinator, on the worker that runs it
    "checkpoints.attempt": Export(
        "tuplemesh_checkpoint_attempt",
        "The attempt the mesh runs: worker starts counted in the state store.",
        "gauge",
    ),
    "checkpoints.rollbacks": Export(
        "tuplemesh_checkpoint_rollbacks_total", "Rollbacks to the last committed checkpoint started."
    ),
    "checkpoints.committed": Export("tuplemesh_checkpoints_committed_total", "Checkpoints committed."),
    "checkpoints.abandoned": Export(
        "tuplemesh_checkpoints_abandoned_total",
        "Checkpoints abandoned: timed out, a part not stored, or the store failing.",
    ),
    "checkpoints.store_errors": Export(
        "tuplemesh_checkpoint_store_errors_total",
        "State store calls of the coordinator that failed (checkpointing pauses meanwhile).",
    ),
    "checkpoints.last_committed": Export(
        "tuplemesh_checkpoint_last_committed",
        "The number of the newest committed checkpoint (-1 before the first).",
        "gauge",
    ),
    "checkpoints.last_duration_seconds": Export(
        "tuplemesh_checkpoint_last_duration_seconds",
        "Trigger to commit of the newest committed checkpoint.",
        "gauge",
    ),
    # gateway and discovery
    "export_lost": Export(
        "tuplemesh_export_records_lost_total",
        "Records an ExportBolt could not export at stop (its log was full), by component.",
        key="component",
    ),
    "discovery.relists": Export(
        "tuplemesh_discovery_relists_total", "Full lists after the watch expired (410 Gone)."
    ),
    "discovery.watch_restarts": Export(
        "tuplemesh_discovery_watch_restarts_total", "Watches the API server ended and that resumed."
    ),
    "discovery.api_errors": Export("tuplemesh_discovery_api_errors_total", "Failed Kubernetes API calls."),
    "discovery.endpoint_problems": Export(
        "tuplemesh_discovery_endpoint_problems_total", "Endpoints that could not be mapped to a worker."
    ),
}
