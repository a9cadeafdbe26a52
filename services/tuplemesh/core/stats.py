"""`WorkerSnapshot`: everything one worker has counted, read once, as frozen dataclasses.

``Worker.snapshot()`` builds it; /metrics, Admin (GetStatus, WatchStats), ``tuplemesh run``'s
summary, the live progress table and ``tuplemesh top`` all read it (or its proto form, see
``tuplemesh.server.status_proto``) instead of gathering counters each in their own way. It is
read-side only: building one walks the executors, rings and connections, never the data path.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from tuplemesh.buckets import Buckets
from tuplemesh.discovery.base import DiscoveryStats
from tuplemesh.transport.stats import BindingStats, ConnectionStats

__all__ = [
    "EXECUTOR_COUNTERS",
    "EXECUTOR_HOLD_FIELDS",
    "START_METHODS",
    "AlignmentSnapshot",
    "CheckpointSnapshot",
    "ErrorSnapshot",
    "ExecutorSnapshot",
    "HistogramSnapshot",
    "PeerSnapshot",
    "QueueSnapshot",
    "ReceiveSnapshot",
    "TransferTotals",
    "WorkerSnapshot",
    "field_paths",
]


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    """A histogram read from ``Buckets``: observations per upper bound (one more for ``+Inf``)
    and the sum of what was observed. Copying the counts is cheap; ``cumulative`` is for export."""

    bounds: tuple[float, ...] = ()
    counts: tuple[int, ...] = ()
    sum: float = 0.0

    @classmethod
    def of(cls, buckets: Buckets) -> HistogramSnapshot:
        return cls(buckets.bounds, tuple(buckets.counts), buckets.total)

    def cumulative(self) -> list[tuple[str, float]]:
        """``[(le, cumulative count), ..., ("+Inf", count)]``; empty for an empty snapshot."""
        out, running = [], 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += n
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), float(running)))
        return out if self.counts else []

    def merged(self, other: HistogramSnapshot) -> HistogramSnapshot:
        """Both histograms as one (same bounds: e.g. two executors of one component)."""
        if not self.counts:
            return other
        if not other.counts:
            return self
        counts = tuple(n + m for n, m in zip(self.counts, other.counts, strict=True))
        return HistogramSnapshot(self.bounds, counts, self.sum + other.sum)


@dataclass(frozen=True, slots=True)
class AlignmentSnapshot:
    """A bolt executor's side of checkpointing (barrier alignment), summed over its tasks."""

    #: Tuples sent in an earlier attempt (before a rollback), dropped: the rewound spouts resend them.
    stale_dropped: int = 0
    #: Checkpoints a task stopped aligning for (its hold-back buffer filled, or a newer barrier came).
    alignments_given_up: int = 0
    #: Parts of checkpoints stored, and parts the store refused (each abandons its checkpoint).
    parts_stored: int = 0
    parts_failed: int = 0
    #: The most tuples one task held back at once while aligning (a high-water mark).
    held_max: int = 0


@dataclass(frozen=True, slots=True)
class CheckpointSnapshot:
    """The checkpoint coordinator's counts (on the worker that runs it) since its worker started."""

    #: The attempt it runs (worker starts counted in the store) and rollbacks it started.
    attempt: int = 0
    rollbacks: int = 0
    committed: int = 0
    #: Checkpoints given up: timed out, a part not stored, or the store failing mid-checkpoint.
    abandoned: int = 0
    #: Store calls that failed (each tick with the store down counts one).
    store_errors: int = 0
    #: The number of the newest checkpoint it committed, -1 before its first.
    last_committed: int = -1
    #: From trigger to commit of the newest committed checkpoint.
    last_duration_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class ErrorSnapshot:
    """The first exception an executor's user code raised: where, in which method, what.

    ``tuplemesh run`` names the earliest of these (by ``at``) when it fails a run."""

    component: str
    task: int
    #: The user method that raised: prepare, execute, execute_batch, process, cleanup (bolts); open,
    #: next_tuple, ack, fail, close (spouts); report (both).
    method: str
    #: The exception's class name and its message (one line; long messages are cut).
    type: str
    message: str
    worker: int = 0
    #: Wall-clock time it was raised (Unix seconds), to tell which of several came first.
    at: float = 0.0

    def describe(self) -> str:
        """One line: ``component 'count' task 3 (worker 1) raised in execute: ValueError: boom``."""
        text = f"{self.type}: {self.message}" if self.message else self.type
        return (
            f"component {self.component!r} task {self.task} (worker {self.worker}) "
            f"raised in {self.method}: {text}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "task": self.task,
            "method": self.method,
            "type": self.type,
            "message": self.message,
            "worker": self.worker,
        }


