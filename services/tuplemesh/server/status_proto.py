"""`WorkerSnapshot` <-> Admin's `WorkerStatus`: the one conversion each way, from one table.

Admin (GetStatus, WatchStats) sends a snapshot as a WorkerStatus; the process launcher, the live
progress table and ``tuplemesh top`` turn it back into the same snapshot, so every reader sums
the same fields the same way whether the workers run in this process or behind gRPC.

Each snapshot field's proto field is written once, as a row of the tables below (``_WORKER`` and
the tables of the messages it holds); ``snapshot_to_proto`` and ``snapshot_from_proto`` both walk
them, so the two directions cannot drift apart. The fields features fill
(``Feature.snapshot_fields``, e.g. ``export_lost``) are snapshot fields like any other: a row each.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Generic, Protocol, TypeVar

from google.protobuf.message import Message

from tuplemesh.core.stats import (
    EXECUTOR_COUNTERS,
    EXECUTOR_HOLD_FIELDS,
    AlignmentSnapshot,
    CheckpointSnapshot,
    ErrorSnapshot,
    ExecutorSnapshot,
    HistogramSnapshot,
    PeerSnapshot,
    QueueSnapshot,
    WorkerSnapshot,
)
from tuplemesh.discovery.base import DiscoveryStats
from tuplemesh.transport.stats import BindingStats, ConnectionStats
from tuplemesh.v1 import admin_pb2

__all__ = ["field_pairs", "queue_to_proto", "snapshot_from_proto", "snapshot_to_proto", "spouts_quiet"]

S = TypeVar("S")

#: What a row hands the message constructor to leave its field unset (a None snapshot value).
_ABSENT: Any = object()


class _Kind(Protocol):
    """How one row's value crosses: ``to_proto`` gives what the message constructor takes for it
    (``_ABSENT``: leave the field unset), ``from_proto`` reads it back from the message
    (``_ABSENT``: nothing to put into the snapshot)."""

    def to_proto(self, value: Any) -> Any: ...

    def from_proto(self, message: Any, name: str) -> Any: ...


class _Plain:
    """A number, string or bool: the same value on both sides."""

    def to_proto(self, value: Any) -> Any:
        return value

    def from_proto(self, message: Any, name: str) -> Any:
        return getattr(message, name)


class _Sequence:
    """A tuple of numbers as a repeated field."""

    def to_proto(self, value: Any) -> Any:
        return list(value)

    def from_proto(self, message: Any, name: str) -> Any:
        return tuple(getattr(message, name))


class _Mapping:
    """A dict as a map field."""

    def to_proto(self, value: Any) -> Any:
        return dict(value)

    def from_proto(self, message: Any, name: str) -> Any:
        return dict(getattr(message, name))


class _Json:
    """A dict of JSON data (the worker took it through JSON already) as one JSON object in a
    string field ("" for an empty one)."""

    def to_proto(self, value: Mapping[str, Any]) -> str:
        return json.dumps(value, sort_keys=True) if value else ""

    def from_proto(self, message: Any, name: str) -> dict[str, Any]:
        text = getattr(message, name)
        loaded: dict[str, Any] = json.loads(text) if text else {}
        return loaded


class _Histogram:
    def to_proto(self, value: HistogramSnapshot) -> admin_pb2.Histogram:
        return admin_pb2.Histogram(bounds=value.bounds, counts=value.counts, sum=value.sum)

    def from_proto(self, message: Any, name: str) -> HistogramSnapshot:
        histogram = getattr(message, name)
        return HistogramSnapshot(tuple(histogram.bounds), tuple(histogram.counts), histogram.sum)


@dataclass(frozen=True)
class _Optional:
    """A proto ``optional`` scalar: None is unset; unset reads back as ``unset`` (what a sender
    without the field meant)."""

    unset: Any

    def to_proto(self, value: Any) -> Any:
        return _ABSENT if value is None else value

    def from_proto(self, message: Any, name: str) -> Any:
        return getattr(message, name) if message.HasField(name) else self.unset


class _Derived:
    """Sent for readers that do not rebuild the snapshot (a property of it), never read back."""

    def to_proto(self, value: Any) -> Any:
        return value

    def from_proto(self, message: Any, name: str) -> Any:
        return _ABSENT


@dataclass(frozen=True)
class _Nested:
    """A nested snapshot dataclass as a sub-message; ``optional``: None is an unset one."""

    table: _Table[Any]
    optional: bool = False

    def to_proto(self, value: Any) -> Any:
        return _ABSENT if value is None and self.optional else self.table.to_proto(value)

    def from_proto(self, message: Any, name: str) -> Any:
        if self.optional and not message.HasField(name):
            return None
        return self.table.parts(getattr(message, name))


@dataclass(frozen=True)
class _Repeated:
    """A tuple of snapshot dataclasses as a repeated sub-message."""

    table: _Table[Any]

    def to_proto(self, value: Any) -> Any:
        return [self.table.to_proto(item) for item in value]

    def from_proto(self, message: Any, name: str) -> Any:
        return tuple(self.table.from_proto(item) for item in getattr(message, name))


_PLAIN, _SEQUENCE, _MAPPING, _JSON, _HISTOGRAM, _DERIVED = (
    _Plain(),
    _Sequence(),
    _Mapping(),
    _Json(),
    _Histogram(),
    _Derived(),
)
#: A worker of a release without ``spouts_quiet`` reports none, and its drain never counted on
#: it: taken as quiet (at its NOT_SERVING, as that release was).
_SPOUTS_QUIET = _Optional(unset=True)


@dataclass(frozen=True)
class _Row:
    """One snapshot field and its proto field. ``snapshot`` may step into a nested dataclass
    (``connection.address``): a message that carries that dataclass's fields flat among its own."""

    snapshot: str
    proto: str
    kind: _Kind = _PLAIN


