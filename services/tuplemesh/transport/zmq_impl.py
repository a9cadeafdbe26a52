"""The ``zmq`` transport: Storm's original ZeroMQ messaging, without its backpressure hole.

Socket pattern: DEALER (one per sender connection) to ROUTER (one per bound worker).
Storm used PUSH/PULL, which has no return path, so acknowledgements and resends were
impossible. Storm sent with NOBLOCK and dropped on a full high-water mark ("TODO: how to do
backpressure"). A ROUTER can answer each DEALER by its identity, which gives the
acknowledgement channel. With it, zmq gets the same window, ack, resend, duplicate and gap rules as
the grpc plugin, from the same code (`SendWindow`, `ReceiverSession`):

- ``send`` blocks while the window is full. A full high-water mark (``zmq.hwm``) leaves the
  batch in the window until the socket takes it. Nothing is dropped.
- The sending thread resends every unacknowledged batch, in order, when the socket monitor
  reports a reconnect, or when no acknowledgement arrived for a while (a peer that restarted
  under an unchanged connection). The receiver discards duplicates by (sender, session,
  sequence).

Frames: ``[header, packed]``. The header is msgpack ``[topology, sender, session, sequence,
ack_requested, first_unacked, epoch]``. ``first_unacked`` is the sender's oldest unacknowledged
sequence: ZeroMQ may still deliver batches queued before a reconnect ahead of the in-order
resend, and a restarted receiver must start at the oldest, not at whatever arrives first.
``epoch`` is the assignment epoch the sender routes by (``counter/workers/code``): a receiver at
another epoch does not acknowledge the batch (its tasks may have moved) and counts it; the
sender offers it again until the two agree, as with grpc's ``FAILED_PRECONDITION``. A 6-element
header (no epoch) is still read, and refused by a receiver that routes by an epoch. With a mesh
secret the header has an eighth element, ``auth``: the sender's proof of the secret
(`tuplemesh.security.mesh_auth`: naming ``sender``, the receiving worker, a timestamp and a
nonce). A sender makes a new proof when it connects, after every disconnect and every half
skew window (``mesh.secret.max.skew.secs``); a receiver verifies a proof (fresh, for it, never
taken before) the first time it arrives on a connection and then takes it on that connection
only, and only while its timestamp is within the window, so the header read off one connection
is refused on any other as replayed (pods' clocks must agree to within half the window). A receiver
with a secret drops (unacknowledged, counted by reason) every frame without a proof it takes; a
few frames ZeroMQ queued before a reconnect carry the old proof and are refused as replayed
too (the sender resends them). Every receiver drops frames whose ``sender`` is no worker of the
mesh, so only members' batches, shutdown notices and broadcasts are taken.
``packed`` is msgpack ``[[task, payload], ...]`` (the grpc plugin's framing).
A broadcast's task is nil and the shutdown notice is task -1, as on every transport.
Acks: msgpack ``[sequence, credit, unknown_tasks, duplicates, congested_tasks, gap, credit_bytes]``
(``congested_tasks`` is per-task backpressure, as in grpc's TransferAck; ``gap`` true means the
receiver is missing the batch after ``sequence``, so the sender resends from its oldest
unacknowledged batch at once; 4- and 5-element acks are still read).
The data port is the worker port + ``zmq.port.offset``, so the worker's gRPC Admin, health and
reflection keep the worker port.
Storm's ``zmq.threads``, ``zmq.hwm`` and ``zmq.linger.millis`` are honoured. pyzmq is the
``zmq`` extra, imported only when this plugin is used. ``zmq.ZMQError`` never leaves this
module.
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import msgpack

from tuplemesh.errors import ReceiverStoppedError, TransportError
from tuplemesh.logutil import RateLimitedLog
from tuplemesh.security import ProofRefused, mesh_auth
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
from tuplemesh.transport.session import Ack, ReceiverSession, StreamState
from tuplemesh.transport.settings import TransportSettings
from tuplemesh.transport.stats import BindingStats
from tuplemesh.transport.window import WindowedConnection

try:
    import zmq
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise TransportError("messaging.transport 'zmq' needs pyzmq: pip install 'tuplemesh[zmq]'") from exc

__all__ = ["ZmqBinding", "ZmqConnection", "ZmqContext"]

log = logging.getLogger(__name__)

#: Connections a receiver remembers the proof of (a mesh has one per peer, more only briefly
#: while peers reconnect); a connection forgotten proves itself again with its sender's next
#: proof, made every half skew window.
PROVEN_CONNECTIONS = 4096

_pack = msgpack.Packer(use_bin_type=True, autoreset=True).pack


class ZmqBinding:
    """A ROUTER socket and the thread that receives on it; the rules are the `ReceiverSession`'s."""

    def __init__(
        self,
        context: ZmqContext,
        topology_id: str,
        port: int,
        on_batch: OnBatch,
        congestion: CongestedTasks | None = None,
        grant: GrantedBytes | None = None,
        epoch: str = "",
    ) -> None:
        settings = context.settings
        self.session = ReceiverSession.bound_with(topology_id, on_batch, settings, congestion, grant, epoch)
        self.address = f"tcp://{settings.bind_host}:{port + settings.zmq_port_offset}"
        self._where = f"zmq receive on {self.address}"
        self._log = RateLimitedLog(log, settings.log_interval_seconds)
        self._ack_log = RateLimitedLog(log, settings.log_interval_seconds, logging.DEBUG)
        self._streams: dict[bytes, StreamState] = {}  # per peer identity
        # the proof each connection (peer identity) proved itself with; added only after a proof
        # is verified, so only holders of the secret add (bounded all the same: oldest first out)
        self._connection_proofs: OrderedDict[bytes, tuple[str, int]] = OrderedDict()
        self._closed = threading.Event()
        self._socket = context.zmq.socket(zmq.ROUTER)
        self._socket.setsockopt(zmq.RCVHWM, settings.zmq_receive_hwm_batches)
        self._socket.setsockopt(zmq.SNDHWM, settings.zmq_hwm_batches)
        self._socket.setsockopt(zmq.LINGER, settings.zmq_linger_millis)
        self._socket.setsockopt(zmq.ROUTER_MANDATORY, 1)  # an ack to a vanished peer is an error, not a drop
        deadline = time.monotonic() + 2.0
        while True:  # a port closed a moment ago may still be held by the I/O thread
            try:
                self._socket.bind(self.address)
                break
            except zmq.ZMQError as exc:
                if exc.errno != zmq.EADDRINUSE or time.monotonic() > deadline:
                    self._socket.close(0)
                    raise TransportError(
                        f"cannot bind {self.address} (worker port {port} + zmq.port.offset "
                        f"{settings.zmq_port_offset}): {exc}"
                    ) from exc
                time.sleep(0.05)
        self._thread = threading.Thread(target=self._loop, name=f"zmq-receive-{port}", daemon=True)
        self._thread.start()

    def stats(self) -> BindingStats:
        return self.session.stats()

    def _loop(self) -> None:
        sock = self._socket
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        try:
            while not self._closed.is_set():
                if not poller.poll(100):
                    continue
                while True:
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK, copy=True)
                    except zmq.Again:
                        break
                    self._handle(sock, frames)
        except zmq.ZMQError as exc:
            if not self._closed.is_set():
                log.error("zmq receive on %s stopped: %s", self.address, exc)
        finally:
            sock.close(0)

    def _handle(self, sock: Any, frames: list[bytes]) -> None:
        session = self.session
        if len(frames) != 3:
            session.reject_frame(self._where, f"a message of {len(frames) - 1} frame(s), expected 2")
            return
        identity, header, packed = frames
        try:
            topology, sender, session_id, sequence, ack_requested, first_unacked, *rest = msgpack.unpackb(
                header, raw=False
            )
            if any(type(v) is not int for v in (sender, session_id, sequence, first_unacked)):
                raise ValueError("header fields are not integers")
            epoch = rest[0] if rest else ""
            auth = rest[1] if len(rest) > 1 else ""
            if len(rest) > 2 or type(epoch) is not str or type(auth) is not str:
                raise ValueError("the header's epoch and auth are not strings")
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            session.reject_frame(self._where, f"malformed header: {exc}")
            return
        wrong = session.wrong_topology(topology, sender)
        if wrong is not None:
            session.reject_batch(self._where, wrong)
            return
        if session.verifier is not None and not self._proven(identity, sender, auth):
            return
        if not session.member(sender, epoch):
            session.refuse("not_a_member", self._where, f"worker {sender} is not a worker of this mesh")
            return
        try:
            messages, broadcasts = unpack_batch(packed)
        except ValueError as exc:
            session.reject_batch(self._where, f"malformed batch {sequence} from worker {sender}: {exc}")
            return
        stream = self._streams.get(identity)
        if stream is None:
            stream = self._streams[identity] = StreamState()
        try:
            ack = session.receive(
                stream,
                sender,
                session_id,
                sequence,
                messages,
                len(packed),
                ack_requested,
                first_unacked,
                broadcasts,
                epoch,
            )
        except ReceiverStoppedError as exc:
            # not acknowledged (stopping, or another epoch): the sender keeps the batch and
            # resends it. Every batch delivered before it is: the sender would otherwise resend
            # those too, to whoever serves next (a draining worker's successor), counted twice.
            self._log.log("%s: %s (not acknowledged)", self._where, exc)
            done = session.delivered_ack(stream, sender, session_id)
            if done is not None:
                self._ack(sock, identity, done)
            return
        if ack is not None:
            self._ack(sock, identity, ack)

    def _proven(self, identity: bytes, sender: int, auth: str) -> bool:
        """``auth`` is ``sender``'s proof on this connection: the one it proved itself with while
        that is within the skew window, or a fresh one taken now (refused and counted otherwise).

        A connection's identity is the ROUTER's own, never sent, but a peer may claim one when it
        connects: a proof bound to a connection that closed stays good there only until its
        window ends (its sender makes a new one every half window)."""
        verifier = self.session.verifier
        assert verifier is not None
        bound = self._connection_proofs.get(identity)
        if (
            bound is not None
            and hmac.compare_digest(auth.encode(), bound[0].encode())
            and verifier.within_window(bound[1])
        ):
            return True
        try:
            verifier.verify(str(sender), auth)
        except ProofRefused as refused:
            self.session.refuse(refused.reason, self._where, f"a frame from worker {sender}: {refused}")
            return False
        self._connection_proofs.pop(identity, None)
        self._connection_proofs[identity] = (auth, int(auth.split(".")[1]))  # verified: well formed
        if len(self._connection_proofs) > PROVEN_CONNECTIONS:
            self._connection_proofs.popitem(last=False)
        return True

    def _ack(self, sock: Any, identity: bytes, ack: Ack) -> None:
        try:
            frame = _pack(
                [
                    ack.sequence,
                    ack.credit,
                    ack.unknown_tasks,
                    ack.duplicates,
                    ack.congested_tasks,
                    ack.gap,
                    ack.credit_bytes,
                ]
            )
            sock.send_multipart([identity, frame], zmq.NOBLOCK)
        except zmq.ZMQError as exc:
            # Peer gone or its queue full. Harmless: acks are cumulative, so the next one covers
            # this one, and a peer that hears nothing resends and is acknowledged again.
            self._ack_log.log("zmq ack to a peer of %s not sent: %s", self.address, exc)

    def admit(self, admission: Admission | None) -> None:
        self.session.admission = admission

    def refuse(self, reason: str, where: str, detail: str) -> None:
        self.session.refuse(reason, where, detail)

    def close(self) -> None:
        self.session.stopping = True
        self._closed.set()
        self._thread.join(5.0)