#: Methods whose failure leaves a task unable to run: the run stops at once, whatever
#: ``topology.errors.tolerated`` allows.
START_METHODS = frozenset({"prepare", "open"})


@dataclass(frozen=True, slots=True)
class ExecutorSnapshot:
    """One executor: who it is and every counter of its ``ExecutorCounters``."""

    name: str
    component: str
    tasks: tuple[int, ...]
    spout: bool
    #: Spouts only: every task reported is_finished() and its emits are flushed.
    finished: bool
    emitted: int = 0
    executed: int = 0
    received: int = 0
    acked: int = 0
    failed: int = 0
    timed_out: int = 0
    #: Exceptions raised by bolt code.
    errors: int = 0
    #: Exceptions raised by spout code.
    spout_errors: int = 0
    deserialize_errors: int = 0
    #: Emitted tuples abandoned at stop because a destination had halted (lost).
    dropped_on_stop: int = 0
    #: Bolts: tuples a halt (the shutdown timeout passed) left unexecuted, taken from the inbox
    #: or still in it (lost).
    abandoned_on_halt: int = 0
    #: (task, tuple) deliveries its emits made, to any worker.
    delivered: int = 0
    #: Times its emits were held on a congested task of another worker (per-task backpressure)
    #: or on a task of its own worker that sets them aside while aligning a checkpoint's barriers,
    #: and the time they were held in all, the hold in progress included.
    backpressure_holds: int = 0
    backpressure_hold_seconds: float = 0.0
    #: Execute time per tuple: each batch's mean, observed once per tuple it executed.
    execute_seconds: HistogramSnapshot = HistogramSnapshot()
    #: Time a batch waited in the inbox before its first tuple ran.
    inbox_wait: HistogramSnapshot = HistogramSnapshot()
    #: Bolts of a checkpointed topology that align barriers; None for every other executor.
    alignment: AlignmentSnapshot | None = None
    #: The first exception its user code raised (``errors``/``spout_errors`` count them all).
    first_error: ErrorSnapshot | None = None

    def counters(self) -> dict[str, int]:
        """The integer counters by name (what a component total sums)."""
        return {name: getattr(self, name) for name in EXECUTOR_COUNTERS}


#: The fields of an ExecutorSnapshot that features fill (``ExecutorHooks.snapshot_fields``).
EXECUTOR_FEATURE_FIELDS = frozenset({"alignment"})

#: The fields of an ExecutorSnapshot that say how long it was held back, not what it did: no
#: component total (run summaries, progress) sums them; /metrics and Admin show them.
EXECUTOR_HOLD_FIELDS = ("backpressure_holds", "backpressure_hold_seconds")

#: The integer counters of an ExecutorSnapshot, in declaration order.
EXECUTOR_COUNTERS = tuple(
    name
    for name, hint in typing.get_type_hints(ExecutorSnapshot).items()
    if hint is int and name not in EXECUTOR_HOLD_FIELDS
)


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """One ring: an executor inbox (``inbox:<executor>``) or ``transfer``. Sizes in slots."""

    name: str
    depth: int
    capacity: int
    #: Batches published into it so far (rates come from its change).
    published: int
    #: Slots producers may fill now: what the queue-time bound (topology.backpressure.target.ms)
    #: allows, ``capacity`` when the bound is off or has measured nothing yet.
    limit: int
    #: Claims (of one slot or more) that waited for room (the queue full, or filled to its
    #: ``limit``), and their time in all, counted as each wait goes: how long its producers were
    #: held back.
    producer_waits: int = 0
    producer_wait_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class PeerSnapshot:
    """One peer worker: what the transfer path handed its connection, and the connection's stats."""

    worker: int
    #: Tuples and batches the transfer path handed to this peer's connection.
    transferred_tuples: int
    transferred_batches: int
    connection: ConnectionStats


