"""Admin.WatchTuples' sampling as a feature: watches attach to executors at run time.

Written only against the feature interface (tuplemesh.core.feature). Every executor is attached
(nothing wraps it); a watch switches on the executor's observers (``ExecutorView.observe``) while
it lasts, and the last one to go switches them off again, leaving one ``is None`` check per inbox
batch and per emit-buffer flush. The executor thread offers the tuples to the watches; a payload
from another worker is decoded (again, apart from its execution) only while a watch could send.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

from tuplemesh.core.feature import ExecutorHooks, ExecutorView, FeatureContext, FeatureMetric, FeatureServer
from tuplemesh.core.feature_spec import FeatureSpec
from tuplemesh.sampling.watch import TupleWatch
from tuplemesh.topology import AnchoredTuple, Columns, Tuple

__all__ = ["FEATURE", "ExecutorTaps", "Sampling", "feature"]


#: Inbox entries that are one tuple each (a local delivery; the executor's own Tuple class).
_ONE_TUPLE = frozenset({Tuple, AnchoredTuple})


class ExecutorTaps:
    """The watches of one executor. ``add_watch``/``remove_watch``: any thread; the observers:
    its thread."""

    def __init__(self, executor: ExecutorView) -> None:
        self.executor = executor
        self.component = executor.component
        #: watchers of what it takes to execute; None while nobody watches
        self.watches: tuple[TupleWatch, ...] | None = None
        #: watchers of the deliveries its emits make, offered as its emit buffers are flushed
        self.emit_watches: tuple[TupleWatch, ...] = ()
        self._lock = threading.Lock()

    def add_watch(self, watch: TupleWatch, emitted: bool = False) -> None:
        """Start offering ``watch`` the tuples this executor takes to execute, or (``emitted``)
        the deliveries its emits make as its emit buffers are flushed."""
        with self._lock:
            if emitted:
                self.emit_watches = (*self.emit_watches, watch)
            else:
                self.watches = (*(self.watches or ()), watch)
            self._observe()

    def remove_watch(self, watch: TupleWatch) -> None:
        """Stop offering tuples to ``watch``; with no watch left, sampling costs nothing again."""
        with self._lock:
            rest = tuple(w for w in self.watches or () if w is not watch)
            self.watches = rest or None
            self.emit_watches = tuple(w for w in self.emit_watches if w is not watch)
            self._observe()

    def _observe(self) -> None:
        """Switch the executor's observers to what is watched now. Under the lock."""
        self.executor.observe(
            None if self.watches is None else self._sample_inputs,
            self._sample_emitted if self.emit_watches else None,
        )

    def _sample_inputs(self, batch: Sequence[tuple[int | None, Any]], now: float) -> None:
        watches = self.watches  # removed meanwhile: the executor stops calling on its next batch
        if watches is not None:
            self._sample(batch, watches, now)

    def _sample_emitted(self, buffer: list[tuple[int, Any]]) -> None:
        watches = self.emit_watches
        if watches:
            self._sample(buffer, watches, time.monotonic())

    def _sample(
        self, batch: Sequence[tuple[int | None, Any]], watches: tuple[TupleWatch, ...], now: float
    ) -> None:
        """Offer the batch's tuples to the watchers. A payload from another worker is decoded
        (again, apart from its execution, with errors left to it) only when a watch takes one
        of its tuples and could send it."""
        wall = time.time()
        every_stream = [w for w in watches if w.stream is None]
        if every_stream:
            self._sample_positions(batch, every_stream, now, wall)
        if len(every_stream) < len(watches):
            self._sample_each(batch, [w for w in watches if w.stream is not None], now, wall)

    def _sample_positions(
        self, batch: Sequence[tuple[int | None, Any]], watches: list[TupleWatch], now: float, wall: float
    ) -> None:
        """Watches of every stream: each says which positions of the whole batch it takes, and
        only the entries holding one are looked into (a few in a hundred at the usual rates),
        so the cost per tuple is one size per entry, not a call per tuple."""
        if set(map(type, map(itemgetter(1), batch))) <= _ONE_TUPLE:  # one tuple per entry (C loops)
            sizes: list[int] | None = None
            total = len(batch)
        else:
            sizes = [self._size(item) for _, item in batch]
            total = sum(sizes)
        read: dict[int, list[Tuple]] = {}  # entry -> its tuples, decoded once for all watches
        for watch in watches:
            picks = watch.picks(total, now)
            if not picks:
                continue
            entry, start = 0, 0
            for position in picks:
                if sizes is None:
                    entry = start = position
                else:
                    while position >= start + sizes[entry]:
                        start += sizes[entry]
                        entry += 1
                task, item = batch[entry]
                tuples = read.get(entry)
                if tuples is None:  # a payload is decoded only for a watch that could send from it
                    tuples = self._tuples(item, watch.has_token(now))
                    if tuples is not None:
                        read[entry] = tuples
                # (None: left undecoded, or it did not decode: skipped, and its execution counts it)
                offset = position - start
                tup = tuples[offset] if tuples is not None and offset < len(tuples) else None
                watch.send(self.component, task, tup, now, wall)

    def _sample_each(
        self, batch: Sequence[tuple[int | None, Any]], watches: list[TupleWatch], now: float, wall: float
    ) -> None:
        """Watches filtering a stream: every tuple is offered (its stream is known only by
        looking); a payload no watch could send from goes by undecoded."""
        component = self.component
        for task, item in batch:
            tuples = self._tuples(item, any(w.ready(now) for w in watches))
            if tuples is None:
                continue
            for tup in tuples:
                for watch in watches:
                    watch.offer(component, task, tup, now, wall)

    def _size(self, item: Any) -> int:
        """How many tuples an inbox entry or emit delivery carries (a payload's, undecoded)."""
        kind = item.__class__
        if kind is bytes:
            return self.executor.tuples_in(item)
        if kind is list or kind is Columns:
            return len(item)
        return 1

    def _tuples(self, item: Any, decode: bool) -> list[Tuple] | None:
        """The tuples of an entry; None for a payload when ``decode`` is False."""
        kind = item.__class__
        if kind is bytes:
            return self.executor.peek(item) if decode else None
        if kind is list:
            return item
        if kind is Columns:
            return item.tuples()
        return [item]


