"""Every exception tuplemesh raises, in one tree::

    TuplemeshError
    ├── ConfigError              a config key has a bad value (names key and value)
    ├── TopologyError            the topology is malformed (names component, stream or field)
    ├── PluginError              a transport/serializer name does not resolve (lists known ones)
    ├── SerializationError       a payload could not be encoded or decoded
    ├── TransportError           a transport plugin failed (backend errors are translated to this)
    │   ├── MessageTooLargeError a tuple or batch exceeds the transport's maximum message size
    │   └── ReceiverStoppedError the receiver did not take a batch (stopping): the sender resends
    │       └── AssignmentEpochError  the sender routes by another assignment epoch
    ├── RescaleRefusedError      a rescale cannot start (the worker stops, a peer is unreachable)
    ├── GatewayError             a Gateway call failed (names the worker, the call and the status)
    │   └── EpochMismatchError   an export partition's log restarted: the reader's offsets are void
    └── DisruptorError
        ├── AlertError           a barrier or sequencer was alerted (halt); control flow
        ├── WaitTimeoutError     a timeout wait strategy gave up waiting; control flow
        └── InsufficientCapacityError  try_next found the ring full

Backend exception types (grpc.RpcError, zmq.ZMQError, ...) never leave a plugin: they are
translated at the edge with ``raise TransportError(...) from exc``.
"""

from __future__ import annotations

__all__ = [
    "AlertError",
    "AssignmentEpochError",
    "ConfigError",
    "DisruptorError",
    "EpochMismatchError",
    "GatewayError",
    "InsufficientCapacityError",
    "MessageTooLargeError",
    "PluginError",
    "ReceiverStoppedError",
    "RescaleRefusedError",
    "SerializationError",
    "TopologyError",
    "TransportError",
    "TuplemeshError",
    "WaitTimeoutError",
]


class TuplemeshError(Exception):
    """Base of every error tuplemesh raises on purpose."""


class ConfigError(TuplemeshError, ValueError):
    """A configuration key is unknown or its value is invalid."""

    def __init__(self, key: str, value: object, reason: str, source: str = "") -> None:
        self.key = key
        self.value = value
        self.reason = reason  # what is allowed ("must be > 0")
        self.source = source  # where the value was set: a file, an env var, a flag ("" when given in code)
        where = f" (set by {source})" if source else ""
        super().__init__(f"config key {key!r}{where}: {reason} (got {value!r})")


class TopologyError(TuplemeshError, ValueError):
    """The topology definition is inconsistent; raised when it is built, never at run time."""


class PluginError(TuplemeshError, LookupError):
    """A plugin name (transport, serializer, wait strategy) does not resolve."""


class SerializationError(TuplemeshError):
    """A tuple could not be serialized, or a payload could not be deserialized."""


class TransportError(TuplemeshError):
    """A transport failed to deliver or to accept a batch."""


class MessageTooLargeError(TransportError):
    """A tuple or batch is larger than the transport's configured maximum message size."""


class ReceiverStoppedError(TransportError):
    """The receiving worker is shutting down; the batch was not (wholly) accepted: resend it."""


class AssignmentEpochError(ReceiverStoppedError):
    """The sender routes by another assignment epoch than the receiver: the batch was not taken
    (its tasks may have moved); the sender keeps it until the two agree."""


class RescaleRefusedError(TuplemeshError):
    """A rescale (``Admin.Rebalance``) cannot start; the message says why (a stopping worker, a
    peer that did not accept, an epoch of another topology)."""


class GatewayError(TuplemeshError):
    """A call to a worker's Gateway failed; ``code`` is the gRPC status name (e.g. ``UNAVAILABLE``)."""

    def __init__(self, message: str, code: str = "", target: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.target = target


class EpochMismatchError(GatewayError):
    """An export partition's log is not the one the reader's offset belongs to (its worker restarted
    and the new log counts from 0 again): reading on would skip or repeat records."""

    def __init__(
        self, export: str, partition: int, reader_epoch: int, log_epoch: int, target: str = ""
    ) -> None:
        super().__init__(
            f"tuplemesh: partition {partition} of export {export!r} restarted: the reader's offsets "
            f"belong to log epoch {reader_epoch}, the log now has epoch {log_epoch}",
            "FAILED_PRECONDITION",
            target,
        )
        self.export = export
        self.partition = partition
        self.reader_epoch = reader_epoch
        self.log_epoch = log_epoch


class DisruptorError(TuplemeshError):
    """Base of the ring buffer's signals."""


class AlertError(DisruptorError):
    """Raised in a thread waiting on a barrier or on ring capacity after ``alert``/``halt``."""


class WaitTimeoutError(DisruptorError):
    """Raised by a timeout wait strategy when no sequence became available in time."""


class InsufficientCapacityError(DisruptorError):
    """``try_next`` could not claim the requested slots without blocking."""
