"""The ``grpc`` transport: one bidirectional ``Transfer.Stream`` per (sender, receiver) pair.

Sender (``GrpcConnection``): ``send`` packs a batch (one msgpack array of ``[task, payload]`` pairs
in ``TransferBatch.packed``; measured faster than a protobuf object per tuple), gives it the next
sequence number and appends it to a bounded window of unacknowledged batches (count and bytes);
when the window is full ``send`` blocks: backpressure, never a drop. A stream thread per
connection keeps a stream open, reconnecting with Storm's bounded exponential backoff
(``storm.messaging.netty.min_wait_ms`` .. ``max_wait_ms``) for as long as the connection is open,
and after every reconnect resends the unacknowledged batches in order. Batches sent while the
peer is down wait in the window and go out when it comes up.

Receiver (``_TransferServicer``): per (sender, session) it remembers the highest sequence put
into the inboxes; a batch at or below it is a resend after a reconnect and is discarded (counted).
Delivery for one (sender, session) is serialised by a lock, so a stale stream and its
replacement never both deliver a batch. ``on_batch`` blocking (full inboxes) stops the stream
from reading, and HTTP/2 flow control carries the backpressure to the sender.

``grpc.RpcError`` never leaves this module: failures become ``tuplemesh.errors.TransportError``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent import futures
from typing import Any

import grpc

from tuplemesh.client import peer_channel as secure_channel
from tuplemesh.errors import ReceiverStoppedError, TransportError
from tuplemesh.logutil import RateLimitedLog
from tuplemesh.rpcerrors import RpcErrors
from tuplemesh.security import TlsConnections, TokenInterceptor, server_credentials
from tuplemesh.transport.base import OnBatch, TaskMessage
from tuplemesh.transport.dedupe import DuplicateFilter, Verdict
from tuplemesh.transport.framing import unpack_batch
from tuplemesh.transport.window import WindowedConnection
from tuplemesh.v1 import messages_pb2, transfer_pb2_grpc

__all__ = ["GrpcBinding", "GrpcConnection", "GrpcContext", "channel_options"]

log = logging.getLogger(__name__)

#: Room for the protobuf framing around the largest payload in one TransferBatch.
_FRAME_SLACK = 64 * 1024


def channel_options(conf: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Channel options shared by clients: message limits, Storm's reconnect backoff, keepalive."""
    limit = conf["messaging.max.message.bytes"] + _FRAME_SLACK
    keepalive = conf["messaging.keepalive.millis"]
    pings = (
        [
            # A peer that vanished without closing (power loss, partition) is noticed within
            # two keepalive periods instead of TCP's retransmission timeout (minutes); the stream
            # then reconnects and resends, so flow resumes soon after the network heals.
            ("grpc.keepalive_time_ms", keepalive),
            ("grpc.keepalive_timeout_ms", keepalive),
            ("grpc.http2.max_pings_without_data", 0),
        ]
        if keepalive
        else []
    )
    return [
        *pings,
        ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit),
        ("grpc.initial_reconnect_backoff_ms", conf["storm.messaging.netty.min_wait_ms"]),
        ("grpc.min_reconnect_backoff_ms", conf["storm.messaging.netty.min_wait_ms"]),
        ("grpc.max_reconnect_backoff_ms", conf["storm.messaging.netty.max_wait_ms"]),
        # one subchannel per connection: two peers never share (and never break) one TCP link
        ("grpc.use_local_subchannel_pool", 1),
    ]


def decode_batch(batch: messages_pb2.TransferBatch) -> list[TaskMessage]:
    """The (task, payload) pairs of a batch (``packed``, or hand-written ``messages``)."""
    if batch.packed:
        return unpack_batch(batch.packed)
    return [(m.task, m.payload) for m in batch.messages]


