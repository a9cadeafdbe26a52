"""What the grpc transport's senders share: the channel options, the handshake that opens each
Transfer stream, what a stream writes and when (`StreamRequests`), and the sender's identity,
window items and acknowledgements (`TransferSender`). The sender on threads is
`tuplemesh.transport.grpc_impl.GrpcConnection`; the one on an event loop is
`tuplemesh.transport.grpc_links.LoopConnection`."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from tuplemesh.logutil import RateLimitedLog
from tuplemesh.security import mesh_proof
from tuplemesh.transport.base import HeldBytes, OnCongestion
from tuplemesh.transport.framing import TransferBatchEncoder
from tuplemesh.transport.settings import TransportSettings
from tuplemesh.transport.window import WindowedConnection
from tuplemesh.v1 import messages_pb2

__all__ = [
    "ACK_PROBE_SECONDS",
    "EPOCH_METADATA",
    "FRAME_SLACK",
    "TRANSFER_STREAM",
    "StreamAttempt",
    "StreamRequests",
    "TransferSender",
    "channel_options",
    "handshake",
]

log = logging.getLogger("tuplemesh.transport.grpc_impl")  # where operators filter the grpc transport

#: Room for the protobuf framing around the largest payload in one TransferBatch.
FRAME_SLACK = 64 * 1024

#: How long a stream idles before it asks for the ack of batches it sent without asking.
ACK_PROBE_SECONDS = 0.005

#: The method path of Transfer.Stream, which the sender calls with pre-serialized requests.
TRANSFER_STREAM = "/tuplemesh.v1.Transfer/Stream"


def channel_options(settings: TransportSettings) -> list[tuple[str, Any]]:
    """Channel options shared by clients: message limits, Storm's reconnect backoff, keepalive."""
    limit = settings.max_message_bytes + FRAME_SLACK
    keepalive = settings.keepalive_millis
    pings = (
        [
            # A peer that vanished without closing (power loss, partition) or stopped answering
            # (SIGSTOP) is noticed within two keepalive periods instead of TCP's retransmission
            # timeout (minutes); the stream then reconnects and resends, so flow resumes soon
            # after the peer is back, and readiness sees the channel leave READY meanwhile.
            ("grpc.keepalive_time_ms", keepalive),
            ("grpc.keepalive_timeout_ms", keepalive),
            # gRPC (1.85) arms no timer of keepalive_timeout_ms on a keepalive ping: an
            # unanswered ping ends the connection only after the ping timeout, 60 s by default,
            # so that is what bounds the wait for the answer.
            ("grpc.http2.ping_timeout_ms", keepalive),
            ("grpc.http2.max_pings_without_data", 0),
        ]
        if keepalive
        else []
    )
    return [
        *pings,
        ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit),
        ("grpc.initial_reconnect_backoff_ms", settings.reconnect_min_wait_millis),
        ("grpc.min_reconnect_backoff_ms", settings.reconnect_min_wait_millis),
        ("grpc.max_reconnect_backoff_ms", settings.reconnect_max_wait_millis),
        # one subchannel per connection: two peers never share (and never break) one TCP link
        ("grpc.use_local_subchannel_pool", 1),
    ]


#: Stream metadata (the handshake) naming the assignment epoch the sender routes by.
EPOCH_METADATA = "tuplemesh-epoch"


def handshake(
    settings: TransportSettings, topology_id: str, receiver: int, epoch: str
) -> tuple[tuple[str, str], ...]:
    """The metadata a sender opens every stream to worker ``receiver`` with: its epoch, its worker
    id and a fresh proof (a receiver takes each proof once: made again for every stream)."""
    named = ((EPOCH_METADATA, epoch),) if epoch else ()
    return named + mesh_proof(settings.mesh_secret, topology_id, settings.worker_index, receiver)


class StreamAttempt:
    """One stream attempt of a sender; what writes its requests stops once it is not alive."""

    __slots__ = ("alive",)

    def __init__(self) -> None:
        self.alive = True


