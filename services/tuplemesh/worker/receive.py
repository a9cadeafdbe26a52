"""The receive path: batches from the transport, grouped by executor, into executor inboxes.

Runs on the transport's receive thread. It does as little per tuple as possible: one dict
lookup and one append; payloads stay serialized until the executor thread decodes them.
A message with no task is a broadcast: it goes into every executor's inbox, in arrival order
with the other messages (as Storm's worker publishes its BROADCAST_DEST to every executor
queue); the executor runs it for each of its tasks.

A full inbox does not block the receive thread, because that would stall every task fed by the
same stream (head-of-line blocking): the batch waits in that inbox's overflow instead, in
arrival order, and moves in as the executor frees slots. Per-task backpressure
(``tuplemesh.worker.congestion``) stops the senders feeding that task long before the overflow
grows; the overflow is still bounded (``overflow_limit`` batches per inbox, then the receive
thread does block, as it did before).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from tuplemesh import tracing
from tuplemesh.disruptor import RingBuffer
from tuplemesh.errors import AlertError, InsufficientCapacityError, ReceiverStoppedError
from tuplemesh.logutil import RateLimitedLog
from tuplemesh.transport.base import SHUTDOWN_TASK, TaskMessage
from tuplemesh.worker.markers import Batch

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
        self._lock = threading.Lock()  # guards the counters when several receive threads run
        self.received = 0
        self.unknown = 0  # messages for tasks this worker does not own (or broadcasts with no inbox)
        self.undeliverable = 0  # messages refused because their inbox was halted (worker stopping)
        self.shutdown_notice = threading.Event()
        self._unknown_log = RateLimitedLog(log, log_interval)
        self.tracer = tracing.tracer()  # OpenTelemetry; None: not tracing

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
        halted = 0
        now = time.monotonic()
        span: Any = None
        traced: Any = None
        if self.tracer is not None:  # a child of the sender's transfer span, when it sent one
            span = self.tracer.start_span(tracing.RECEIVE, attributes={"tuplemesh.tuples": len(batch)})
            traced = tracing.context_of(span)
        for ring, messages in groups.values():
            messages.stamp = now
            if span is not None:
                messages.trace = traced
            try:
                if self.overflow_limit:
                    self._put_or_overflow(ring, messages)
                else:
                    ring.put(messages)
            except AlertError:  # the executor was halted: this worker is stopping
                halted += len(messages)
        if span is not None:
            span.end()
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
                        ring.try_put(messages)
                        return
                    except InsufficientCapacityError:
                        self._overflow[key] = (ring, deque([messages]))
                        return
                queue = waiting[1]
                try:  # the executor may have freed slots since: move the oldest in first
                    while queue:
                        ring.try_put(queue[0])
                        queue.popleft()
                    ring.try_put(messages)
                    del self._overflow[key]
                    return
                except InsufficientCapacityError:
                    pass
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
                        ring.try_put(waiting[0])
                        waiting.popleft()
                except InsufficientCapacityError:
                    pass
                except AlertError:  # halted: the worker is stopping; counted as undeliverable
                    self.undeliverable += sum(len(b) for b in waiting)
                    waiting.clear()
                if waiting:
                    left += len(waiting)
                else:
                    del self._overflow[key]
        return left

    @property
    def overflowing(self) -> int:
        """Batches waiting for a full inbox (a snapshot)."""
        return sum(len(w) for _, w in list(self._overflow.values()))
