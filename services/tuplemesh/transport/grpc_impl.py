"""The ``grpc`` transport: one bidirectional ``Transfer.Stream`` per (sender, receiver) pair.

Sender (``GrpcConnection``): ``send`` packs a batch (one msgpack array of ``[task, payload]`` pairs
in ``TransferBatch.packed``; measured faster than a protobuf object per tuple), gives it the next
sequence number and appends it to a bounded window of unacknowledged batches (count and bytes);
when the window is full ``send`` blocks: backpressure, never a drop. The stream writes each
batch as the bytes of a ``TransferBatch`` encoded by `TransferBatchEncoder` (identical to what
protobuf serializes, so any protobuf client or server interoperates). Coalescing the batches
queued behind a stream that fell behind into one message was built and measured: the receiver
spent more CPU per tuple on the large messages and the transport ran at ~0.6x, so it is not
done. A stream thread per connection keeps a stream open, reconnecting with Storm's bounded
exponential backoff (``storm.messaging.netty.min_wait_ms`` .. ``max_wait_ms``) for as long as the
connection is open, and after every reconnect resends the unacknowledged batches in order.
Batches sent while the peer is down wait in the window and go out when it comes up.

Identity. Every stream's metadata names the sending worker (``tuplemesh-worker``) and, with a
mesh secret, proves it (``tuplemesh-auth``, `tuplemesh.security.mesh_auth`: made for each stream,
naming the receiving worker, a timestamp and a nonce). Before reading a batch the receiver checks
the stream: a wrong, missing, stale, replayed or another worker's proof is UNAUTHENTICATED (too
many proofs within the skew window: RESOURCE_EXHAUSTED), a certificate
without the worker role (mTLS) or a worker id outside this mesh PERMISSION_DENIED. Every batch
must then name the sender the stream proved (PERMISSION_DENIED otherwise), so a shutdown notice,
a broadcast or a metric label can only come from a member. Without a secret and without mTLS a
stream that names no worker is taken to be from its first batch's sender (plaintext development).

Receiver (``_TransferServicer``): decodes each batch and hands it to the shared
`ReceiverSession` (dedupe, the sequence-gap rule, delivery, the ack policy); a gap ends the
stream, so the sender reconnects and resends from its oldest unacknowledged batch.
``on_batch`` blocking (full inboxes) stops the stream from reading, and HTTP/2 flow control
carries the backpressure to the sender.

``grpc.RpcError`` never leaves this module: failures become ``tuplemesh.errors.TransportError``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from concurrent import futures
from typing import TYPE_CHECKING, Any

import grpc

from tuplemesh.admission import AdmissionLimits, CallAdmission
from tuplemesh.client import peer_channel as secure_channel
from tuplemesh.config import as_config
from tuplemesh.errors import AssignmentEpochError, ReceiverStoppedError, TransportError
from tuplemesh.rpcerrors import RpcErrors
from tuplemesh.security import (
    AUTH_METADATA,
    WORKER_METADATA,
    ProofRefused,
    TlsConnections,
    TokenInterceptor,
    is_worker_certificate,
    server_credentials,
)
from tuplemesh.tracing import attach_carrier, detach
from tuplemesh.transport.base import (
    Admission,
    Capabilities,
    CongestedTasks,
    GrantedBytes,
    HeldBytes,
    OnBatch,
    OnCongestion,
    TaskMessage,
)
from tuplemesh.transport.framing import unpack_batch
from tuplemesh.transport.grpc_sender import (
    EPOCH_METADATA,
    FRAME_SLACK,
    TRANSFER_STREAM,
    StreamAttempt,
    StreamRequests,
    TransferSender,
    channel_options,
)
from tuplemesh.transport.session import Ack, ReceiverSession, StreamState
from tuplemesh.transport.settings import EVENT_LOOP_SENDER, TransportSettings
from tuplemesh.transport.stats import BindingStats
from tuplemesh.v1 import messages_pb2, transfer_pb2_grpc

if TYPE_CHECKING:  # loaded at run time only by the first event-loop link
    from tuplemesh.transport.grpc_links import LinkLoop

__all__ = [
    "AUTH_METADATA",
    "WORKER_METADATA",
    "GrpcBinding",
    "GrpcConnection",
    "GrpcContext",
    "channel_options",
]

log = logging.getLogger(__name__)


def decode_batch(batch: messages_pb2.TransferBatch) -> tuple[list[TaskMessage], int]:
    """(the (task, payload) pairs of a batch, how many are broadcasts), from ``packed`` or from
    hand-written ``messages`` (where ``broadcast`` stands for the task proto3 cannot leave out)."""
    if batch.packed:
        return unpack_batch(batch.packed)
    messages: list[TaskMessage] = [(None if m.broadcast else m.task, m.payload) for m in batch.messages]
    return messages, sum(1 for m in batch.messages if m.broadcast)


def _ack_message(ack: Ack) -> messages_pb2.TransferAck:
    return messages_pb2.TransferAck(
        sequence=ack.sequence,
        credit=ack.credit,
        unknown_tasks=ack.unknown_tasks,
        duplicates=ack.duplicates,
        congested_tasks=ack.congested_tasks,
        credit_bytes=ack.credit_bytes,
    )


class _TransferServicer(transfer_pb2_grpc.TransferServicer):
    """Frames the Transfer service for one bound topology; the rules are the session's."""

    def __init__(self, session: ReceiverSession) -> None:
        self.session = session

    def _reject(self, context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> None:
        self.session.reject_batch("Transfer stream", f"({code.name}) {message}")
        context.abort(code, message)

    def _refuse(
        self, context: grpc.ServicerContext, reason: str, code: grpc.StatusCode, message: str
    ) -> None:
        self.session.refuse(reason, f"Transfer stream from {context.peer()}", message)
        context.abort(code, message)

    def _identify(self, context: grpc.ServicerContext, metadata: dict[str, str], epoch: str) -> int | None:
        """The worker this stream is from, as its channel proves it; None (plaintext without a
        secret, a stream that names no worker): its first batch's sender. Aborts when refused."""
        session = self.session
        if session.worker_certificates and not is_worker_certificate(context):
            self._refuse(
                context, "not_a_worker", grpc.StatusCode.PERMISSION_DENIED,
                "Transfer needs a certificate with the worker role (a client certificate cannot send)",
            )  # fmt: skip
        claimed = metadata.get(WORKER_METADATA)
        if session.verifier is not None:
            try:
                session.verifier.verify_metadata(metadata)
            except ProofRefused as refused:
                self._refuse(context, refused.reason, refused.code, f"Transfer: {refused}")
        if claimed is None:
            return None
        if not claimed.isdecimal():
            self._refuse(
                context, "not_a_member", grpc.StatusCode.PERMISSION_DENIED,
                f"{WORKER_METADATA} {claimed[:40]!r} is not a worker id",
            )  # fmt: skip
        worker = int(claimed)
        if not session.member(worker, epoch):
            self._refuse(
                context, "not_a_member", grpc.StatusCode.PERMISSION_DENIED,
                f"worker {worker} is not a worker of this mesh ({session.workers} workers)",
            )  # fmt: skip
        return worker

    def Stream(
        self, request_iterator: Iterator[messages_pb2.TransferBatch], context: grpc.ServicerContext
    ) -> Iterator[messages_pb2.TransferAck]:
        session = self.session
        stream = StreamState()
        metadata = {str(k): str(v) for k, v in context.invocation_metadata() or ()}
        epoch = metadata.get(EPOCH_METADATA, "")
        sender = self._identify(context, metadata, epoch)
        for batch in request_iterator:
            wrong = session.wrong_topology(batch.topology_id, batch.sender)
            if wrong is not None:
                self._reject(context, grpc.StatusCode.FAILED_PRECONDITION, wrong)
            if sender is None:  # plaintext, no worker named: the first batch names it for all
                if not session.member(batch.sender, epoch):
                    self._refuse(
                        context, "not_a_member", grpc.StatusCode.PERMISSION_DENIED,
                        f"worker {batch.sender} is not a worker of this mesh ({session.workers} workers)",
                    )  # fmt: skip
                sender = batch.sender
            elif batch.sender != sender:
                self._refuse(
                    context, "sender_mismatch", grpc.StatusCode.PERMISSION_DENIED,
                    f"a batch naming worker {batch.sender} on the stream of worker {sender}",
                )  # fmt: skip
            if not batch.sequence and not batch.packed and not batch.messages:
                # an ack probe (sequences start at 1): acknowledge what was delivered
                done = session.delivered_ack(stream, batch.sender, batch.session)
                if done is not None:
                    yield _ack_message(done)
                continue
            try:
                messages, broadcasts = decode_batch(batch)
            except ValueError as exc:
                self._reject(
                    context, grpc.StatusCode.INVALID_ARGUMENT, f"malformed batch {batch.sequence}: {exc}"
                )
            # a traced sender's context is current while the receive path publishes the batch
            traced = attach_carrier(batch.trace_context) if batch.trace_context else None
            try:
                ack = session.receive(
                    stream,
                    batch.sender,
                    batch.session,
                    batch.sequence,
                    messages,
                    len(batch.packed),
                    batch.ack_requested,
                    broadcasts=broadcasts,
                    epoch=epoch,
                )
            except ReceiverStoppedError as exc:
                # this batch is not acknowledged (the sender keeps it and offers it again, after
                # reconnecting); every one delivered before it is
                done = session.delivered_ack(stream, batch.sender, batch.session)
                if done is not None:
                    yield _ack_message(done)
                code = grpc.StatusCode.UNAVAILABLE
                if isinstance(exc, AssignmentEpochError):
                    code = grpc.StatusCode.FAILED_PRECONDITION  # until the epochs agree
                context.abort(code, str(exc))
            finally:
                if traced is not None:
                    detach(traced)
            if ack is None:
                continue
            if ack.gap:
                # End the stream: the sender reconnects and resends from its oldest unacked batch.
                context.abort(
                    grpc.StatusCode.OUT_OF_RANGE,
                    f"sequence gap from worker {batch.sender}: got {batch.sequence} after {ack.sequence}",
                )
            yield _ack_message(ack)


class GrpcBinding:
    """A bound Transfer service; ``close`` stops its own server (or detaches from a shared one)."""

    def __init__(self, session: ReceiverSession, server: grpc.Server | None) -> None:
        self.session = session
        self._server = server

    def stats(self) -> BindingStats:
        return self.session.stats()

    def admit(self, admission: Admission | None) -> None:
        self.session.admission = admission

    def refuse(self, reason: str, where: str, detail: str) -> None:
        self.session.refuse(reason, where, detail)

    def close(self, grace: float = 1.0) -> None:
        self.session.stopping = True
        if self._server is not None:
            self._server.stop(grace).wait()


class GrpcConnection(TransferSender):
    """Client side to one peer on threads: a stream thread reads the acknowledgements, and gRPC
    runs the request iterator on a thread of its own."""

    def __init__(
        self,
        context: GrpcContext,
        topology_id: str,
        host: str,
        port: int,
        on_congestion: OnCongestion | None = None,
        receiver: int = -1,
        epoch: str = "",
        held: HeldBytes | None = None,
    ) -> None:
        super().__init__(
            context.settings, context.conf, topology_id, host, port, on_congestion, receiver, epoch, held
        )
        self._wake = threading.Event()
        self._channel = secure_channel(self.address, self._conf, self._options)
        self._stream = _stream_callable(self._channel)
        self._thread = threading.Thread(target=self._run, name=f"grpc-send-{self.address}", daemon=True)
        self._thread.start()

    def _requests(self, attempt: StreamAttempt) -> Iterator[bytes]:
        """Request stream of one attempt (`StreamRequests` says what goes out and when)."""
        requests = StreamRequests(self)
        next_to_send = self.window.next_to_send

        def alive() -> bool:
            return attempt.alive

        while True:
            found = next_to_send(requests.position, alive, requests.wait(), requests.hold_until)
            if found is None:
                if not attempt.alive:
                    return
                idle = requests.idle()
                if idle is not None:
                    yield idle
                continue
            yield requests.message(found)

    def link_state(self) -> str:
        return connectivity(self._channel)

    # -- the stream thread ----------------------------------------------------------------------
    def _run(self) -> None:
        delay = self.min_wait
        while not self._closed:
            attempt = StreamAttempt()
            try:
                metadata = self._handshake()
                call = self._stream(self._requests(attempt), wait_for_ready=True, metadata=metadata)
                self._call = call
                if self._closed:
                    call.cancel()
                for ack in call:
                    self.state = "READY"
                    delay = self.min_wait
                    self._on_ack(ack)
            except grpc.RpcError as exc:
                self._stream_failed(exc.code(), _details(exc))
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
        self.retargets += 1
        self.address = self.window.address = f"{host}:{port}"
        self._channel = secure_channel(self.address, self._conf, self._options)
        self._stream = _stream_callable(self._channel)
        call = self._call
        if call is not None:
            call.cancel()  # the stream thread reconnects at once, with the new stub
        self._wake.set()
        old.close()

    def close(self) -> None:
        """Wait (up to messaging.close.timeout.secs) for every batch to be acknowledged, then close."""
        self._drain_window()
        self._closed = True
        self._wake.set()
        self.window.wake()
        if self._call is not None:
            self._call.cancel()
        self._thread.join(5.0)
        self._channel.close()


#: gRPC core's connectivity numbers -> the names grpc.ChannelConnectivity gives them.
_CONNECTIVITY = {state.value[0]: state.name for state in grpc.ChannelConnectivity}


def connectivity(channel: grpc.Channel) -> str:
    """A channel's connectivity now (``READY``, ``TRANSIENT_FAILURE``, ...), asked of gRPC's core
    when read. ``Channel.subscribe`` would keep it current instead, but each subscription runs a
    thread that wakes every 0.2 s: across a mesh of N workers that is 5 N (N - 1) wake-ups a
    second, each taking its process's GIL (on 2 cores a mesh of 32 idle workers spent its CPU on
    them and never formed). The core's state is what those threads read too."""
    core = getattr(channel, "_channel", None)  # grpc._channel.Channel's cygrpc channel
    if core is None:
        return "UNKNOWN"
    try:
        return _CONNECTIVITY.get(core.check_connectivity_state(False), "UNKNOWN")
    except ValueError:  # "Channel closed!"
        return "SHUTDOWN"


def _stream_callable(channel: grpc.Channel) -> grpc.StreamStreamMultiCallable:
    """Transfer.Stream taking requests already serialized (TransferBatchEncoder's bytes)."""
    return channel.stream_stream(
        TRANSFER_STREAM,
        request_serializer=None,
        response_deserializer=messages_pb2.TransferAck.FromString,
    )


def _details(exc: grpc.RpcError) -> str:
    details = getattr(exc, "details", None)
    return str(details() if callable(details) else exc)


class GrpcContext:
    """The grpc plugin. Share a worker's own grpc.Server with ``use_server`` (one port for all)."""

    capabilities = Capabilities(shares_server=True, reports_congestion=True)

    def __init__(self) -> None:
        self.conf: Mapping[str, Any] = {}
        self.settings: TransportSettings  # set by prepare, which comes first
        self._shared_server: grpc.Server | None = None
        self._connections: list[TransferSender] = []
        self._bindings: list[GrpcBinding] = []
        self._lock = threading.Lock()
        self._terminated = False
        #: the event loop every link runs on (messaging.grpc.sender ``event-loop``); made by the
        #: first such link, so a worker on threads loads neither asyncio nor grpc.aio
        self._links: LinkLoop | None = None

    def prepare(self, conf: Mapping[str, Any]) -> None:
        self.conf = conf
        self.settings = TransportSettings.from_config(conf)

    def use_server(self, server: grpc.Server) -> None:
        """Register Transfer on ``server`` (started by its owner) instead of starting one in ``bind``."""
        self._shared_server = server

    def bind(
        self,
        topology_id: str,
        port: int,
        on_batch: OnBatch,
        congestion: CongestedTasks | None = None,
        grant: GrantedBytes | None = None,
        epoch: str = "",
    ) -> GrpcBinding:
        settings = self.settings
        session = ReceiverSession.bound_with(topology_id, on_batch, settings, congestion, grant, epoch)
        servicer = _TransferServicer(session)
        if self._shared_server is not None:
            transfer_pb2_grpc.add_TransferServicer_to_server(servicer, self._shared_server)
            binding = GrpcBinding(session, None)
        else:
            server = new_server(self.conf)
            transfer_pb2_grpc.add_TransferServicer_to_server(servicer, server)
            bind_port(server, settings.bind_host, port, self.conf)
            server.start()
            binding = GrpcBinding(session, server)
        with self._lock:
            self._bindings.append(binding)
        return binding

    def connect(
        self,
        topology_id: str,
        host: str,
        port: int,
        on_congestion: OnCongestion | None = None,
        receiver: int = -1,
        epoch: str = "",
        held: HeldBytes | None = None,
    ) -> TransferSender:
        if self._terminated:
            raise TransportError("grpc transport was terminated")
        conn: TransferSender
        if self.settings.grpc_sender == EVENT_LOOP_SENDER:
            from tuplemesh.transport.grpc_links import LinkLoop, LoopConnection

            if self._links is None:
                self._links = LinkLoop()
            conn = LoopConnection(
                self.settings,
                self.conf,
                self._links,
                topology_id,
                host,
                port,
                on_congestion,
                receiver,
                epoch,
                held,
            )
        else:
            conn = GrpcConnection(self, topology_id, host, port, on_congestion, receiver, epoch, held)
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
        if self._links is not None:
            self._links.stop()
        for binding in bindings:
            binding.close(grace=0.5)


def new_server(
    conf: Mapping[str, Any], errors: RpcErrors | None = None, admission: CallAdmission | None = None
) -> grpc.Server:
    """A gRPC server sized and limited by the config (its services are added by the caller).

    ``errors``, when given, counts every call answered with an error (including token and
    admission refusals). ``admission`` keeps each class of caller within its own limit (one is
    made from the config when not given); the pool runs every admitted call at once, so gRPC's
    own global cap (which would refuse health checks too) is never what refuses."""
    settings = TransportSettings.from_config(conf)
    limit = settings.max_message_bytes + FRAME_SLACK
    keepalive = settings.keepalive_millis
    if admission is None:
        admission = CallAdmission(
            AdmissionLimits.from_config(as_config(conf)), settings.stream_idle_timeout_seconds
        )
    interceptors: list[grpc.ServerInterceptor] = [] if errors is None else [errors]
    if settings.admin_token:
        interceptors.append(TokenInterceptor(settings.admin_token))
    interceptors.append(admission)
    # gRPC refuses a message above its receive limit before any handler or interceptor sees it:
    # uncounted, unlogged. Its limit is therefore twice ours, and the admission refuses (and so
    # counts) what lies between; only larger messages are still refused unseen.
    admission.max_request_bytes = limit
    threads = max(settings.grpc_server_threads, admission.limits.threads)
    return grpc.server(
        futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="grpc-server"),
        options=[
            ("grpc.max_send_message_length", limit),
            ("grpc.max_receive_message_length", 2 * limit),
            # accept the peers' keepalive pings (the default policy answers frequent pings with
            # GOAWAY "too_many_pings")
            ("grpc.http2.min_recv_ping_interval_without_data_ms", max(1, keepalive // 2)),
            ("grpc.http2.max_ping_strikes", 0),
            # what a client may send ahead of what the handlers read: a fixed window, because
            # gRPC's automatic one (BDP probing) grows to what the link carries, and a peer that
            # ignores the worker's grants then parks hundreds of MiB in the transport's buffers,
            # outside the ceiling on bytes received (measured: a 15 MiB-batch flood into a
            # stalled sink, peak RSS 312-418 MiB grown, 235-243 MiB fixed at 1 MiB; throughput
            # between workers the same either way)
            ("grpc.http2.bdp_probe", 0),
            ("grpc.http2.lookahead_bytes", settings.grpc_receive_window_bytes),
            ("grpc.so_reuseport", 0),  # a second worker on the same port must fail, not share it
        ],
        maximum_concurrent_rpcs=threads,
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