def _same(*names: str, kind: _Kind = _PLAIN) -> tuple[_Row, ...]:
    """Rows of fields named alike on both sides."""
    return tuple(_Row(name, name, kind) for name in names)


@dataclass(frozen=True)
class _Table(Generic[S]):
    """A snapshot dataclass and the proto message it is sent as."""

    snapshot: type[S]
    message: type[Message]
    rows: tuple[_Row, ...]
    #: The message's fields no row fills, and who does.
    unmapped: Mapping[str, str] = field(default_factory=dict)

    def to_proto(self, value: S, **extra: Any) -> Any:
        kwargs = {}
        for row in self.rows:
            converted = row.kind.to_proto(_attribute(value, row.snapshot))
            if converted is not _ABSENT:
                kwargs[row.proto] = converted
        return self.message(**kwargs, **extra)

    def parts(self, message: Any) -> _Parts:
        parts = _Parts(self.snapshot)
        for row in self.rows:
            value = row.kind.from_proto(message, row.proto)
            if value is not _ABSENT:
                parts.put(row.snapshot, value)
        return parts

    def from_proto(self, message: Any) -> S:
        built: S = self.parts(message).build()
        return built


class _Parts:
    """A snapshot dataclass's fields read so far, a nested dataclass's as `_Parts` of its own:
    built once every row is read, since one dataclass may come from a sub-message and from fields
    beside it (``BindingStats``: its message and WorkerStatus's ``duplicate_batches``)."""

    def __init__(self, cls: type[Any]) -> None:
        self.cls = cls
        self.values: dict[str, Any] = {}

    def put(self, path: str, value: Any) -> None:
        name, _, rest = path.partition(".")
        if rest:
            self._nested(name).put(rest, value)
        elif isinstance(value, _Parts) and name in self.values:
            self.values[name].values.update(value.values)
        else:
            self.values[name] = value

    def _nested(self, name: str) -> _Parts:
        if name not in self.values:
            self.values[name] = _Parts(_hints(self.cls)[name])
        nested: _Parts = self.values[name]
        return nested

    def build(self) -> Any:
        return self.cls(**{k: v.build() if isinstance(v, _Parts) else v for k, v in self.values.items()})