class StreamRequests:
    """What one stream attempt of a sender writes, and when: every unacknowledged batch in order
    from the oldest, then new ones, each the serialized TransferBatch. The thread sender and the
    event-loop sender (`tuplemesh.transport.grpc_links`) both walk the window with it.

    A batch asks for an ack only when it fills the window (the receiver acknowledges every
    quarter of its credit anyway). Asking on every batch the sender had nothing queued behind,
    as it once did, meant an ack per batch at moderate rates: a stream message back and a thread
    hand-over more on each side per batch, which doubled the cross-worker latency (measured).
    What went out without asking is asked about once the stream has idled `ACK_PROBE_SECONDS`:
    an ack probe, an empty batch with sequence 0, so the tail of a burst is acknowledged (and
    ``close`` does not wait for it) while the link is idle. An idle link says it is alive with
    an empty heartbeat every quarter of ``server.stream.idle.timeout.ms``, or the receiver ends it.
    """

    __slots__ = ("_conn", "_encode", "_heartbeat", "_pace", "_unasked", "hold_until", "position")

    def __init__(self, conn: TransferSender) -> None:
        self._conn = conn
        self._encode = conn._encoder.encode
        self.position = conn.window.oldest
        self._unasked = False  # batches went out since the last ack request
        self._heartbeat = conn._settings.stream_idle_timeout_seconds / 4 or None
        self._pace = conn._settings.coalesce_seconds
        #: a busy link: the open batch waits until then, taking what comes
        self.hold_until = 0.0

    def wait(self) -> float | None:
        """How long to wait for the next batch before `idle` (None: for ever)."""
        return ACK_PROBE_SECONDS if self._unasked else self._heartbeat

    def idle(self) -> bytes | None:
        """Nothing came in `wait`: an ack probe, a heartbeat, or nothing to write."""
        probe = self._unasked
        self._unasked = False
        if probe and self._conn.window.oldest < self.position:  # idle, batches not acknowledged
            return self._encode(0, b"", True)
        if not probe:
            return self._encode(0, b"", False)  # heartbeat: an empty batch asks for nothing
        return None

    def message(self, found: tuple[int, Any]) -> bytes:
        """The stream message of the window's batch ``found`` (position, item)."""
        conn = self._conn
        window = conn.window
        position, item = found
        packed, carrier = item if item.__class__ is tuple else (item, None)
        if position <= conn._highest_sent:
            conn.resent_batches += 1  # this batch went out on an earlier stream
        else:
            conn._highest_sent = position
        # nothing queued behind it and the window full (``add`` waits): ask now
        ask = position + 1 >= window.next_seq and window.full
        self._unasked = not ask
        self.position = position + 1
        conn.sent_batches += 1
        if self._pace:
            self.hold_until = time.monotonic() + self._pace
        return self._encode(position, packed, ask, carrier)


class TransferSender(WindowedConnection):
    """What both grpc senders to one peer share (the thread one here, the event-loop one in
    `tuplemesh.transport.grpc_links`): identity, the stream's handshake and encoder, the window
    items (the packed batch, framed when it goes out), and what an acknowledgement does.
    ``send`` from one thread at a time; the rest any thread."""

    def __init__(
        self,
        settings: TransportSettings,
        conf: Mapping[str, Any],
        topology_id: str,
        host: str,
        port: int,
        on_congestion: OnCongestion | None = None,
        receiver: int = -1,
        epoch: str = "",
        held: HeldBytes | None = None,
    ) -> None:
        super().__init__(settings, topology_id, f"{host}:{port}", on_congestion, held)
        self.min_wait = settings.reconnect_min_wait_seconds
        self.max_wait = settings.reconnect_max_wait_seconds
        self._closed = False
        self._highest_sent = 0  # sequence of the newest batch any stream has carried
        self._call: Any = None
        self._error_log = RateLimitedLog(log, settings.log_interval_seconds)
        self._conf = conf  # its tls.* keys: a retarget opens a new channel
        self._settings = settings
        self._options = channel_options(settings)
        self.receiver = receiver  # the worker at the other end, named in each stream's proof
        self.epoch = epoch  # the assignment epoch this sender routes by, named on each stream
        self._encoder = TransferBatchEncoder(self.topology_id, self.sender, self.session)

    coalesces = True

    def _item(self, sequence: int, packed: bytes) -> bytes:
        return packed  # framed by the stream thread, with the ack request known only then

    def _traced_item(
        self, sequence: int, packed: bytes, carrier: dict[str, str]
    ) -> tuple[bytes, dict[str, str]]:
        return packed, carrier  # the stream thread frames it with its trace context

    def retarget(self, host: str, port: int) -> None:
        """The peer moved: stream to ``host:port`` from now on, resending what is unacknowledged."""
        raise NotImplementedError

    def close(self) -> None:
        """Wait (up to messaging.close.timeout.secs) for every batch to be acknowledged, then close."""
        raise NotImplementedError

    def _handshake(self) -> tuple[tuple[str, str], ...]:
        return handshake(self._settings, self.topology_id, self.receiver, self.epoch)

    def _on_ack(self, ack: messages_pb2.TransferAck) -> None:
        self.window.ack(ack.sequence, ack.credit, ack.credit_bytes)
        if self.on_congestion is not None:
            self.on_congestion(self, list(ack.congested_tasks))
        if ack.unknown_tasks:
            self.unknown_tasks += len(ack.unknown_tasks)
            self._error_log.log(
                "peer %s does not own task(s) %s (counted there, %d reported here)",
                self.address,
                sorted(set(ack.unknown_tasks)),
                self.unknown_tasks,
            )

    def _stream_failed(self, code: Any, details: str) -> None:
        if not self._closed:
            self._error_log.log("stream to %s failed (%s): %s", self.address, code, details)