class ZmqConnection(WindowedConnection):
    """DEALER socket to one peer, owned by its own thread; ``send`` from one thread at a time."""

    def __init__(
        self,
        context: ZmqContext,
        topology_id: str,
        host: str,
        port: int,
        on_congestion: OnCongestion | None = None,
        receiver: int = -1,
        epoch: str = "",
        held: HeldBytes | None = None,
    ) -> None:
        settings = context.settings
        super().__init__(
            settings, topology_id, f"tcp://{host}:{port + settings.zmq_port_offset}", on_congestion, held
        )
        self.resend_after = settings.reconnect_max_wait_seconds
        self._epoch = epoch
        # the proof of the mesh secret every header carries (none without a secret), for the
        # connection of the moment: made again after a disconnect and every half skew window
        self.receiver = receiver
        self._secret = settings.mesh_secret
        self._proof_every = settings.mesh_max_skew_seconds / 2
        self._auth: list[str] = []
        self._auth_made = 0.0
        self._new_proof()
        self._closed = False
        self._offset = settings.zmq_port_offset
        self._retarget_to: str | None = None
        self._wake_r, self._wake_w = os.pipe()
        self._log = RateLimitedLog(log, settings.log_interval_seconds)
        self._socket = context.zmq.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.SNDHWM, settings.zmq_send_hwm_batches)
        self._socket.setsockopt(zmq.RCVHWM, settings.zmq_hwm_batches)
        self._socket.setsockopt(zmq.LINGER, settings.zmq_linger_millis)
        self._socket.setsockopt(zmq.RECONNECT_IVL, settings.reconnect_min_wait_millis)
        self._socket.setsockopt(zmq.RECONNECT_IVL_MAX, settings.reconnect_max_wait_millis)
        self._connection_lost = False  # a DISCONNECTED came since the last CONNECTED
        self._monitor = self._socket.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
        self._socket.connect(self.address)
        self._thread = threading.Thread(target=self._loop, name=f"zmq-send-{self.address}", daemon=True)
        self._thread.start()

    def _new_proof(self) -> None:
        if self._secret:
            self._auth = [mesh_auth(self._secret, self.topology_id, self.sender, self.receiver)]
            self._auth_made = time.monotonic()

    def _item(self, sequence: int, packed: bytes) -> bytes:
        return packed  # the header is built when sending: it carries the current oldest sequence

    def send(self, batch: list[TaskMessage]) -> None:
        super().send(batch)
        os.write(self._wake_w, b"\0")

    def _loop(self) -> None:
        sock = self._socket
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(self._monitor, zmq.POLLIN)
        poller.register(self._wake_r, zmq.POLLIN)
        position = 1
        blocked = False
        last_progress = time.monotonic()
        try:
            while not self._closed:
                events = dict(poller.poll(50))
                if self._wake_r in events:
                    os.read(self._wake_r, 65536)
                if self._secret and time.monotonic() - self._auth_made > self._proof_every:
                    self._new_proof()  # before the receiver's window ends for a fresh connection
                if self._retarget_to is not None:
                    self._new_proof()
                    sock.disconnect(self.address)
                    self.address, self._retarget_to = self._retarget_to, None
                    sock.connect(self.address)
                    position = self._rewind(position)  # resend what the old address never acknowledged
                    self.reconnects += 1
                if self._monitor in events:
                    position = self._on_monitor(position)
                if sock in events and events[sock] & zmq.POLLIN:
                    acked, gap = self._read_acks(sock)
                    if acked:
                        last_progress = time.monotonic()
                    if gap:  # the peer missed a batch: resend from the oldest unacknowledged
                        position = self._rewind(position)
                unacked = len(self.window)
                if unacked and time.monotonic() - last_progress > self.resend_after:
                    # no acknowledgement for a while: the peer may have restarted under us
                    position = self._rewind(position)
                    last_progress = time.monotonic()
                if not unacked:
                    last_progress = time.monotonic()
                position, now_blocked = self._send_ready(sock, position)
                if now_blocked != blocked:
                    poller.modify(sock, zmq.POLLIN | (zmq.POLLOUT if now_blocked else 0))
                    blocked = now_blocked
        except zmq.ZMQError as exc:
            if not self._closed:
                log.error("zmq connection to %s stopped: %s", self.address, exc)
        finally:
            self.state = "CLOSED"
            self._monitor.close(0)
            sock.close(0)

    def _on_monitor(self, position: int) -> int:
        from zmq.utils.monitor import recv_monitor_message

        while True:
            try:
                event = recv_monitor_message(self._monitor, zmq.NOBLOCK)
            except zmq.Again:
                return position
            if event["event"] == zmq.EVENT_CONNECTED:
                self.channel_state = self.state = "READY"
                if self._connection_lost:
                    # a reconnect: the old connection's pipe went with what it still held, so
                    # everything not acknowledged goes again, in order. The first connection
                    # carries what was queued before it (counting it, as once, was wrong when
                    # batches were queued before the monitor reported it: a loaded machine)
                    self._connection_lost = False
                    self.reconnects += 1
                    position = self._rewind(position)
            elif event["event"] == zmq.EVENT_DISCONNECTED:
                self.channel_state = self.state = "RECONNECTING"
                self._connection_lost = True
                self._new_proof()  # the next connection proves itself afresh

    def _rewind(self, position: int) -> int:
        position, again = self.window.rewind(position)
        self.resent_batches += again
        return position

    def _read_acks(self, sock: Any) -> tuple[bool, bool]:
        """(whether a batch was released, whether the peer reported a sequence gap)."""
        progressed = gap = False
        while True:
            try:
                frame = sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                return progressed, gap
            try:
                sequence, credit, unknown, _duplicates, *rest = msgpack.unpackb(frame, raw=False)
            except (ValueError, TypeError, msgpack.UnpackException):
                self._log.log("zmq: malformed acknowledgement from %s ignored", self.address)
                continue
            granted = rest[2] if len(rest) > 2 and isinstance(rest[2], int) else 0
            if self.window.ack(sequence, credit, granted):
                progressed = True
            gap = gap or (len(rest) > 1 and rest[1] is True)
            if self.on_congestion is not None:
                self.on_congestion(self, rest[0] if rest and isinstance(rest[0], list) else [])
            if unknown:
                self.unknown_tasks += len(unknown)
                self._log.log("peer %s does not own task(s) %s", self.address, sorted(set(unknown)))

    def _send_ready(self, sock: Any, position: int) -> tuple[int, bool]:
        """Send what is queued from ``position``; (new position, blocked on the high-water mark)."""
        while True:
            found = self.window.get(position)
            if found is None:
                return position, False
            position, packed = found
            ack_now = position + 1 >= self.window.next_seq
            oldest = self.window.oldest
            header = _pack(
                [
                    self.topology_id,
                    self.sender,
                    self.session,
                    position,
                    ack_now,
                    oldest,
                    self._epoch,
                    *self._auth,
                ]
            )
            try:
                sock.send_multipart([header, packed], zmq.NOBLOCK)
            except zmq.Again:
                return position, True  # high-water mark: the batch stays in the window
            self.sent_batches += 1
            position += 1

    def retarget(self, host: str, port: int) -> None:
        """The peer moved: connect to ``host:port`` (plus the offset), resending what is unacknowledged."""
        self.retargets += 1
        self._retarget_to = f"tcp://{host}:{port + self._offset}"
        os.write(self._wake_w, b"\0")

    def close(self) -> None:
        """Wait (up to messaging.close.timeout.secs) for every batch to be acknowledged, then close."""
        self._drain_window()
        self._closed = True
        os.write(self._wake_w, b"\0")
        self._thread.join(5.0)
        os.close(self._wake_r)
        os.close(self._wake_w)