#: Field types by snapshot dataclass, read once (a reader converts a status every interval).
_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _attribute(value: Any, path: str) -> Any:
    for name in path.split("."):
        value = getattr(value, name)
    return value


def _flat(snapshot: type[S], message: type[Message]) -> _Table[S]:
    """A flat dataclass whose every field is a number or a string, as the message of the same
    field names."""
    return _Table(snapshot, message, _same(*(f.name for f in fields(snapshot))))  # type: ignore[arg-type]


_EXECUTOR: _Table[ExecutorSnapshot] = _Table(
    ExecutorSnapshot,
    admin_pb2.ExecutorStatus,
    (
        *_same("name", "component", "spout", "finished", *EXECUTOR_COUNTERS, *EXECUTOR_HOLD_FIELDS),
        _Row("tasks", "tasks", _SEQUENCE),
        *_same("execute_seconds", "inbox_wait", kind=_HISTOGRAM),
        _Row("alignment", "alignment", _Nested(_flat(AlignmentSnapshot, admin_pb2.AlignmentStatus), True)),
        _Row("first_error", "first_error", _Nested(_flat(ErrorSnapshot, admin_pb2.UserError), True)),
    ),
)

_QUEUE: _Table[QueueSnapshot] = _Table(
    QueueSnapshot,
    admin_pb2.QueueInfo,
    _same("name", "depth", "capacity", "published", "limit", "producer_waits", "producer_wait_seconds"),
    unmapped={"publish_rate": "ListQueues and WatchStats: a rate between two snapshots"},
)

_PEER: _Table[PeerSnapshot] = _Table(
    PeerSnapshot,
    admin_pb2.PeerStatus,
    (
        *_same("worker", "transferred_tuples", "transferred_batches"),
        # the connection's stats are the peer's own fields in its message
        *(_Row(f"connection.{f.name}", f.name) for f in fields(ConnectionStats)),
    ),
)

_BINDING: _Table[BindingStats] = _Table(
    BindingStats,
    admin_pb2.BindingStatus,
    (
        *_same(
            "received_batches",
            "received_tuples",
            "received_bytes",
            "rejected_batches",
            "rejected_frames",
            "sequence_gaps",
            "shutdown_messages",
            "epoch_refused_batches",
        ),
        *_same("received_tuples_from", "received_bytes_from", "refused", kind=_MAPPING),
        # None where the transport does not count them (the local one)
        _Row("broadcast_messages", "broadcast_messages", _Optional(unset=None)),
        # duplicate_batches: WorkerStatus's own field (it predates BindingStatus), a row of _WORKER
    ),
)

