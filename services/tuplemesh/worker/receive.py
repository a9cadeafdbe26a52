"""The receive path: batches from the transport, grouped by executor, into executor inboxes.

Runs on the transport's receive thread. It does as little per tuple as possible: one dict
lookup and one append; payloads stay serialized until the executor thread decodes them.
A message with no task is a broadcast: it goes into every executor's inbox, in arrival order
with the other messages (as Storm's worker publishes its BROADCAST_DEST to every executor
queue); the executor runs it for each of its tasks.

A full inbox does not block the receive thread, because that would stall every task fed by the
same stream (head-of-line blocking): the batch waits in that inbox's overflow instead, in
arrival order, and moves in as the executor frees slots. Per-task backpressure
(``tuplemesh.core.congestion``) stops the senders feeding that task long before the overflow
grows; the overflow is still bounded (``overflow_limit`` batches per inbox, then the receive
thread does block, as it did before).

Slots do not bound memory: one slot may hold a batch of a few bytes or of 16 MiB. So the bytes
of the payloads received and not yet taken by an executor (in inboxes and overflows, all inboxes
together) are held under one ceiling per worker, ``max_held_bytes``: a batch that would go past
it waits on the receive thread until executors have taken enough (the transport then stops
reading, and its own flow control holds the sender). Nothing is dropped. A batch is always
admitted when nothing is held, so a batch larger than the ceiling still goes through, alone.
The executors' progress is read from their inboxes' consumer sequences: nothing is added to
the executor's loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tuplemesh.core.feature import HopTracer
from tuplemesh.core.markers import Batch
from tuplemesh.disruptor import RingBuffer
from tuplemesh.errors import AlertError, InsufficientCapacityError, ReceiverStoppedError
from tuplemesh.logutil import RateLimitedLog
from tuplemesh.transport.base import SHUTDOWN_TASK, TaskMessage

__all__ = ["ReceivePath"]

log = logging.getLogger(__name__)


class ReceivePath:
    """``on_batch`` callback of a worker's binding. Thread-safe for one receive thread per peer."""

    def __init__(
        self,
        worker_index: int,
        inbox_of_task: Mapping[int, RingBuffer[Any]],
        log_interval: float,
        overflow_limit: int = 0,
        max_held_bytes: int = 0,
        on_overflow: Callable[[], None] = lambda: None,
        tracer: HopTracer | None = None,
    ):
        self.worker_index = worker_index
        # keyed by int | None: a broadcast (task None) looks up like any task, and misses
        self._inbox_of_task: dict[int | None, RingBuffer[Any]] = {t: r for t, r in inbox_of_task.items()}
        # every inbox once, for broadcasts (several tasks of one executor share an inbox)
        self._inboxes = list({id(ring): ring for ring in inbox_of_task.values()}.values())
        # ring id -> (ring, batches waiting for it); 0 disables the overflow (blocking puts)
        self.overflow_limit = overflow_limit
        self._overflow: dict[int, tuple[RingBuffer[Any], deque[Batch]]] = {}
        self._overflow_lock = threading.Lock()
        #: called when an inbox's overflow starts (the worker's flush timer moves it in)
        self.on_overflow = on_overflow
        self._lock = threading.Lock()  # guards the counters when several receive threads run
        self.received = 0
        self.unknown = 0  # messages for tasks this worker does not own (or broadcasts with no inbox)
        self.undeliverable = 0  # messages refused because their inbox was halted (worker stopping)
        self.shutdown_notice = threading.Event()
        self._unknown_log = RateLimitedLog(log, log_interval)
        #: the receive spans (a tracing feature's); None: not tracing
        self.tracer = tracer
        self._trace_log = RateLimitedLog(log, log_interval)
        #: the ceiling on payload bytes received and not yet taken by an executor; 0: no ceiling
        self.max_held_bytes = max_held_bytes
        self.held_bytes = 0
        # ring id -> (ring, (sequence, bytes) of each batch published into it, not yet taken)
        self._published: dict[int, tuple[RingBuffer[Any], deque[tuple[int, int]]]] = {}
        self._held_lock = threading.Lock()
        #: batches that waited for the ceiling, and how long they waited in all
        self.ceiling_waits = 0
        self.ceiling_wait_seconds = 0.0

    def on_batch(self, batch: list[TaskMessage]) -> list[int]:
        """Publish ``batch`` into executor inboxes; returns the task ids this worker does not own.

        Raises ReceiverStoppedError when an inbox is halted (the worker is stopping).
        """
        inbox_of_task = self._inbox_of_task
        groups: dict[int, tuple[RingBuffer[Any], Batch]] = {}
        rejected: list[int] = []
        stray = 0  # broadcasts with no inbox to go to
        for message in batch:
            task = message[0]
            ring = inbox_of_task.get(task)
            if ring is None:
                if task is None:
                    stray += self._broadcast(message, groups)
                elif task == SHUTDOWN_TASK:
                    self.shutdown_notice.set()
                else:
                    rejected.append(task)
                continue
            group = groups.get(id(ring))
            if group is None:
                groups[id(ring)] = (ring, Batch((message,)))
            else:
                group[1].append(message)
        end_span: Callable[[], None] | None = None
        traced: Any = None
        if self.tracer is not None:  # a child of the sender's transfer span, when it sent one
            traced, end_span = self._start_span(len(batch))
        ceiling = self.max_held_bytes
        if ceiling:
            admitted = 0
            for _, messages in groups.values():
                messages.nbytes = sum([len(m[1]) for m in messages])
                admitted += messages.nbytes
            self._admit(admitted)
        halted = 0
        now = time.monotonic()
        try:
            for ring, messages in groups.values():
                messages.stamp = now
                if end_span is not None:
                    messages.trace = traced
                try:
                    if self.overflow_limit:
                        self._put_or_overflow(ring, messages)
                    elif ceiling:
                        self._held_in(ring, ring.put(messages), messages.nbytes)
                    else:
                        ring.put(messages)
                except AlertError:  # the executor was halted: this worker is stopping
                    halted += len(messages)
                    if ceiling:
                        self._release(messages.nbytes)
        finally:
            if end_span is not None:
                self._end_span(end_span)
        with self._lock:
            self.received += len(batch)
            self.unknown += len(rejected) + stray
            self.undeliverable += halted
        if rejected or stray:
            self._unknown_log.log(
                "worker %d: %d message(s) for tasks it does not own, e.g. %s (%d in total)",
                self.worker_index,
                len(rejected) + stray,
                f"task {rejected[0]}" if rejected else "a broadcast (no executor here)",
                self.unknown,
            )
        if halted:
            # Not acknowledged: the sender keeps the batch and resends it to whoever serves next.
            raise ReceiverStoppedError(
                f"worker {self.worker_index} is stopping; {halted} message(s) not accepted"
            )
        return rejected

    def _broadcast(self, message: TaskMessage, groups: dict[int, tuple[RingBuffer[Any], Batch]]) -> int:
        """Add a no-task ``message`` to every inbox's group; 1 when there is no inbox, else 0."""
        for ring in self._inboxes:
            group = groups.get(id(ring))
            if group is None:
                groups[id(ring)] = (ring, Batch((message,)))
            else:
                group[1].append(message)
        return 0 if self._inboxes else 1

    def _put_or_overflow(self, ring: RingBuffer[Any], messages: Batch) -> None:
        key = id(ring)
        while True:
            with self._overflow_lock:
                waiting = self._overflow.get(key)
                if waiting is None:
                    try:
                        self._taken_in(ring, ring.try_put(messages), messages)
                        return
                    except InsufficientCapacityError:
                        self._overflow[key] = (ring, deque([messages]))
                        self.on_overflow()  # the flush timer moves it in once there is room
                        return
                queue = waiting[1]
                try:  # the executor may have freed slots since: move the oldest in first
                    while queue:
                        self._taken_in(ring, ring.try_put(queue[0]), queue[0])
                        queue.popleft()
                    self._taken_in(ring, ring.try_put(messages), messages)
                    del self._overflow[key]
                    return
                except InsufficientCapacityError:
                    pass
                # in slots, not the inbox's queue-time limit: the overflow takes what peers had in
                # flight when the inbox's tasks became congested (they hold back from then on),
                # and a receive thread blocked on it could close a cycle of waits between workers
                if len(queue) < self.overflow_limit:
                    queue.append(messages)  # behind what already waits: order is kept
                    return
            # the overflow is full too: block this receive thread (bounded memory wins)
            self.move_overflow()
            time.sleep(0.001)

    def move_overflow(self) -> int:
        """Move waiting batches into inboxes with free slots, oldest first; returns batches left.
        Called by the worker's flush timer and by receive threads. Any thread."""
        if not self._overflow:
            return 0
        left = 0
        with self._overflow_lock:
            for key, (ring, waiting) in list(self._overflow.items()):
                try:
                    while waiting:
                        self._taken_in(ring, ring.try_put(waiting[0]), waiting[0])
                        waiting.popleft()
                except InsufficientCapacityError:
                    pass
                except AlertError:  # halted: the worker is stopping; counted as undeliverable
                    self._undeliverable(waiting)
                    waiting.clear()
                if waiting:
                    left += len(waiting)
                else:
                    del self._overflow[key]
        return left

    def abandon_overflow(self) -> int:
        """Count what still waits in the overflow as undeliverable and let it go: the worker
        stopped, its binding is closed and no executor takes anything more (the sender was told
        it arrived, so this is a loss, counted like a halted inbox's). Returns the messages."""
        with self._overflow_lock:
            waiting = [batch for _, queue in self._overflow.values() for batch in queue]
            self._overflow.clear()
        lost = self._undeliverable(waiting)
        if lost:
            log.warning(
                "worker %d: %d message(s) left waiting for full inboxes at stop", self.worker_index, lost
            )
        return lost

    def _undeliverable(self, batches: Iterable[Batch]) -> int:
        """Count the messages of ``batches``, which no executor will take, as undeliverable, and
        give their bytes back to the ceiling; returns the messages."""
        batches = list(batches)
        lost = sum(len(batch) for batch in batches)
        with self._lock:
            self.undeliverable += lost
        if self.max_held_bytes:
            self._release(sum(batch.nbytes for batch in batches))
        return lost

    # -- the ceiling on bytes held -----------------------------------------------------------------
    def _taken_in(self, ring: RingBuffer[Any], sequence: int, messages: Batch) -> None:
        """``messages`` went into ``ring`` at ``sequence``: its bytes are held until taken from there."""
        if self.max_held_bytes:
            self._held_in(ring, sequence, messages.nbytes)

    def _held_in(self, ring: RingBuffer[Any], sequence: int, nbytes: int) -> None:
        with self._held_lock:
            published = self._published.get(id(ring))
            if published is None:
                self._published[id(ring)] = (ring, deque([(sequence, nbytes)]))
            else:
                published[1].append((sequence, nbytes))

    def _release(self, nbytes: int) -> None:
        with self._held_lock:
            self.held_bytes -= nbytes

    def reclaim(self) -> int:
        """Release the bytes of every batch an executor has taken from its inbox; returns the bytes
        still held (inboxes and overflows). Any thread."""
        with self._held_lock:
            for key, (ring, published) in list(self._published.items()):
                taken = ring.sequencer.minimum_gating_sequence()
                while published and published[0][0] <= taken:
                    self.held_bytes -= published.popleft()[1]
                if not published:
                    del self._published[key]
            return self.held_bytes

    def _start_span(self, tuples: int) -> tuple[Any, Callable[[], None] | None]:
        """The receive span of one batch: (the context its executors' spans take as parent, its
        end); untraced, and logged, when the tracer fails: a span is never worth a batch."""
        assert self.tracer is not None
        try:
            traced, end = self.tracer.receive(tuples)
        except Exception as exc:
            self._trace_log.log(
                "worker %d: a receive span failed (batch untraced): %r", self.worker_index, exc
            )
            return None, None
        return traced, end

    def _end_span(self, end: Callable[[], None]) -> None:
        try:
            end()
        except Exception as exc:
            self._trace_log.log("worker %d: ending a receive span failed: %r", self.worker_index, exc)

    def granted_bytes(self, senders: int) -> int:
        """The bytes each of ``senders`` peers may have in flight to this worker now (its ack's
        ``credit_bytes``): an equal share of the room left under the ceiling, so what they send
        meanwhile fits it and the receive thread seldom waits on it (that wait holds every task
        fed by the stream). At least 1: a sender always has one batch in flight. 0 without a
        ceiling: no grant."""
        ceiling = self.max_held_bytes
        if not ceiling:
            return 0
        return max(1, (ceiling - self.reclaim()) // max(1, senders))

    def _admit(self, nbytes: int) -> None:
        """Hold ``nbytes`` more, first waiting while that would pass the ceiling (backpressure: the
        transport stops reading meanwhile). Nothing held admits any batch: no size can stall."""
        ceiling = self.max_held_bytes
        started = 0.0
        while True:
            held = self.reclaim()
            if held == 0 or held + nbytes <= ceiling or self._halted():
                break
            if not started:
                started = time.monotonic()
            self.move_overflow()
            time.sleep(0.001)  # deliberate: executors free bytes by taking batches; poll for that
        with self._held_lock:
            self.held_bytes += nbytes
            if started:
                self.ceiling_waits += 1
                self.ceiling_wait_seconds += time.monotonic() - started

    def _halted(self) -> bool:
        """An inbox holding bytes was halted (the worker is stopping): waiting could last forever;
        the publish that follows is refused and the sender keeps the batch."""
        return any(ring.sequencer.alerted for ring, _ in list(self._published.values()))

    @property
    def overflowing(self) -> int:
        """Batches waiting for a full inbox (a snapshot)."""
        return sum(len(w) for _, w in list(self._overflow.values()))