class ZmqContext:
    """The zmq plugin: one zmq.Context (``zmq.threads`` I/O threads) per worker."""

    capabilities = Capabilities(reports_congestion=True)

    def __init__(self) -> None:
        self.settings: TransportSettings  # set by prepare, which comes first
        self.zmq: Any = None
        self._connections: list[ZmqConnection] = []
        self._bindings: list[ZmqBinding] = []
        self._lock = threading.Lock()

    def prepare(self, conf: Mapping[str, Any]) -> None:
        self.settings = TransportSettings.from_config(conf)
        self.zmq = zmq.Context(io_threads=self.settings.zmq_io_threads)

    def bind(
        self,
        topology_id: str,
        port: int,
        on_batch: OnBatch,
        congestion: CongestedTasks | None = None,
        grant: GrantedBytes | None = None,
        epoch: str = "",
    ) -> ZmqBinding:
        binding = ZmqBinding(self, topology_id, port, on_batch, congestion, grant, epoch)
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
    ) -> ZmqConnection:
        try:
            conn = ZmqConnection(self, topology_id, host, port, on_congestion, receiver, epoch, held)
        except zmq.ZMQError as exc:
            raise TransportError(f"cannot connect to {host}:{port}: {exc}") from exc
        with self._lock:
            self._connections.append(conn)
        return conn

    def term(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
            bindings, self._bindings = self._bindings, []
        for conn in connections:
            if conn.state != "CLOSED":
                conn.close()
        for binding in bindings:
            binding.close()
        if self.zmq is not None:
            self.zmq.term()
