"""`TupleWatch`: one Admin.WatchTuples watcher's filter, sampling, rate limit and bounded queue.

The executor thread offers tuples (only while at least one watch is attached to it: otherwise
its per-batch check finds nothing); a watch takes an evenly spaced fraction of those matching its
stream, renders at most ``max_per_second`` of them and queues them for the gRPC thread, which
waits on ``take``. Nothing here blocks the executor: a full queue or an empty token bucket skips
the tuple and counts it.
"""

from __future__ import annotations

import json
import math
import queue
import threading
from dataclasses import dataclass

from tuplemesh.topology import Tuple

__all__ = ["BROADCAST_TASK", "Sample", "TupleWatch"]

#: ``Sample.task`` of a tuple delivered to every task of its executor.
BROADCAST_TASK = -1


@dataclass(frozen=True, slots=True)
class Sample:
    """One sampled tuple, rendered on the executor thread (its values may change afterwards)."""

    component: str
    task: int
    source_component: str
    source_task: int
    stream: str
    values_json: str
    timestamp: float
    #: Sampled tuples skipped since the previous sample this watch queued.
    skipped: int


class TupleWatch:
    """A watcher of one component. ``offer``/``ready``: executor threads; ``take``: its reader."""

    def __init__(
        self, stream: str | None, sample_rate: float, max_per_second: float, capacity: int = 256
    ) -> None:
        if not 0 < sample_rate <= 1:
            raise ValueError(f"sample_rate must be in (0, 1], got {sample_rate}")
        if not max_per_second > 0:
            raise ValueError(f"max_per_second must be > 0, got {max_per_second}")
        self.stream = stream
        self.sample_rate = sample_rate
        self.max_per_second = max_per_second
        self._credit = 0.0  # sample_rate per matching tuple; a tuple is taken at each whole 1
        self._burst = max(1.0, max_per_second)
        self._tokens = self._burst
        self._refilled = -math.inf  # the first offer finds a full bucket
        self._queue: queue.Queue[Sample] = queue.Queue(capacity)
        # a component's executors offer from their own threads: the counters are shared
        self._lock = threading.Lock()
        self._skipped = 0
        self.offered = 0  # tuples matching the stream (before sampling)
        self.sent = 0  # samples queued

    def ready(self, now: float) -> bool:
        """Whether a tuple offered now could be sent (decoding one for nothing is not worth it)."""
        return self._tokens >= 1 or (now - self._refilled) * self.max_per_second >= 1

    def offer(self, component: str, task: int | None, tup: Tuple, now: float, wall: float) -> None:
        """Sample ``tup``, delivered to ``task`` (None: every task), taken to execute at ``now``."""
        if self.stream is not None and tup.source_stream != self.stream:
            return
        with self._lock:
            self.offered += 1
            self._credit += self.sample_rate
            if self._credit < 1:
                return
            self._credit -= 1
            self._tokens = min(self._burst, self._tokens + (now - self._refilled) * self.max_per_second)
            self._refilled = now
            if self._tokens < 1:
                self._skipped += 1
                return
            sample = Sample(
                component,
                BROADCAST_TASK if task is None else task,
                tup.source_component,
                tup.source_task,
                tup.source_stream,
                json.dumps(list(tup.values), default=repr),
                wall,
                self._skipped,
            )
            try:
                self._queue.put_nowait(sample)
            except queue.Full:
                self._skipped += 1
                return
            self._tokens -= 1
            self._skipped = 0
            self.sent += 1

    def pass_over(self, count: int) -> None:
        """``count`` tuples went by undecoded because no watch could send one: counted as offered
        and, as far as sampling would have taken them, skipped (not known when filtering a stream,
        whose name is inside the payload)."""
        if self.stream is not None:
            return
        with self._lock:
            self.offered += count
            self._credit += self.sample_rate * count
            taken = int(self._credit)
            self._credit -= taken
            self._skipped += taken

    def take(self, timeout: float) -> list[Sample]:
        """Every queued sample, waiting up to ``timeout`` seconds for the first."""
        try:
            out = [self._queue.get(timeout=timeout)]
        except queue.Empty:
            return []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                return out