class _TransferServicer(transfer_pb2_grpc.TransferServicer):
    """Receive side of the Transfer service for one bound topology."""

    def __init__(self, topology_id: str, on_batch: OnBatch, credit: int, log_interval: float) -> None:
        self.topology_id = topology_id
        self.on_batch = on_batch
        self.credit = credit
        # Acknowledge every ack_every batches (and whenever asked): an ack per batch costs a
        # stream message per batch, which measured as the limit of the whole transport.
        self.ack_every = max(1, credit // 4)
        self.closed = False
        self.filter = DuplicateFilter()
        self._lock = threading.Lock()
        self.received_tuples_from: dict[int, int] = {}  # per sending worker
        self.received_bytes_from: dict[int, int] = {}
        self.received_batches = 0
        self.rejected_batches = 0
        self._reject_log = RateLimitedLog(log, log_interval)
        #: The receiver's congested tasks (per-task backpressure); set by the worker.
        self.congestion: Callable[[], list[int]] = list

    @property
    def duplicate_batches(self) -> int:
        return self.filter.duplicates

    def _reject(self, context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> None:
        with self._lock:
            self.rejected_batches += 1
        self._reject_log.log("Transfer stream rejected (%s): %s", code.name, message)
        context.abort(code, message)

    def Stream(
        self, request_iterator: Iterator[messages_pb2.TransferBatch], context: grpc.ServicerContext
    ) -> Iterator[messages_pb2.TransferAck]:
        if self.closed:
            context.abort(grpc.StatusCode.UNAVAILABLE, "worker is not receiving (shutting down)")
        duplicates = 0
        reported: list[int] = []  # congested tasks as last told to this sender
        for batch in request_iterator:
            if batch.topology_id != self.topology_id:
                self._reject(
                    context,
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"batch for topology {batch.topology_id!r}; this worker runs {self.topology_id!r}",
                )
            try:
                messages = decode_batch(batch)
            except ValueError as exc:
                self._reject(
                    context, grpc.StatusCode.INVALID_ARGUMENT, f"malformed batch {batch.sequence}: {exc}"
                )
            key = (batch.sender, batch.session)
            with self.filter.lock(key):
                verdict, last = self.filter.judge(key, batch.sequence)
                if verdict is Verdict.DUPLICATE:
                    duplicates += 1
                    yield messages_pb2.TransferAck(
                        sequence=last or 0, credit=self.credit, duplicates=duplicates
                    )
                    continue
                if verdict is Verdict.GAP:
                    self._reject(
                        context,
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"sequence gap from worker {batch.sender}: got {batch.sequence} after {last}",
                    )
                try:
                    unknown = self.on_batch(messages) if messages else []
                except ReceiverStoppedError as exc:
                    # no ack: the sender keeps the batch and resends it after reconnecting
                    context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
                self.filter.delivered(key, batch.sequence)
            with self._lock:
                self.received_batches += 1
                sender = batch.sender
                self.received_tuples_from[sender] = self.received_tuples_from.get(sender, 0) + len(messages)
                self.received_bytes_from[sender] = self.received_bytes_from.get(sender, 0) + len(batch.packed)
            congested = self.congestion()
            if (
                unknown
                or batch.ack_requested
                or batch.sequence % self.ack_every == 0
                or congested != reported
            ):
                reported = congested
                yield messages_pb2.TransferAck(
                    sequence=batch.sequence,
                    credit=self.credit,
                    unknown_tasks=unknown[:64],
                    duplicates=duplicates,
                    congested_tasks=congested,
                )


class GrpcBinding:
    """A bound Transfer service; ``close`` stops its own server (or detaches from a shared one)."""

    def __init__(self, servicer: _TransferServicer, server: grpc.Server | None) -> None:
        self.servicer = servicer
        self._server = server

    @property
    def duplicate_batches(self) -> int:
        return self.servicer.duplicate_batches

    def report_congestion(self, congested: Callable[[], list[int]]) -> None:
        """Answer every ack with ``congested()`` (per-task backpressure)."""
        self.servicer.congestion = congested

    @property
    def received_tuples_from(self) -> dict[int, int]:
        return dict(self.servicer.received_tuples_from)

    @property
    def received_bytes_from(self) -> dict[int, int]:
        return dict(self.servicer.received_bytes_from)

    def close(self, grace: float = 1.0) -> None:
        self.servicer.closed = True
        if self._server is not None:
            self._server.stop(grace).wait()


class _Attempt:
    """One stream attempt; the request generator ends when it is no longer alive."""

    __slots__ = ("alive",)

    def __init__(self) -> None:
        self.alive = True


class GrpcConnection(WindowedConnection):
    """Client side to one peer. ``send`` from one thread at a time; the rest any thread."""

    def __init__(self, context: GrpcContext, topology_id: str, host: str, port: int) -> None:
        conf = context.conf
        super().__init__(conf, topology_id, f"{host}:{port}")
        self.min_wait = conf["storm.messaging.netty.min_wait_ms"] / 1000.0
        self.max_wait = conf["storm.messaging.netty.max_wait_ms"] / 1000.0
        self.channel_state = "IDLE"
        #: Called with (this connection, congested tasks) on every ack; set by the worker.
        self.on_congestion: Callable[[Any, Any], None] | None = None
        self._closed = False
        self._wake = threading.Event()
        self._call: Any = None
        self._error_log = RateLimitedLog(log, conf["tuplemesh.log.rate.limit.secs"])
        self._conf = conf
        self._channel = secure_channel(self.address, conf, channel_options(conf))
        self._channel.subscribe(self._on_channel_state, try_to_connect=True)
        self._stub = transfer_pb2_grpc.TransferStub(self._channel)
        self._thread = threading.Thread(target=self._run, name=f"grpc-send-{self.address}", daemon=True)
        self._thread.start()

    def _item(self, sequence: int, packed: bytes) -> messages_pb2.TransferBatch:
        return messages_pb2.TransferBatch(
            topology_id=self.topology_id,
            sender=self.sender,
            sequence=sequence,
            packed=packed,
            session=self.session,
        )

    def _requests(self, attempt: _Attempt) -> Iterator[messages_pb2.TransferBatch]:
        """Request stream of one attempt: every unacknowledged batch in order, then new ones."""
        position = self.window.oldest
        if self.reconnects:
            self.resent_batches += self.window.next_seq - position
        while True:
            found = self.window.next_to_send(position, lambda: attempt.alive)
            if found is None:
                return
            position, message = found
            # nothing queued behind it: ask for an ack now rather than at the next multiple
            message.ack_requested = position + 1 >= self.window.next_seq
            position += 1
            self.sent_batches += 1
            yield message

    def _on_ack(self, ack: messages_pb2.TransferAck) -> None:
        self.window.ack(ack.sequence, ack.credit)
        if self.on_congestion is not None:
            self.on_congestion(self, ack.congested_tasks)
        if ack.unknown_tasks:
            self.unknown_tasks += len(ack.unknown_tasks)
            self._error_log.log(
                "peer %s does not own task(s) %s (counted there, %d reported here)",
                self.address,
                sorted(set(ack.unknown_tasks)),
                self.unknown_tasks,
            )

    def _on_channel_state(self, state: grpc.ChannelConnectivity) -> None:
        self.channel_state = state.name

    # -- the stream thread ----------------------------------------------------------------------
    def _run(self) -> None:
        delay = self.min_wait
        while not self._closed:
            attempt = _Attempt()
            try:
                call = self._stub.Stream(self._requests(attempt), wait_for_ready=True)
                self._call = call
                if self._closed:
                    call.cancel()
                for ack in call:
                    self.state = "READY"
                    delay = self.min_wait
                    self._on_ack(ack)
            except grpc.RpcError as exc:
                if not self._closed:
                    self._error_log.log(
                        "stream to %s failed (%s): %s", self.address, exc.code(), _details(exc)
                    )
            finally:
                attempt.alive = False
                self.window.wake()
            if self._closed:
                break
            self.state = "RECONNECTING"
            self.reconnects += 1
            if self._wake.wait(delay) and not self._closed:
                self._wake.clear()  # woken by retarget: go now
            delay = min(delay * 2, self.max_wait)
        self.state = "CLOSED"

    def retarget(self, host: str, port: int) -> None:
        """The peer moved: stream to ``host:port`` from now on, resending what is unacknowledged."""
        old = self._channel
        self.address = self.window.address = f"{host}:{port}"
        self._channel = secure_channel(self.address, self._conf, channel_options(self._conf))
        self._channel.subscribe(self._on_channel_state, try_to_connect=True)
        self._stub = transfer_pb2_grpc.TransferStub(self._channel)
        call = self._call
        if call is not None:
            call.cancel()  # the stream thread reconnects at once, with the new stub
        self._wake.set()
        old.close()

    def close(self) -> None:
        """Wait (up to messaging.close.timeout.secs) for every batch to be acknowledged, then close."""
        self._drain_window(lambda message: bytes(message.packed))
        self._closed = True
        self._wake.set()
        self.window.wake()
        if self._call is not None:
            self._call.cancel()
        self._thread.join(5.0)
        self._channel.close()


def _details(exc: grpc.RpcError) -> str:
    details = getattr(exc, "details", None)
    return str(details() if callable(details) else exc)


class GrpcContext:
    """The grpc plugin. Share a worker's own grpc.Server with ``use_server`` (one port for all)."""

    def __init__(self) -> None:
        self.conf: Mapping[str, Any] = {}
        self._shared_server: grpc.Server | None = None
        self._connections: list[GrpcConnection] = []
        self._bindings: list[GrpcBinding] = []
        self._lock = threading.Lock()
        self._terminated = False

    def prepare(self, conf: Mapping[str, Any]) -> None:
        self.conf = conf

    def use_server(self, server: grpc.Server) -> None:
        """Register Transfer on ``server`` (started by its owner) instead of starting one in ``bind``."""
        self._shared_server = server

    def make_servicer(self, topology_id: str, on_batch: OnBatch) -> _TransferServicer:
        return _TransferServicer(
            topology_id,
            on_batch,
            self.conf["messaging.window.batches"],
            self.conf["tuplemesh.log.rate.limit.secs"],
        )

    def bind(self, topology_id: str, port: int, on_batch: OnBatch) -> GrpcBinding:
        servicer = self.make_servicer(topology_id, on_batch)
        if self._shared_server is not None:
            transfer_pb2_grpc.add_TransferServicer_to_server(servicer, self._shared_server)
            binding = GrpcBinding(servicer, None)
        else:
            server = new_server(self.conf)
            transfer_pb2_grpc.add_TransferServicer_to_server(servicer, server)
            bind_port(server, self.conf["worker.bind.host"], port, self.conf)
            server.start()
            binding = GrpcBinding(servicer, server)
        with self._lock:
            self._bindings.append(binding)
        return binding

    def connect(self, topology_id: str, host: str, port: int) -> GrpcConnection:
        if self._terminated:
            raise TransportError("grpc transport was terminated")
        conn = GrpcConnection(self, topology_id, host, port)
        with self._lock:
            self._connections.append(conn)
        return conn

    def term(self) -> None:
        self._terminated = True
        with self._lock:
            connections, self._connections = self._connections, []
            bindings, self._bindings = self._bindings, []
        for conn in connections:
            if conn.state != "CLOSED":
                conn.close()
        for binding in bindings:
            binding.close(grace=0.5)


def new_server(conf: Mapping[str, Any], errors: RpcErrors | None = None) -> grpc.Server:
    """A gRPC server sized and limited by the config (its services are added by the caller).

    ``errors``, when given, counts every call answered with an error (including token refusals)."""
    limit = conf["messaging.max.message.bytes"] + _FRAME_SLACK
    keepalive = conf["messaging.keepalive.millis"]
    interceptors: list[grpc.ServerInterceptor] = [] if errors is None else [errors]
    if conf.get("admin.token"):
        interceptors.append(TokenInterceptor(conf["admin.token"]))
    return grpc.server(
        futures.ThreadPoolExecutor(
            max_workers=conf["messaging.grpc.server.threads"], thread_name_prefix="grpc-server"
        ),
        options=[
            ("grpc.max_send_message_length", limit),
            ("grpc.max_receive_message_length", limit),
            # accept the peers' keepalive pings (the default policy answers frequent pings with
            # GOAWAY "too_many_pings")
            ("grpc.http2.min_recv_ping_interval_without_data_ms", max(1, keepalive // 2)),
            ("grpc.http2.max_ping_strikes", 0),
            ("grpc.so_reuseport", 0),  # a second worker on the same port must fail, not share it
        ],
        maximum_concurrent_rpcs=conf["messaging.grpc.server.threads"],
        interceptors=interceptors,
    )


def bind_port(
    server: grpc.Server,
    host: str,
    port: int,
    conf: Mapping[str, Any] | None = None,
    tls_connections: TlsConnections | None = None,
) -> int:
    """Add the port (mTLS when ``tls.enabled``); TransportError naming the address if it cannot bind."""
    address = f"{host}:{port}"
    try:
        if conf is not None and conf.get("tls.enabled"):
            bound = server.add_secure_port(address, server_credentials(conf, tls_connections))
        else:
            bound = server.add_insecure_port(address)
    except RuntimeError as exc:
        raise TransportError(f"cannot bind {address}: {exc}") from exc
    if bound == 0:
        raise TransportError(f"cannot bind {address} (in use?)")
    return int(bound)
