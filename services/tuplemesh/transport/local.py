"""The ``local`` transport: in-process mailboxes (Storm's local mode), also the test double.

Each bound (topology, port) has a bounded mailbox of batches and a receive thread that hands
them to ``on_batch``; a sender blocks while the mailbox is full. Batches sent before anyone binds
wait (bounded) in the mailbox, like Storm's local context creating the queue on first send.
Payloads are passed by reference: nothing is copied or framed.

Per-task backpressure works as over the network: every ``send`` hands the sender the receiver's
congested tasks (what a Transfer acknowledgement carries), so producers hold before a slow task's
inbox fills, and the worker's receive path never blocks its receive thread on one full inbox.
Without that, workers that send to each other can close a cycle of waits: each one's transfer
thread blocked on the other's full mailbox, whose receive thread is blocked on a full inbox,
whose executor is blocked on the full transfer ring behind that transfer thread.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from tuplemesh.errors import ReceiverStoppedError, TransportError
from tuplemesh.serialization import tuples_in
from tuplemesh.transport.base import (
    Admission,
    Capabilities,
    CongestedTasks,
    GrantedBytes,
    HeldBytes,
    OnBatch,
    OnCongestion,
    TaskMessage,
    split_shutdown,
)
from tuplemesh.transport.stats import BindingStats, ConnectionStats

__all__ = ["LocalContext"]

log = logging.getLogger(__name__)


class _Mailbox:
    """Bounded FIFO of batches for one (topology, port). Thread-safe."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._batches: deque[list[TaskMessage]] = deque()
        self._cond = threading.Condition()
        self._closed = False

    def put(self, batch: list[TaskMessage], aborted: Callable[[], bool] = lambda: False) -> None:
        with self._cond:
            while len(self._batches) >= self.capacity and not self._closed and not aborted():
                self._cond.wait()
            if self._closed:
                raise TransportError("local transport terminated; batch not accepted")
            if aborted():
                raise TransportError("connection aborted; batch not accepted")
            self._batches.append(batch)
            self._cond.notify_all()

    def take(self, timeout: float | None = None) -> list[TaskMessage] | None:
        """Next batch, blocking; None once closed and empty; `_IDLE` after ``timeout`` seconds
        with nothing to take."""
        with self._cond:
            while not self._batches and not self._closed:
                if not self._cond.wait(timeout):
                    return _IDLE
            if not self._batches:
                return None
            batch = self._batches.popleft()
            self._cond.notify_all()
            return batch

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wake(self) -> None:
        """Wake blocked ``put`` calls (their ``aborted`` may have changed)."""
        with self._cond:
            self._cond.notify_all()

    def __len__(self) -> int:
        return len(self._batches)


#: Put in a mailbox by ``close`` to end its receive thread (a peer's notice is counted; this is not).
_CLOSE: list[TaskMessage] = []
#: What `_Mailbox.take` returns when its timeout passed with nothing to take.
_IDLE: list[TaskMessage] = []
#: Seconds between looks at the receiver's congested tasks while some are congested and nothing
#: arrives: senders holding on them hear the moment they clear, not when their lease runs out.
CLEAR_POLL = 0.001