_WORKER: _Table[WorkerSnapshot] = _Table(
    WorkerSnapshot,
    admin_pb2.WorkerStatus,
    (
        *_same(
            "topology",
            "worker",
            "workers",
            "epoch",
            "congested_tasks",
            "tasks",
            "uptime_seconds",
            "consumed",
            "delivered",
            "injected",
            "local_queues_empty",
            "spouts_finished",
        ),
        _Row("congested_task_ids", "congested_task_ids", _SEQUENCE),
        _Row("spouts_quiet", "spouts_quiet", _SPOUTS_QUIET),
        _Row("idle", "idle", _DERIVED),
        _Row("executors", "executors", _Repeated(_EXECUTOR)),
        _Row("queues", "queues", _Repeated(_QUEUE)),
        _Row("peers", "peers", _Repeated(_PEER)),
        _Row("binding", "binding", _Nested(_BINDING)),
        _Row("binding.duplicate_batches", "duplicate_batches"),
        _Row("receive.messages", "received_messages"),
        _Row("receive.unknown_tasks", "unknown_task_messages"),
        _Row("receive.undeliverable", "undeliverable_messages"),
        _Row("receive.overflow_batches", "overflow_batches"),
        _Row("receive.held_bytes", "receive_held_bytes"),
        _Row("receive.held_bytes_capacity", "receive_held_bytes_capacity"),
        _Row("receive.ceiling_waits", "receive_ceiling_waits"),
        _Row("receive.ceiling_wait_seconds", "receive_ceiling_wait_seconds"),
        _Row("transfer.sent_batches", "transferred_batches"),
        _Row("transfer.sent_tuples", "transferred_tuples"),
        _Row("transfer.lost_tuples", "lost_tuples"),
        _Row("transfer.stranded_tuples", "stranded_tuples"),
        _Row("transfer.retargets", "transfer_retargets"),
        _Row("transfer.batch_sizes", "batch_sizes", _HISTOGRAM),
        _Row("transfer.held_bytes", "transfer_held_bytes"),
        _Row("transfer.held_bytes_capacity", "transfer_held_bytes_capacity"),
        _Row("transfer.ceiling_waits", "transfer_ceiling_waits"),
        _Row("transfer.ceiling_wait_seconds", "transfer_ceiling_wait_seconds"),
        _Row("export_lost", "export_lost", _MAPPING),  # the Gateway feature fills it
        _Row("feature_sections", "feature_sections_json", _JSON),
        _Row("discovery", "discovery", _Nested(_flat(DiscoveryStats, admin_pb2.DiscoveryStatus))),
        _Row(
            "checkpoints", "checkpoints", _Nested(_flat(CheckpointSnapshot, admin_pb2.CheckpointStatus), True)
        ),
    ),
    unmapped={
        name: "what only the process knows: snapshot_to_proto's argument"
        for name in ("transport", "state", "reports_json", "rss_bytes")
    },
)


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
    status: admin_pb2.WorkerStatus = _WORKER.to_proto(
        snapshot, transport=transport, state=state, reports_json=reports_json, rss_bytes=rss_bytes
    )
    return status


def queue_to_proto(queue: QueueSnapshot, publish_rate: float) -> admin_pb2.QueueInfo:
    """The QueueInfo of ``queue`` with its publish rate (ListQueues and WatchStats: a rate
    between two snapshots, which one snapshot does not have)."""
    info: admin_pb2.QueueInfo = _QUEUE.to_proto(queue, publish_rate=publish_rate)
    return info


def snapshot_from_proto(status: admin_pb2.WorkerStatus) -> WorkerSnapshot:
    """The WorkerSnapshot a WorkerStatus was made from (``snapshot_to_proto`` reversed)."""
    return _WORKER.from_proto(status)


def spouts_quiet(status: admin_pb2.WorkerStatus) -> bool:
    """The status's ``spouts_quiet``; a worker of a release without the field reports none,
    taken as quiet."""
    quiet: bool = _SPOUTS_QUIET.from_proto(status, "spouts_quiet")
    return quiet


def field_pairs() -> Iterator[tuple[str | None, str]]:
    """Every (snapshot field, WorkerStatus field) pair the tables map, as dotted paths into
    nested dataclasses and messages (``("peers.connection.address", "peers.address")``); a
    histogram is one field. A proto field no snapshot field is read back into (filled by the
    process, or a property of the snapshot) comes with None."""
    yield from _pairs(_WORKER, "", "")


def _pairs(table: _Table[Any], snapshot: str, proto: str) -> Iterator[tuple[str | None, str]]:
    for row in table.rows:
        if isinstance(row.kind, _Nested | _Repeated):
            yield from _pairs(row.kind.table, f"{snapshot}{row.snapshot}.", f"{proto}{row.proto}.")
        else:
            yield (None if row.kind is _DERIVED else f"{snapshot}{row.snapshot}"), f"{proto}{row.proto}"
    for name in table.unmapped:
        yield None, f"{proto}{name}"
