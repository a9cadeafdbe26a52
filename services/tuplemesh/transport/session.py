"""`ReceiverSession`: the receive rules every network transport shares; a plugin only frames.

Per batch, in this order: refuse while stopping or when the admission says no (a draining
worker takes batches only from peers that drain too), drop a duplicate (a resend after a reconnect),
apply the sequence-gap rule, deliver to ``on_batch``, honour the shutdown notice, and decide
whether to acknowledge now. The plugin decodes its frames, calls `ReceiverSession.receive`,
and writes the `Ack` it gets back in its own wire format.

The sequence-gap rule. The batches of one (sender, session) are delivered in sequence order,
each once. A batch whose predecessor never arrived (lost with a dead connection, or overtaken
by batches queued before a reconnect) is neither delivered nor acknowledged, and nothing after
it is either, until the missing batch comes: acknowledging past a gap would let the sender
forget batches the receiver never had. The receiver answers a gap once (per last delivered
sequence) with an `Ack` marked ``gap`` that carries the last sequence it did deliver, and the
sender resends from its oldest unacknowledged batch (grpc ends the stream, so the sender
reconnects and resends; zmq sends the gap ack, which rewinds the sender at once). Every batch
refused for a gap is counted in ``sequence_gaps``.

Membership. Who sent a stream is decided by the plugin from its channel (a verified mesh
secret, a worker certificate), never believed from a batch field; the session holds the rules
the plugins share: `ReceiverSession.member` (sender ids of this mesh only, so a forged id never
becomes a metric label) and `ReceiverSession.refuse`, which counts every refused stream or batch
by one of the fixed `REFUSALS` reasons. A receiver at an epoch refuses a batch that names none.

Acknowledgements are cumulative. They are sent every ``credit // 4`` batches, `ACK_TUPLES`
tuples or `ACK_BYTES` bytes, whichever comes first (a sender sizing its window to a time reads
the age of its batches off the acknowledgements: large batches must not wait for three more,
nor batches of large tuples for a thousand more tuples), when the sender
asks (on a batch, or with a grpc ack probe answered by `ReceiverSession.delivered_ack`), when
a task is unknown, on a duplicate or a shutdown notice, and whenever the receiver's congested
tasks changed since this stream last heard them.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from tuplemesh.errors import AssignmentEpochError, ReceiverStoppedError
from tuplemesh.logutil import RateLimitedLog
from tuplemesh.security import REPLAY_CACHE_ENTRIES, TRANSFER, ProofVerifier
from tuplemesh.serialization import tuples_in
from tuplemesh.transport.base import (
    Admission,
    CongestedTasks,
    GrantedBytes,
    OnBatch,
    TaskMessage,
    split_shutdown,
)
from tuplemesh.transport.dedupe import DuplicateFilter, Verdict
from tuplemesh.transport.settings import TransportSettings
from tuplemesh.transport.stats import BindingStats

__all__ = ["ACK_BYTES", "ACK_TUPLES", "REFUSALS", "Ack", "ReceiverSession", "StreamState"]

log = logging.getLogger(__name__)

#: Unknown task ids carried back in one ack (the rest are counted by the receiver).
UNKNOWN_REPORTED = 64

#: Tuples delivered on a stream after which it is acknowledged, however few batches they took.
ACK_TUPLES = 1024
#: Payload bytes delivered on a stream after which it is acknowledged (1,024 tuples of 1 MiB
#: would otherwise be a gigabyte between two acknowledgements).
ACK_BYTES = 1 << 20

#: Why a Transfer stream or batch was refused: the only values of the metric's ``reason`` label.
REFUSALS = (
    "unauthenticated",  # no or a wrong proof of the mesh secret
    "stale_proof",  # a proof whose timestamp is outside mesh.secret.max.skew.secs
    "replayed_proof",  # a proof already taken once (a captured stream header, replayed)
    "wrong_receiver",  # a proof made for another worker
    "replay_cache_full",  # too many proofs taken within the skew window to remember another
    "not_a_worker",  # under mTLS, a certificate without the worker role
    "not_a_member",  # a sender id that is no worker of this mesh
    "sender_mismatch",  # a batch naming another sender than its stream proved
    "no_epoch",  # no assignment epoch named, while this receiver routes by one
)


@dataclass(frozen=True, slots=True)
class Ack:
    """What to tell the sender, in any framing."""

    #: Every batch up to this sequence is delivered (cumulative).
    sequence: int
    #: How many unacknowledged batches the sender may have in flight.
    credit: int
    unknown_tasks: list[int] = field(default_factory=list)
    #: Duplicates discarded on this stream so far.
    duplicates: int = 0
    congested_tasks: list[int] = field(default_factory=list)
    #: The batch came after a missing one: resend from the oldest unacknowledged batch.
    gap: bool = False
    #: How many unacknowledged bytes the sender may have in flight (0: no grant).
    credit_bytes: int = 0


class StreamState:
    """What one stream (grpc) or one peer socket (zmq) was last told. One thread at a time."""

    __slots__ = ("duplicates", "gap_reported", "reported", "unacked_bytes", "unacked_tuples")

    def __init__(self) -> None:
        self.duplicates = 0
        self.unacked_tuples = 0  # delivered since the last ack
        self.unacked_bytes = 0  # and their bytes
        self.reported: list[int] = []  # congested tasks as last told
        self.gap_reported: tuple[int, int, int] | None = None  # (sender, session, last delivered)


class ReceiverSession:
    """The receiving side of one bound topology. Thread-safe: one thread per stream."""

    def __init__(
        self,
        topology_id: str,
        on_batch: OnBatch,
        credit: int,
        log_interval: float,
        congestion: CongestedTasks | None = None,
        epoch: str = "",
        secret: bytes = b"",
        workers: int = 0,
        worker_certificates: bool = False,
        index: int = -1,
        max_skew: float = 300.0,
        replay_cache_entries: int = REPLAY_CACHE_ENTRIES,
        grant: GrantedBytes | None = None,
    ) -> None:
        self.topology_id = topology_id
        #: The mesh secret every stream must prove (b"": none needed).
        self.secret = secret
        #: Checks each stream's proof of the secret: fresh, for this worker (``index``), once.
        self.verifier = (
            ProofVerifier(secret, topology_id, index, TRANSFER, max_skew, replay_cache_entries)
            if secret
            else None
        )
        #: Sender ids of this mesh are 0 .. workers - 1 (0: not checked).
        self.workers = workers
        #: Streams need a certificate with the worker role (mTLS).
        self.worker_certificates = worker_certificates
        #: The assignment epoch this worker routes by; a stream that names another is refused.
        self.epoch = epoch
        self.on_batch = on_batch
        self.credit = credit
        # An ack per batch costs a stream message per batch, measured as the transport's limit.
        self.ack_every = max(1, credit // 4)
        self.congestion: CongestedTasks = congestion or list
        #: Asked for the bytes each sender may have in flight, on every ack (None: no grant).
        self.grant = grant
        self.filter = DuplicateFilter()
        #: Set by ``close`` or a shutdown notice: every batch is refused (not acknowledged).
        self.stopping = False
        #: Asked before every batch (``Binding.admit``); None takes every batch.
        self.admission: Admission | None = None
        self._lock = threading.Lock()  # guards the counters below
        self._batches = 0
        self._tuples = 0
        self._bytes = 0
        self._tuples_from: dict[int, int] = {}
        self._bytes_from: dict[int, int] = {}
        self._rejected_batches = 0
        self._rejected_frames = 0
        self._broadcasts = 0
        self._shutdowns = 0
        self._epoch_refused = 0
        self._refused: dict[str, int] = {}
        self._reject_log = RateLimitedLog(log, log_interval)

    @classmethod
    def bound_with(
        cls,
        topology_id: str,
        on_batch: OnBatch,
        settings: TransportSettings,
        congestion: CongestedTasks | None = None,
        grant: GrantedBytes | None = None,
        epoch: str = "",
    ) -> ReceiverSession:
        """The session a network transport binds: credit, log interval and the mesh's identity
        from ``settings``; ``epoch`` the assignment epoch this worker routes by (bind's)."""
        return cls(
            topology_id,
            on_batch,
            settings.window_batches,
            settings.log_interval_seconds,
            congestion,
            epoch,
            settings.mesh_secret,
            settings.workers,
            settings.tls_enabled,
            settings.worker_index,
            settings.mesh_max_skew_seconds,
            settings.mesh_replay_cache_entries,
            grant,
        )

    def granted(self) -> int:
        """The bytes each sender may have unacknowledged now: the receiver's share for each
        other worker of the mesh (0: no grant; every sender is granted alike)."""
        return 0 if self.grant is None else self.grant(max(1, self.workers - 1))

    def refuse(self, reason: str, where: str, detail: str) -> None:
        """Count (by ``reason``, one of `REFUSALS`) and log (rate-limited) a refused stream or batch."""
        with self._lock:
            self._refused[reason] = self._refused.get(reason, 0) + 1
        self._reject_log.log("%s: refused (%s): %s", where, reason, detail)

    def member(self, sender: int, epoch: str = "") -> bool:
        """Whether ``sender`` may be a worker of this mesh. A stream routed by another epoch (a
        rescale under way: the worker count differs) is refused batch by batch for its epoch,
        before anything is counted per sender."""
        if not self.workers or 0 <= sender < self.workers:
            return True
        return bool(epoch and self.epoch and epoch != self.epoch)

    def reject_batch(self, where: str, reason: str) -> None:
        """Count and log (rate-limited) a batch refused as wrong (another topology, a bad body)."""
        with self._lock:
            self._rejected_batches += 1
        self._reject_log.log("%s: batch rejected: %s", where, reason)

    def reject_frame(self, where: str, reason: str) -> None:
        """Count and log (rate-limited) a frame that is not even a batch."""
        with self._lock:
            self._rejected_frames += 1
        self._reject_log.log("%s: frame rejected: %s", where, reason)

    def wrong_topology(self, topology: str, sender: int) -> str | None:
        """Why a batch for ``topology`` cannot be taken here, or None when it can."""
        if topology == self.topology_id:
            return None
        return (
            f"a batch for topology {topology!r} from worker {sender}; this worker runs {self.topology_id!r}"
        )

    def receive(
        self,
        stream: StreamState,
        sender: int,
        session: int,
        sequence: int,
        messages: list[TaskMessage],
        size: int,
        ack_requested: bool,
        first_unacked: int = 0,
        broadcasts: int = 0,
        epoch: str = "",
    ) -> Ack | None:
        """Judge and deliver one batch; the ack to send now, or None.

        ``size`` is its framed bytes, ``broadcasts`` how many of its messages have no task,
        ``first_unacked`` the sender's oldest unacknowledged sequence where the framing has it,
        ``epoch`` the assignment epoch the sender routes by (named in its stream's handshake).
        Raises ReceiverStoppedError (send no ack: the sender keeps the batch) while stopping, and
        AssignmentEpochError for a batch routed by another epoch: delivering it could hand tuples
        to tasks that moved, so the sender keeps it until the two agree.
        """
        if self.stopping:
            raise ReceiverStoppedError(f"topology {self.topology_id!r} is not receiving (shutting down)")
        if self.epoch and not epoch:
            self.refuse("no_epoch", "Transfer", f"a batch from worker {sender} names no assignment epoch")
            raise AssignmentEpochError(
                f"the batch names no assignment epoch; this worker routes by {self.epoch} "
                "(a sender must name the epoch it routes by)"
            )
        if epoch and self.epoch and epoch != self.epoch:
            with self._lock:
                self._epoch_refused += 1
            self._reject_log.log(
                "worker %d routes by epoch %s, this worker by %s: batch refused (kept by the sender)",
                sender,
                epoch,
                self.epoch,
            )
            raise AssignmentEpochError(
                f"worker {sender} routes by assignment epoch {epoch}; this worker routes by {self.epoch}"
            )
        admission = self.admission
        if admission is not None:
            refusal = admission(sender)
            if refusal is not None:
                raise ReceiverStoppedError(refusal)
        key = (sender, session)
        with self.filter.lock(key):
            verdict, last = self.filter.judge(key, sequence, first_unacked)
            if verdict is Verdict.DUPLICATE:
                stream.duplicates += 1
                return self._ack(stream, last or 0, [])
            if verdict is Verdict.GAP:
                already = (sender, session, last or 0)
                if stream.gap_reported == already:
                    return None  # the sender was told; it is resending
                stream.gap_reported = already
                duplicates, granted = stream.duplicates, self.granted()
                return Ack(last or 0, self.credit, duplicates=duplicates, gap=True, credit_bytes=granted)
            deliver, shutdown = split_shutdown(messages)
            unknown = self.on_batch(deliver) if deliver else []
            self.filter.delivered(key, sequence)
        tuples = tuples_in(deliver)  # a rows payload carries many
        with self._lock:
            self._batches += 1
            self._tuples += tuples
            self._bytes += size
            self._tuples_from[sender] = self._tuples_from.get(sender, 0) + tuples
            self._bytes_from[sender] = self._bytes_from.get(sender, 0) + size
            self._broadcasts += broadcasts
            if shutdown:
                self._shutdowns += 1
        if shutdown:
            self.stopping = True
            log.info("topology %r: shutdown notice from worker %d; receiving stops", self.topology_id, sender)
            return self._ack(stream, sequence, unknown)
        stream.unacked_tuples += tuples
        stream.unacked_bytes += size
        if (
            unknown
            or ack_requested
            or sequence % self.ack_every == 0
            or stream.unacked_tuples >= ACK_TUPLES
            or stream.unacked_bytes >= ACK_BYTES
        ):
            return self._ack(stream, sequence, unknown)
        congested = self.congestion()
        if congested != stream.reported:
            return self._ack(stream, sequence, unknown, congested)
        return None

    def delivered_ack(self, stream: StreamState, sender: int, session: int) -> Ack | None:
        """The ack of every batch of (``sender``, ``session``) delivered so far, to send before
        refusing the next: a delivered batch left unacknowledged would be resent to whoever
        serves next and counted twice. None when nothing was delivered."""
        last = self.filter.last((sender, session))
        return None if last is None else self._ack(stream, last, [])

    def _ack(
        self, stream: StreamState, sequence: int, unknown: list[int], congested: list[int] | None = None
    ) -> Ack:
        congested = self.congestion() if congested is None else congested
        stream.reported = congested
        stream.unacked_tuples = 0
        stream.unacked_bytes = 0
        return Ack(
            sequence,
            self.credit,
            unknown[:UNKNOWN_REPORTED],
            stream.duplicates,
            congested,
            credit_bytes=self.granted(),
        )

    def stats(self) -> BindingStats:
        with self._lock:
            return BindingStats(
                received_batches=self._batches,
                received_tuples=self._tuples,
                received_bytes=self._bytes,
                received_tuples_from=dict(self._tuples_from),
                received_bytes_from=dict(self._bytes_from),
                duplicate_batches=self.filter.duplicates,
                rejected_batches=self._rejected_batches,
                rejected_frames=self._rejected_frames,
                sequence_gaps=self.filter.gaps,
                broadcast_messages=self._broadcasts,
                shutdown_messages=self._shutdowns,
                epoch_refused_batches=self._epoch_refused,
                refused=dict(self._refused),
            )
