"""`TupleWatch`: one Admin.WatchTuples watcher's filter, sampling, rate limit and bounded queue.

The executor thread offers tuples (only while at least one watch is attached to it: otherwise
it observes nothing, see `tuplemesh.sampling.feature`); a watch takes an evenly spaced fraction of
those matching its stream, renders at most ``max_per_second`` of them and queues them for the gRPC
thread, which waits on ``take``. Nothing here blocks the executor: a full queue or an empty token
bucket skips the tuple and counts it.
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
    """A watcher of one component. ``offer``/``picks``/``send``/``ready``/``has_token``: executor
    threads; ``take``: its reader.

    Samples are evenly spaced in the order tuples are offered: ``sample_rate`` of them, thinned
    further to about ``max_per_second`` by a stride re-estimated from the offered rate every
    quarter second (so every destination and source shows up in proportion, not only the first
    tuples after a quiet spell). A token bucket holding a tenth of a second's worth is the hard
    cap while the stride catches up with a burst.
    """

    #: Seconds over which the offered rate is measured to set the stride.
    RATE_WINDOW = 0.25

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
        self._credit = 0.0  # the sampling rate per tuple; a tuple is taken at each whole 1
        self._rate = sample_rate  # sample_rate thinned by the stride
        self._window_start = -math.inf  # the first offer starts the first window
        self._window_offered = 0
        self._burst = max(1.0, max_per_second / 10)
        self._tokens = self._burst
        self._refilled = -math.inf  # the first offer finds a full bucket
        self._queue: queue.Queue[Sample] = queue.Queue(capacity)
        # a component's executors offer from their own threads: the counters are shared
        self._lock = threading.Lock()
        self._skipped = 0
        self.offered = 0  # tuples matching the stream (before sampling)
        self.sent = 0  # samples queued

    def ready(self, now: float) -> bool:
        """Whether the next tuple offered could be sent: decoding one for nothing is not worth
        it. With a stream filter, only the rate limit is known (the stream is in the payload)."""
        if self.stream is None and self._credit + self._rate < 1:
            return False
        return self.has_token(now)

    def has_token(self, now: float) -> bool:
        """Whether the rate limit would let a tuple through at ``now`` (it takes none)."""
        return self._tokens >= 1 or (now - self._refilled) * self.max_per_second >= 1

    def offer(self, component: str, task: int | None, tup: Tuple, now: float, wall: float) -> None:
        """Sample ``tup``, delivered to ``task`` (None: every task), taken to execute at ``now``
        (one tuple at a time: how a watch filtering a stream is offered, the stream being the
        tuple's)."""
        if self.stream is not None and tup.source_stream != self.stream:
            return
        with self._lock:
            if self._advance(1, now) >= 1:
                self._send(component, task, tup, now, wall)

    def picks(self, count: int, now: float) -> list[int]:
        """``count`` tuples are offered at once: the positions (0 .. count - 1, ascending) that
        sampling takes, as evenly spaced as offering them one by one would take them; `send`
        each one then. Only for a watch of every stream (with a filter the count of matching
        tuples is not known without looking at each). Under the lock."""
        with self._lock:
            credit = self._credit
            taken = self._advance(count, now)  # (which may re-estimate the rate: the count's)
            if not taken:
                return []
            rate = self._rate
            # the j-th tuple taken is the first whose credit reaches j: credit + rate * (k + 1) >= j
            return [min(count - 1, max(0, math.ceil((j - credit) / rate) - 1)) for j in range(1, taken + 1)]

    def send(self, component: str, task: int | None, tup: Tuple | None, now: float, wall: float) -> None:
        """Render and queue a tuple `picks` chose, if the rate limit lets it; ``tup`` None: it
        could not be read (a payload left undecoded), counted as skipped."""
        with self._lock:
            if tup is None:
                self._skipped += 1
            else:
                self._send(component, task, tup, now, wall)

    def _send(self, component: str, task: int | None, tup: Tuple, now: float, wall: float) -> None:
        """A tuple sampling took: queued unless the token bucket or the queue is empty/full (then
        counted as skipped). Under the lock."""
        self._tokens = min(self._burst, self._tokens + (now - self._refilled) * self.max_per_second)
        self._refilled = max(self._refilled, now)  # executors of one component read their own clocks
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

    def _advance(self, count: int, now: float) -> int:
        """Count ``count`` offered tuples; how many of them sampling takes. Under the lock."""
        self.offered += count
        self._window_offered += count
        elapsed = now - self._window_start
        if elapsed >= self.RATE_WINDOW:
            per_second = self._window_offered / elapsed  # 0 for the first window (elapsed: inf)
            self._rate = self.sample_rate / max(1.0, per_second * self.sample_rate / self.max_per_second)
            self._window_start, self._window_offered = now, 0
        self._credit += self._rate * count
        taken = int(self._credit)
        self._credit -= taken
        return taken

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