class Sampling:
    """Admin.WatchTuples' watches on one worker's executors."""

    name = "sampling"

    def __init__(self) -> None:
        #: executor name -> its watches
        self.taps: dict[str, ExecutorTaps] = {}

    def attach(self, executor: ExecutorView) -> ExecutorHooks | None:
        self.taps[executor.name] = ExecutorTaps(executor)
        return None  # nothing wraps the executor: a watch switches its observers on

    def watch(
        self,
        executors: Sequence[str],
        stream: str | None,
        sample_rate: float,
        max_per_second: float,
        emitted: bool = False,
    ) -> TupleWatch:
        """A new watch on ``executors`` (by name): of what they execute, or (``emitted``) of what
        they emit; ``stream`` None: every stream. `unwatch` ends it."""
        watch = TupleWatch(stream, sample_rate, max_per_second)
        for name in executors:
            self.taps[name].add_watch(watch, emitted)
        return watch

    def unwatch(self, watch: TupleWatch) -> None:
        """End ``watch`` on every executor it watches."""
        for taps in self.taps.values():
            taps.remove_watch(watch)

    def start(self) -> None:
        pass  # no thread: the executors' threads offer, the Admin call's thread takes

    def stopping(self) -> None:
        pass  # nothing waits on callers from outside

    def stop(self) -> None:
        pass

    def serve(self, where: FeatureServer) -> None:
        pass  # no gRPC service of its own

    def section(self) -> Mapping[str, Any]:
        return {
            "watched_executors": sorted(
                name for name, taps in self.taps.items() if taps.watches is not None or taps.emit_watches
            )
        }

    def metrics(self) -> Sequence[FeatureMetric]:
        return ()

    def snapshot_fields(self) -> Mapping[str, Any]:
        return {}


def feature(context: FeatureContext) -> Sampling:
    """The running part's factory (``FEATURE.build``): every worker has one (a watch costs nothing
    until it starts; Admin.WatchTuples itself is off unless ``admin.watch.tuples.enabled``)."""
    return Sampling()


#: The registry's entry.
FEATURE = FeatureSpec("sampling", build=feature)