class _LocalBinding:
    def __init__(
        self,
        context: LocalContext,
        key: tuple[str, int],
        mailbox: _Mailbox,
        on_batch: OnBatch,
        congestion: CongestedTasks | None,
    ):
        self._context = context
        self._key = key
        self._mailbox = mailbox
        self._on_batch = on_batch
        #: the receiver's congested tasks, told to every sender on every send and whenever they
        #: change (None: not asked)
        self.congestion = congestion
        #: the connections that sent here: id -> [connection, ear, the congested tasks as last
        #: told to it] (what a network receiver keeps per stream)
        self._senders: dict[int, list[Any]] = {}
        #: held while telling: what a sender was told and what it last heard never disagree
        self._tell_lock = threading.Lock()
        #: some sender was last told of congested tasks: look again every `CLEAR_POLL` seconds
        self._polling = False
        self._batches = 0
        self._tuples = 0
        self._shutdowns = 0
        self._refused: dict[str, int] = {}  # callers refused elsewhere (in-process batches never are)
        self._refused_lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._receive_loop, name=f"local-receive-{key[0]}-{key[1]}", daemon=True
        )
        self._thread.start()

    def tell(self, connection: Any, ear: OnCongestion) -> None:
        """Tell ``connection`` (through ``ear``) the congested tasks now, and whenever they change
        from now on (until `forget`). A sender calls it before each batch it puts in the mailbox,
        so the receive thread, once it took that batch, knows what the sender last heard."""
        if self.congestion is None:
            return
        with self._tell_lock:
            now = self.congestion()
            self._senders[id(connection)] = [connection, ear, now]
            ear(connection, now)
            if now:
                self._polling = True

    def forget(self, connection: Any) -> None:
        """Tell ``connection`` nothing more (it closed, or sends to another receiver now)."""
        with self._tell_lock:
            self._senders.pop(id(connection), None)

    def _tell_changes(self) -> None:
        """Tell each sender the congested tasks if they differ from what it last heard (a network
        receiver's acknowledgement on a change)."""
        if self.congestion is None:
            return
        try:
            with self._tell_lock:
                now = self.congestion()
                for entry in self._senders.values():
                    if entry[2] != now:
                        entry[2] = now
                        entry[1](entry[0], now)
                self._polling = bool(now)
        except Exception:  # the receive thread must outlive a faulty report: senders wait on it
            log.exception("receive %s: telling senders the congested tasks failed", self._key)

    def _receive_loop(self) -> None:
        while True:
            batch = self._mailbox.take(CLEAR_POLL if self._polling else None)
            if batch is _IDLE:  # nothing arrived: did the congested inboxes drain?
                self._tell_changes()
                continue
            if batch is None or batch is _CLOSE:
                return
            deliver, shutdown = split_shutdown(batch)
            if deliver:
                self._deliver(deliver)
                self._tell_changes()
            if shutdown:
                self._shutdowns += 1
                log.debug("receive %s: shutdown notice", self._key)
                return

    def _deliver(self, batch: list[TaskMessage]) -> None:
        try:
            self._on_batch(batch)
        except ReceiverStoppedError as exc:  # in-process: nobody to resend to; counted by the receiver
            log.warning("receive %s: %s", self._key, exc)
        except Exception:  # the receive thread must outlive a faulty callback
            log.exception("receive %s: on_batch failed for a batch of %d", self._key, len(batch))
        else:
            self._batches += 1
            self._tuples += tuples_in(batch)

    def stats(self) -> BindingStats:
        with self._refused_lock:
            refused = dict(self._refused)
        # Batches are passed by reference: looking for broadcasts would touch every tuple.
        return BindingStats(
            received_batches=self._batches,
            received_tuples=self._tuples,
            broadcast_messages=None,
            shutdown_messages=self._shutdowns,
            refused=refused,
        )

    def admit(self, admission: Admission | None) -> None:
        """In-process batches carry no sender: every batch is taken (a local mesh stops as one)."""

    def refuse(self, reason: str, where: str, detail: str) -> None:
        with self._refused_lock:
            self._refused[reason] = self._refused.get(reason, 0) + 1
        log.warning("%s: refused (%s): %s", where, reason, detail)

    def close(self) -> None:
        """Deliver what is already queued, then stop the receive thread."""
        if self._thread.is_alive():
            try:
                self._mailbox.put(_CLOSE)
            except TransportError:
                pass
            self._thread.join(timeout=30)
        self._context._unbind(self._key, self)


