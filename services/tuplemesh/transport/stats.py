"""What a transport has counted, as immutable snapshots: `ConnectionStats` and `BindingStats`.

Every count a plugin keeps is here, so the core (metrics, Admin, tests) reads one snapshot per
connection or binding instead of probing attributes. Counts are totals since the object was made.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BindingStats", "ConnectionStats"]


@dataclass(frozen=True, slots=True)
class ConnectionStats:
    """One sending connection. Byte counts are 0 for in-process transports (nothing is framed)."""

    #: Where the connection sends now (it changes on ``retarget``).
    address: str
    #: The sending side: ``CONNECTING``, ``READY`` (acknowledgements arrive), ``RECONNECTING``
    #: or ``CLOSED``.
    state: str
    #: The link underneath: ``READY`` while it is up (gRPC's channel connectivity names; the
    #: in-process transport is always ``READY``).
    channel_state: str = "READY"
    #: Batches written to the peer, resends included.
    sent_batches: int = 0
    #: Tuples accepted by ``send``.
    sent_tuples: int = 0
    #: Framed bytes accepted by ``send``.
    sent_bytes: int = 0
    #: Batches sent (or waiting to be) that the peer has not acknowledged yet.
    unacked_batches: int = 0
    #: Tuples and framed bytes in those batches: what is in flight to the peer now.
    unacked_tuples: int = 0
    unacked_bytes: int = 0
    #: Batches whose ``send`` waited for room in the send window (count, bytes or the peer's
    #: credit), and the seconds they waited in all.
    window_waits: int = 0
    window_wait_seconds: float = 0.0
    #: Unacknowledged tuples the window allows now, sized to messaging.window.target.ms from
    #: the acknowledged throughput (0: the window is not sized by time).
    window_limit_tuples: int = 0
    #: Unacknowledged bytes the window allows now, sized the same way (0: not sized by time, or
    #: not held back by it yet).
    window_limit_bytes: int = 0
    #: Unacknowledged bytes the peer's last acknowledgement granted: its share of the room left
    #: under its ceiling on held bytes (0: the peer grants none, messaging.window.bytes alone).
    granted_bytes: int = 0
    #: Batches sent again after a reconnect, a retarget or a reported sequence gap.
    resent_batches: int = 0
    reconnects: int = 0
    retargets: int = 0
    #: Tuples still unacknowledged when ``close`` gave up waiting for the peer (lost).
    lost_on_close: int = 0
    #: Tuples the peer reported it does not own (counted there too).
    unknown_tasks: int = 0
    #: Batches that joined the batch waiting to go instead of a stream message of their own
    #: (messaging.coalesce.ms): sent_batches counts messages, this the batches they absorbed.
    coalesced_batches: int = 0


@dataclass(frozen=True, slots=True)
class BindingStats:
    """One bound (topology, port): everything its receiver accepted, refused or noticed."""

    #: Batches delivered to ``on_batch`` (each once: duplicates are not in here).
    received_batches: int = 0
    #: Tuples delivered.
    received_tuples: int = 0
    #: Framed bytes delivered (0 for in-process transports).
    received_bytes: int = 0
    #: Tuples delivered, per sending worker (network plugins; the local one has no sender ids).
    received_tuples_from: dict[int, int] = field(default_factory=dict)
    #: Framed bytes delivered, per sending worker (0 for in-process transports).
    received_bytes_from: dict[int, int] = field(default_factory=dict)
    #: Batches received again (a resend after a reconnect) and discarded.
    duplicate_batches: int = 0
    #: Batches refused as wrong: another topology, an undecodable body.
    rejected_batches: int = 0
    #: Transport frames that were not even a batch (a bad header, a wrong frame count).
    rejected_frames: int = 0
    #: Batches that arrived after a missing one: neither delivered nor acknowledged.
    sequence_gaps: int = 0
    #: Messages with no task (a broadcast to every executor); None where counting would cost
    #: a look at every tuple (the local transport passes batches by reference).
    broadcast_messages: int | None = 0
    #: Shutdown notices (task -1) seen; after one the binding stops receiving.
    shutdown_messages: int = 0
    #: Batches refused because their sender routes by another assignment epoch (it keeps them).
    epoch_refused_batches: int = 0
    #: Transfer streams and batches refused by who sent them, by reason (session.REFUSALS); with
    #: them the Admin.Rebalance calls naming an epoch refused for their caller (`Binding.refuse`).
    refused: dict[str, int] = field(default_factory=dict)
