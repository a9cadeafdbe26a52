"""The receive path: batches from the transport, grouped by executor, into executor inboxes.

Runs on the transport's receive thread. It does as little per tuple as possible: one dict
lookup and one append; payloads stay serialized until the executor thread decodes them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from tuplemesh.disruptor import RingBuffer
from tuplemesh.errors import AlertError, ReceiverStoppedError
from tuplemesh.logutil import RateLimitedLog
from tuplemesh.transport.base import SHUTDOWN_TASK, TaskMessage
from tuplemesh.worker.markers import Batch

__all__ = ["ReceivePath"]

log = logging.getLogger(__name__)


class ReceivePath:
    """``on_batch`` callback of a worker's binding. Thread-safe for one receive thread per peer."""

    def __init__(self, worker_index: int, inbox_of_task: Mapping[int, RingBuffer[Any]], log_interval: float):
        self.worker_index = worker_index
        self._inbox_of_task = dict(inbox_of_task)
        self._lock = threading.Lock()  # guards the counters when several receive threads run
        self.received = 0
        self.unknown = 0  # messages for tasks this worker does not own
        self.undeliverable = 0  # messages refused because their inbox was halted (worker stopping)
        self.shutdown_notice = threading.Event()
        self.refusing = False  # set when draining: batches are refused, not acknowledged
        self._unknown_log = RateLimitedLog(log, log_interval)

    def on_batch(self, batch: list[TaskMessage]) -> list[int]:
        """Publish ``batch`` into executor inboxes; returns the task ids this worker does not own.

        Raises ReceiverStoppedError when an inbox is halted (the worker is stopping).
        """
        if self.refusing:
            raise ReceiverStoppedError(f"worker {self.worker_index} is draining; batch not accepted")
        inbox_of_task = self._inbox_of_task
        groups: dict[int, tuple[RingBuffer[Any], Batch]] = {}
        rejected: list[int] = []
        for message in batch:
            task = message[0]
            ring = inbox_of_task.get(task)
            if ring is None:
                if task == SHUTDOWN_TASK:
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
        for ring, messages in groups.values():
            messages.stamp = now  # type: ignore[attr-defined]
            try:
                ring.put(messages)
            except AlertError:  # the executor was halted: this worker is stopping
                halted += len(messages)
        with self._lock:
            self.received += len(batch)
            self.unknown += len(rejected)
            self.undeliverable += halted
        if rejected:
            self._unknown_log.log(
                "worker %d: %d message(s) for tasks it does not own, e.g. task %d (%d in total)",
                self.worker_index,
                len(rejected),
                rejected[0],
                self.unknown,
            )
        if halted:
            # Not acknowledged: the sender keeps the batch and resends it to whoever serves next.
            raise ReceiverStoppedError(
                f"worker {self.worker_index} is stopping; {halted} message(s) not accepted"
            )
        return rejected
