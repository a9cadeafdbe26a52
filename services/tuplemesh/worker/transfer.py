"""The transfer path: the worker's transfer ring drained by one thread into per-peer connections.

Executors publish ``(worker, [(task, payload), ...], nbytes[, trace])``; the transfer thread merges
batches bound for the same worker until ``topology.transfer.batch.size`` tuples or the end of what
is available, then hands them to that worker's Connection (which blocks while the peer's window is
full) and gives their ``nbytes`` back to the worker's `ByteBudget` chunk by chunk: the
connection's send window holds each chunk's bytes there instead until the peer acknowledges it.
Every tuple that does not reach a connection is counted in `TransferStats`: refused by the
transport (``lost_tuples``) or left in the ring when the transfer thread was halted
(``stranded_tuples``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from tuplemesh.buckets import BATCH_SIZE_BUCKETS, make_buckets
from tuplemesh.core.budget import ByteBudget
from tuplemesh.core.feature import HopTracer
from tuplemesh.core.markers import STOP
from tuplemesh.disruptor import BatchEventProcessor, RingBuffer
from tuplemesh.errors import AlertError, InsufficientCapacityError, TransportError
from tuplemesh.logutil import RateLimitedLog
from tuplemesh.serialization import tuples_in
from tuplemesh.transport.base import Connection, Context, OnCongestion, TaskMessage
from tuplemesh.worker.debloat import QueueTimeLimit

__all__ = ["TransferPath", "TransferStats"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TransferStats:
    """What the transfer path has counted (totals since the worker started)."""

    #: Batches and tuples handed to connections.
    sent_batches: int = 0
    sent_tuples: int = 0
    #: Tuples and batches handed to each peer's connection.
    sent_tuples_to: dict[int, int] = field(default_factory=dict)
    sent_batches_to: dict[int, int] = field(default_factory=dict)
    #: Tuples a connection refused (closed, or no connection): lost, counted and logged.
    lost_tuples: int = 0
    #: Tuples still in the transfer ring, or merged and not yet sent, when the transfer thread
    #: was halted (a peer that never acknowledged): lost, counted and logged.
    stranded_tuples: int = 0
    #: Peers that moved and were followed to their new address.
    retargets: int = 0


class TransferPath:
    """Owns the connections to peers and the thread that feeds them."""

    def __init__(
        self,
        ring: RingBuffer[Any],
        context: Context,
        topology_id: str,
        peers: Mapping[int, tuple[str, int]],
        expected: set[int],
        batch_size: int,
        log_interval: float,
        metrics_enabled: bool = True,
        budget: ByteBudget | None = None,
        queue_target_seconds: float = 0.0,
        epoch: str = "",
        on_congestion: OnCongestion | None = None,
        tracer: HopTracer | None = None,
    ) -> None:
        self.ring = ring
        self.context = context
        self.topology_id = topology_id
        self.epoch = epoch  # the assignment epoch every connection names on its streams
        self.peers = dict(peers)
        self.expected = expected  # the other workers of the assignment
        self.batch_size = batch_size
        self.connections: dict[int, Connection] = {}
        self.retargets = 0
        self._peers_cond = threading.Condition()
        self._stopping = False
        self._pending: dict[int, list[TaskMessage]] = {}
        #: the bytes executors took from ``budget`` for what is pending, per peer
        self.budget = budget if budget is not None else ByteBudget(0)
        self._pending_bytes: dict[int, int] = {}
        #: the transfer spans (a tracing feature's; None: not tracing) and, per peer, the emit
        #: spans of the pending batches
        self.tracer = tracer
        self._traces: dict[int, list[Any]] = {}
        self.sent_batches = 0
        self.sent_messages = 0
        self.sent_to: dict[int, int] = {}  # tuples per peer
        self.batches_to: dict[int, int] = {}
        self.batch_sizes = make_buckets(BATCH_SIZE_BUCKETS, metrics_enabled)
        self.lost_messages = 0  # a transport refused a batch: counted, logged, reported
        self.stranded_messages = 0  # left behind by a halt: counted when the thread ends
        self._error_log = RateLimitedLog(log, log_interval)
        self.processor = BatchEventProcessor(ring, ring.new_barrier(), self, release_slots=True)
        ring.add_gating_sequences(self.processor.sequence)
        #: bounds in time what waits in the ring (None: all its slots may fill)
        self.queue_limit = (
            QueueTimeLimit(ring.sequencer, queue_target_seconds) if queue_target_seconds > 0 else None
        )
        #: Given to every connection that reports congested tasks.
        self.on_congestion = on_congestion

    def stats(self) -> TransferStats:
        """A snapshot of the counters. Any thread."""
        return TransferStats(
            sent_batches=self.sent_batches,
            sent_tuples=self.sent_messages,
            sent_tuples_to=dict(self.sent_to),
            sent_batches_to=dict(self.batches_to),
            lost_tuples=self.lost_messages,
            stranded_tuples=self.stranded_messages,
            retargets=self.retargets,
        )

    def start(self) -> None:
        peers, self.peers = self.peers, {}
        self.update_peers(peers)
        self.processor.start(name="transfer")

    def update_peers(self, peers: Mapping[int, tuple[str, int]]) -> None:
        """Refresh connections (seed 003's refresh-connections). Any thread.

        A new peer is connected; a peer at a new address is retargeted, keeping its window, so
        batches buffered for a restarting peer go to its new address; a peer that vanished keeps
        its connection (and its bounded window) until it comes back.
        """
        with self._peers_cond:
            for worker, address in sorted(peers.items()):
                if worker not in self.expected:
                    continue
                conn = self.connections.get(worker)
                if conn is None:
                    self.connections[worker] = self._connect(worker, address)
                elif self.peers.get(worker) != address:
                    log.info("worker %d moved from %s to %s", worker, self.peers.get(worker), address)
                    conn.retarget(*address)
                    self.retargets += 1
                self.peers[worker] = address
            self._peers_cond.notify_all()

    def _connect(self, worker: int, address: tuple[str, int]) -> Connection:
        # per-task backpressure reports from acks (plugins that report congestion); the worker
        # index: a mesh secret's proofs are made for one receiver; the budget: what the peer has
        # not acknowledged yet is still the worker's to hold
        return self.context.connect(
            self.topology_id, *address, self.on_congestion, worker, self.epoch, held=self.budget
        )

    def _connection(self, worker: int) -> Connection | None:
        """The connection to ``worker``, waiting (backpressure) until discovery has found it."""
        with self._peers_cond:
            while worker not in self.connections and not self._stopping:
                self._peers_cond.wait(0.5)
            return self.connections.get(worker)

    def request_stop(self, timeout: float = 5.0) -> bool:
        """Send everything already queued, then stop. False when the queue stayed full for
        ``timeout`` (a peer that never acknowledges, e.g. one draining too): the caller halts."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.ring.try_put(STOP)
                return True
            except AlertError:
                return True  # already halted
            except InsufficientCapacityError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.01)

    def join(self, timeout: float | None = None) -> bool:
        return self.processor.join(timeout)

    def halt(self) -> None:
        """Stop now: the transfer thread ends even when it is parked in a full send window (the
        connections give up on their peers; what they held is counted when they close)."""
        with self._peers_cond:
            self._stopping = True
            self._peers_cond.notify_all()
        self.processor.halt()
        self.budget.close()  # executors waiting for room must see their ring halted instead
        for conn in list(self.connections.values()):
            conn.abort()

    def close_connections(self) -> None:
        """Close every connection at once: each waits up to messaging.close.timeout.secs for its
        peer's acknowledgements, so closing them one after another would add those waits up."""
        closers = [
            threading.Thread(target=self._close, args=(conn,), name=f"close-{worker}", daemon=True)
            for worker, conn in self.connections.items()
        ]
        for closer in closers:
            closer.start()
        for closer in closers:
            closer.join()

    @staticmethod
    def _close(conn: Connection) -> None:
        try:
            conn.close()
        except TransportError as exc:
            log.warning("closing connection failed: %s", exc)

    @property
    def pending(self) -> int:
        """Messages merged but not yet handed to a connection (transfer thread's view)."""
        return sum(len(p) for p in self._pending.values())

    # -- EventHandler ---------------------------------------------------------------------------
    def on_shutdown(self) -> None:
        """The transfer thread ends: count what a halt left in the ring and in the merge buffers."""
        stranded = self.pending
        self._pending.clear()
        low = self.processor.sequence.value + 1
        high = self.ring.sequencer.highest_published(low, self.ring.cursor)
        for sequence in range(low, high + 1):
            item = self.ring.get(sequence)
            if item.__class__ is tuple:
                stranded += tuples_in(item[1])
        if stranded:
            self.stranded_messages += stranded
            log.warning("transfer thread halted with %d tuple(s) not sent (lost)", stranded)

    def on_event(self, item: Any, sequence: int, end_of_batch: bool) -> None:
        if self.queue_limit is None:
            self._on_event(item, end_of_batch)
            return
        started = time.monotonic()
        self._on_event(item, end_of_batch)
        self.queue_limit.observe(time.monotonic() - started)

    def _on_event(self, item: Any, end_of_batch: bool) -> None:
        if item.__class__ is tuple:
            worker, messages = item[0], item[1]
            if item[2]:
                self._pending_bytes[worker] = self._pending_bytes.get(worker, 0) + item[2]
            if len(item) == 4:  # traced: the emit span's context
                self._traces.setdefault(worker, []).append(item[3])
            pending = self._pending.get(worker)
            if pending is None:
                self._pending[worker] = pending = messages
            else:
                pending.extend(messages)
            if len(pending) >= self.batch_size:
                self._send(worker)
        elif item is STOP:
            try:
                self._send_all()
            finally:
                self.processor.halt()  # the thread ends, whatever the last sends did
            return
        if end_of_batch:
            self._send_all()

    def _send_all(self) -> None:
        for worker in list(self._pending):
            self._send(worker)

    def _send(self, worker: int) -> None:
        messages = self._pending.pop(worker, None)
        if not messages:
            return
        try:
            self._send_traced(worker, messages)
        finally:  # what a failed or halted send left unreleased (counted lost)
            if self._pending_bytes:
                self.budget.release(self._pending_bytes.pop(worker, 0))

    def _handed_over(self, worker: int, count: int, left: int) -> None:
        """``count`` of the ``left`` messages still pending for ``worker`` are in its connection's
        window, which holds their bytes now: give back their share of what the executors took
        (all of it with the last chunk), so a chunk waiting for room in the window is not
        counted twice, in the merge buffer and in the window."""
        if not self._pending_bytes:
            return
        held = self._pending_bytes.get(worker, 0)
        share = held if count >= left else held * count // left
        if share:
            self._pending_bytes[worker] = held - share
            self.budget.release(share)

    def _send_traced(self, worker: int, messages: list[Any]) -> None:
        traces = self._traces.pop(worker, None) if self._traces else None
        if traces is None or self.tracer is None:
            self._send_messages(worker, messages)
            return
        # a span is never worth a batch: one that fails to start or end is logged, the batch sent
        span = ExitStack()
        try:
            span.enter_context(self.tracer.transfer(worker, len(messages), traces))
        except Exception as exc:
            self._error_log.log("a transfer span to worker %d failed (batch sent untraced): %r", worker, exc)
        try:
            self._send_messages(worker, messages)  # the connection puts the span on the wire
        finally:
            try:
                span.close()
            except Exception as exc:
                self._error_log.log("ending a transfer span to worker %d failed: %r", worker, exc)

    def _send_messages(self, worker: int, messages: list[Any]) -> None:
        conn = self.connections.get(worker) or self._connection(worker)
        size = self.batch_size
        for start in range(0, len(messages), size):
            chunk = messages[start : start + size] if len(messages) > size else messages
            try:
                if conn is None:
                    raise TransportError(f"no connection to worker {worker}")
                tuples = tuples_in(chunk)  # a rows payload carries many
                conn.send(chunk)
                self._handed_over(worker, len(chunk), len(messages) - start)
                self.sent_batches += 1
                self.sent_messages += tuples
                self.sent_to[worker] = self.sent_to.get(worker, 0) + tuples
                self.batches_to[worker] = self.batches_to.get(worker, 0) + 1
                self.batch_sizes.observe(tuples)
            except TransportError as exc:
                self.lost_messages += tuples
                self._error_log.log(
                    "transfer to worker %d failed, %d tuple(s) lost (%d total): %s",
                    worker,
                    tuples,
                    self.lost_messages,
                    exc,
                )