class _LocalConnection:
    def __init__(
        self, context: LocalContext, topology_id: str, port: int, on_congestion: OnCongestion | None
    ) -> None:
        self._context = context
        self._topology_id = topology_id
        self._port = port
        self._on_congestion = on_congestion
        self._heard_by: _LocalBinding | None = None  # the binding that tells it congestion
        self._listen_lock = threading.Lock()  # send, retarget (discovery) and close (any thread)
        self._mailbox = context._mailbox((topology_id, port))
        self._closed = False
        self._aborted = False
        self._batches = 0
        self._tuples = 0
        self._retargets = 0

    def send(self, batch: list[TaskMessage]) -> None:
        if self._closed:
            raise TransportError("send on a closed connection")
        if not batch:
            return
        if self._on_congestion is not None:
            # what an acknowledgement tells a network sender: the receiver's congested tasks (a
            # lease that this connection's next send, or a change, renews or clears). Before the
            # put: the receive thread tells what this batch's delivery changes.
            with self._listen_lock:
                binding = self._context._binding((self._topology_id, self._port))
                if binding is not self._heard_by:
                    self._listen(binding)
                if binding is not None:
                    binding.tell(self, self._on_congestion)
        self._mailbox.put(batch, lambda: self._aborted)
        self._batches += 1
        self._tuples += tuples_in(batch)

    def _listen(self, binding: _LocalBinding | None) -> None:
        """Hear ``binding`` from now on, and the previous one no more (under ``_listen_lock``)."""
        if self._heard_by is not None:
            self._heard_by.forget(self)
        self._heard_by = binding

    def retarget(self, host: str, port: int) -> None:
        """Send to the mailbox of ``port`` from now on (in-process: nothing is in flight)."""
        with self._listen_lock:
            self._listen(None)
            self._port = port
            self._mailbox = self._context._mailbox((self._topology_id, port))
        self._retargets += 1

    def stats(self) -> ConnectionStats:
        return ConnectionStats(
            address=f"local:{self._port}",
            state="CLOSED" if self._closed else "READY",
            sent_batches=self._batches,
            sent_tuples=self._tuples,
            retargets=self._retargets,
        )

    def abort(self) -> None:
        self._aborted = True
        self._mailbox.wake()

    def close(self) -> None:
        self._closed = True
        with self._listen_lock:
            self._listen(None)


class LocalContext:
    """In-process transport. Share one instance between all workers that talk to each other."""

    capabilities = Capabilities(in_process=True, reports_congestion=True)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._mailboxes: dict[tuple[str, int], _Mailbox] = {}
        self._bindings: dict[tuple[str, int], _LocalBinding] = {}
        self._capacity = 8
        self._terminated = False

    def prepare(self, conf: Mapping[str, Any]) -> None:
        self._capacity = int(conf.get("topology.receiver.buffer.size", 8))

    def _mailbox(self, key: tuple[str, int]) -> _Mailbox:
        with self._lock:
            if self._terminated:
                raise TransportError("local transport was terminated")
            box = self._mailboxes.get(key)
            if box is None:
                box = self._mailboxes[key] = _Mailbox(self._capacity)
            return box

    def bind(
        self,
        topology_id: str,
        port: int,
        on_batch: OnBatch,
        congestion: CongestedTasks | None = None,
        grant: GrantedBytes | None = None,
        epoch: str = "",
    ) -> _LocalBinding:
        """``congestion`` is told to every sender on every send. ``grant`` is not asked: nothing
        is in flight between a send and the mailbox. ``epoch`` is not checked: the workers of one
        process share one plan."""
        key = (topology_id, port)
        mailbox = self._mailbox(key)
        with self._lock:
            if key in self._bindings:
                raise TransportError(f"port {port} is already bound for topology {topology_id!r}")
            binding = _LocalBinding(self, key, mailbox, on_batch, congestion)
            self._bindings[key] = binding
        return binding

    def _binding(self, key: tuple[str, int]) -> _LocalBinding | None:
        return self._bindings.get(key)  # a dict read: atomic, no lock on the send path

    def _unbind(self, key: tuple[str, int], binding: _LocalBinding) -> None:
        with self._lock:
            if self._bindings.get(key) is binding:
                del self._bindings[key]

    def connect(
        self,
        topology_id: str,
        host: str,
        port: int,
        on_congestion: OnCongestion | None = None,
        receiver: int = -1,
        epoch: str = "",
        held: HeldBytes | None = None,
    ) -> _LocalConnection:
        """``on_congestion`` hears the receiver's congested tasks on every send. ``held`` is not
        used: a batch is in the receiver's mailbox once ``send`` returns."""
        return _LocalConnection(self, topology_id, port, on_congestion)

    def pending(self, topology_id: str, port: int) -> int:
        """Batches waiting in the mailbox of (topology, port); for status and tests."""
        box = self._mailboxes.get((topology_id, port))
        return 0 if box is None else len(box)

    def term(self) -> None:
        with self._lock:
            self._terminated = True
            bindings = list(self._bindings.values())
        for binding in bindings:
            binding.close()
        for box in self._mailboxes.values():
            box.close()