@dataclass(frozen=True, slots=True)
class ReceiveSnapshot:
    """The receive path (the binding's ``on_batch``): what it took, refused or holds."""

    #: Messages handed to it by the transport.
    messages: int = 0
    #: Messages for tasks this worker does not own, and broadcasts with no executor here.
    unknown_tasks: int = 0
    #: Messages refused because their inbox had halted (the worker was stopping); the sender
    #: keeps and resends them.
    undeliverable: int = 0
    #: Batches waiting in the overflow for a full inbox (a gauge).
    overflow_batches: int = 0
    #: Payload bytes received and not yet taken by an executor, in every inbox and overflow (a
    #: gauge), and the ceiling on them (``topology.receive.max.bytes``; 0: none).
    held_bytes: int = 0
    held_bytes_capacity: int = 0
    #: Batches that waited for the ceiling before they were taken in, and their wait in all.
    ceiling_waits: int = 0
    ceiling_wait_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class TransferTotals:
    """The transfer path's totals (its per-peer counts are in ``PeerSnapshot``)."""

    sent_batches: int = 0
    sent_tuples: int = 0
    #: Tuples a connection refused (closed, or none): lost.
    lost_tuples: int = 0
    #: Tuples left in the transfer ring when its thread was halted: lost.
    stranded_tuples: int = 0
    #: Peers followed to a new address.
    retargets: int = 0
    #: Tuples per batch handed to connections.
    batch_sizes: HistogramSnapshot = HistogramSnapshot()
    #: Serialized bytes held for other workers and not yet acknowledged by them (queued, merged,
    #: or in a send window; a gauge), and the ceiling on them (``topology.transfer.max.bytes``).
    held_bytes: int = 0
    held_bytes_capacity: int = 0
    #: Batches whose executor waited for that ceiling before it queued them, and the wait in all.
    ceiling_waits: int = 0
    ceiling_wait_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class WorkerSnapshot:
    """One worker at one moment. ``consumed`` was read before ``delivered``."""

    topology: str
    worker: int
    workers: int
    uptime_seconds: float
    executors: tuple[ExecutorSnapshot, ...]
    queues: tuple[QueueSnapshot, ...]
    peers: tuple[PeerSnapshot, ...]
    binding: BindingStats
    receive: ReceiveSnapshot
    transfer: TransferTotals
    #: Records ExportBolt tasks could not export at stop (their log was full), by component.
    export_lost: dict[str, int] = field(default_factory=dict)
    discovery: DiscoveryStats = field(default_factory=DiscoveryStats)
    #: The checkpoint coordinator's counts, on the one worker that runs it; None elsewhere.
    checkpoints: CheckpointSnapshot | None = None
    #: Tuples this worker consumed (executed, undecodable, unknown task, lost in transfer).
    consumed: int = 0
    #: Tuple deliveries made here: executors' emits and Admin.Emit injections.
    delivered: int = 0
    #: Tuples put into inboxes by Admin.Emit (part of ``delivered``).
    injected: int = 0
    #: Nothing queued in this worker's own queues: inboxes, overflow, transfer ring, emit
    #: buffers, accepted spout input (sends peers have not acknowledged are not looked at).
    local_queues_empty: bool = True
    spouts_finished: bool = True
    #: Every spout loop has stopped calling next_tuple on active spouts (deactivated and seen
    #: it, finished, or not running): nothing it emits from now on escapes the counters.
    spouts_quiet: bool = True
    #: The assignment epoch the worker routes by (counter/workers/code).
    epoch: str = ""
    #: Tasks of this worker whose inbox is above the backpressure watermark now (what its acks
    #: tell senders to hold back for), and all its tasks: a load signal to scale on.
    congested_tasks: int = 0
    tasks: int = 0
    #: Which tasks are congested (the ids ``congested_tasks`` counts).
    congested_task_ids: tuple[int, ...] = ()
    #: What each feature reports of itself (``Feature.section``: JSON-able), by feature name; a
    #: feature with nothing to report is left out.
    feature_sections: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def unacked_batches(self) -> int:
        return sum(p.connection.unacked_batches for p in self.peers)

    @property
    def idle(self) -> bool:
        """Nothing queued here, and every send acknowledged by its peer."""
        return self.local_queues_empty and not self.unacked_batches

    def component_counters(self) -> dict[str, dict[str, int]]:
        """Executor counters summed by component."""
        totals: dict[str, dict[str, int]] = {}
        for executor in self.executors:
            into = totals.setdefault(executor.component, {})
            for name, value in executor.counters().items():
                into[name] = into.get(name, 0) + value
        return totals


def field_paths(cls: type[Any] = WorkerSnapshot, prefix: str = "") -> Iterator[str]:
    """Every leaf field of ``cls`` as a dotted path; fields of nested dataclasses (also inside a
    tuple, as ``peers.connection.state``) are walked, a histogram is one leaf. Properties are
    not fields."""
    for name in (f.name for f in fields(cls)):
        path = f"{prefix}{name}"
        nested = _nested_dataclass(cls, name)
        if nested is not None:
            yield from field_paths(nested, f"{path}.")
        else:
            yield path


def _nested_dataclass(cls: type[Any], name: str) -> type[Any] | None:
    """The dataclass a field holds (directly, as ``tuple[X, ...]`` or as ``X | None``), else None."""
    hint = typing.get_type_hints(cls)[name]
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and args:
        candidate = args[0]
    elif type(None) in args:  # optional: the dataclass it holds when present
        candidate = next(a for a in args if a is not type(None))
    else:
        candidate = hint
    if candidate is HistogramSnapshot or not (isinstance(candidate, type) and is_dataclass(candidate)):
        return None
    return candidate
