"""How a bolt executor runs one inbox batch through its tasks' calls, by entry point.

An inbox batch is a list of ``(task, entry)``: a `Tuple` from this worker, a payload that crossed
workers as bytes, a local ``emit_many``'s list or ``emit_columns``' `Columns`; task None is a
broadcast to every task of the executor. A bolt's entry point (``execute``, ``execute_batch`` or
``process``, the same for every task of a component) is known when the executor is built, so
the executor picks one runner then and the loop never asks again:

- `PerTupleRun`: ``execute`` once per tuple, in arrival order;
- `TaskBatchRun`: each task's part of the batch in ``execute_batch`` calls of a bounded size;
- `ColumnsRun`: each task's part as one `Columns` per source (``process``);
- `SampledRun`: a feature's wrapped calls on one batch in ``every``, the plain ones otherwise.

What crossed workers is decoded by the executor's `InboxReader`; what the bolt raises is counted,
logged and failed by `BoltFailures`. A halt (`Halt`) is seen per tuple, or per call for the batch
entry points, and what it leaves is counted in ``abandoned_on_halt``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from tuplemesh.errors import AlertError
from tuplemesh.logutil import RateLimitedLog
from tuplemesh.serialization import is_batch
from tuplemesh.topology import Columns, Tuple
from tuplemesh.worker.inbox_reader import InboxReader

__all__ = [
    "BoltFailures",
    "BoltRun",
    "ColumnsRun",
    "FailsInput",
    "Halt",
    "PerTupleRun",
    "RunCounts",
    "SampledRun",
    "TaskBatchRun",
    "abandoned_in",
    "bolt_run",
]

#: One inbox batch: ``(task or None for every task, entry)``.
InboxBatch = list[tuple[int | None, Any]]


class RunCounts(Protocol):
    """The executor counts a run adds to."""

    executed: int
    received: int
    abandoned_on_halt: int


class BoltRun(Protocol):
    """Runs one inbox batch through a bolt executor's tasks (executor thread only)."""

    def run(self, batch: InboxBatch) -> None: ...


class Halt:
    """Set by a halt (any thread); every run of the executor stops at its next tuple or call."""

    def __init__(self) -> None:
        self.on = False


class FailsInput(Protocol):
    """A task's collector, as far as failing its input goes."""

    def fail(self, tup: Any) -> None: ...


class BoltFailures:
    """What follows when bolt code raises on its input: the error counted (``record_error``, which
    keeps the first one), a rate-limited log line, and the input failed (its tree, when tracked)."""

    def __init__(
        self,
        component: str,
        collectors: Mapping[int, FailsInput],
        record_error: Callable[[str, int, BaseException], None],
        errors_log: RateLimitedLog,
    ) -> None:
        self._component = component
        self._collectors = collectors
        self._record_error = record_error
        self._errors_log = errors_log

    def tuple_failed(self, task: int, item: Any, exc: Exception) -> None:
        """``execute`` raised on ``item``: count and log it, and fail the tuple."""
        self._record_error("execute", task, exc)
        self._errors_log.log(
            "bolt %s task %s raised %r on %r; tuple failed", self._component, task, exc, item
        )
        self._fail(task, item)

    def batch_failed(self, task: int, tuples: list[Tuple] | Columns, exc: Exception, method: str) -> None:
        """``execute_batch`` (or ``process``) raised: count it once, log it, and fail every tuple
        it was given (a batch tracked as a whole: the batch, once)."""
        self._record_error(method, task, exc)
        self._errors_log.log(
            "bolt %s task %s raised %r in %s on %d tuples; all failed",
            self._component,
            task,
            exc,
            method,
            len(tuples),
        )
        for tup in [tuples] if isinstance(tuples, Columns) else tuples:
            self._fail(task, tup)

    def _fail(self, task: int, item: Any) -> None:
        try:
            self._collectors[task].fail(item)
        except AlertError:
            raise
        except Exception as fail_exc:  # e.g. the acker message did not fit: the tree times out
            self._errors_log.log(
                "bolt %s task %s: failing %r raised %r", self._component, task, item, fail_exc
            )


def abandoned_in(reader: InboxReader, batch: InboxBatch, start: int) -> int:
    """The tuples ``batch[start:]`` carries (left unexecuted by a halt), without decoding them."""
    abandoned = 0
    for index in range(start, len(batch)):
        abandoned += reader.carried(batch[index][1])
    return abandoned


class PerTupleRun:
    """``execute`` once per tuple, in arrival order; a broadcast once per task."""

    def __init__(
        self,
        calls: dict[int, Callable[[Tuple], None]],
        reader: InboxReader,
        counters: RunCounts,
        halt: Halt,
        failures: BoltFailures,
    ) -> None:
        self._calls = calls
        self._reader = reader
        self._counters = counters
        self._halt = halt
        self._failures = failures

    def run(self, batch: InboxBatch) -> None:
        calls = self._calls
        reader = self._reader
        rows_codec = reader.rows_codec
        executed = 0
        for index, (task, item) in enumerate(batch):
            if self._halt.on:  # checked per tuple: a halt must not wait for a slow bolt's batch
                self._counters.abandoned_on_halt += abandoned_in(reader, batch, index)
                break
            kind = item.__class__
            if kind is bytes and not (rows_codec and is_batch(item)):  # one tuple's payload
                item = reader.decode(item)
                if item is None:
                    continue
            elif kind is bytes or kind is list or kind is Columns:  # several tuples in one entry
                tuples, carried = reader.unpack(item)
                executed += self._each(task, tuples, carried)
                continue
            if task is None:  # no task: broadcast to every task of this executor
                for each, fn in calls.items():
                    executed += 1
                    self._call(each, fn, item)
                continue
            executed += 1
            try:
                calls[task](item)
            except Exception as exc:
                self._failures.tuple_failed(task, item, exc)
        self._counters.executed += executed
        self._counters.received += len(batch)

    def _each(self, task: int | None, tuples: list[Tuple], carried: int) -> int:
        """Execute each of the ``carried`` tuples of one inbox entry (``tuples``: those that
        decoded) one by one; returns the execute calls made."""
        counters = self._counters
        counters.received += carried - 1  # the run counts the entry once
        executed = 0
        for index, tup in enumerate(tuples):
            if self._halt.on:
                counters.abandoned_on_halt += len(tuples) - index
                break
            if task is None:
                for each, fn in self._calls.items():
                    executed += 1
                    self._call(each, fn, tup)
            else:
                executed += 1
                self._call(task, self._calls[task], tup)
        return executed

    def _call(self, task: int, fn: Callable[[Tuple], None], item: Tuple) -> None:
        try:
            fn(item)
        except Exception as exc:
            self._failures.tuple_failed(task, item, exc)


class _PartsRun:
    """What the batch entry points share: each task's part of an inbox batch is handed over in
    calls of at most ``limit`` tuples, and a halt is seen before each call (a call takes its part
    whole)."""

    def __init__(
        self,
        calls: dict[int, Callable[[Any], None]],
        limit: int,
        reader: InboxReader,
        counters: RunCounts,
        halt: Halt,
        failures: BoltFailures,
        method: str,
    ) -> None:
        self._calls = calls
        self._limit = max(1, limit)
        self._reader = reader
        self._counters = counters
        self._halt = halt
        self._failures = failures
        self._method = method

    def _call_in_parts(self, task: int, tuples: list[Tuple] | Columns, most: int) -> int:
        """Call ``task`` with ``tuples`` in parts of at most ``most``; returns the tuples handed
        over (the rest, after a halt, is counted as abandoned)."""
        size = len(tuples)
        call = self._calls[task]
        executed = 0
        for start in range(0, size, most):
            if self._halt.on:
                self._counters.abandoned_on_halt += size - start
                break
            if size <= most:
                part = tuples
            elif isinstance(tuples, Columns):
                part = tuples.slice(start, start + most)
            else:
                part = tuples[start : start + most]
            executed += len(part)
            try:
                call(part)
            except Exception as exc:
                self._failures.batch_failed(task, part, exc, self._method)
        return executed


class TaskBatchRun(_PartsRun):
    """Each task's part of an inbox batch, in arrival order, in ``execute_batch`` calls of at most
    ``limit`` tuples: an inbox batch from another worker can hold a whole transfer batch, and one
    call over all of it would emit it in one burst."""

    def __init__(
        self,
        calls: dict[int, Callable[[list[Tuple]], None]],
        limit: int,
        reader: InboxReader,
        counters: RunCounts,
        halt: Halt,
        failures: BoltFailures,
    ) -> None:
        super().__init__(calls, limit, reader, counters, halt, failures, "execute_batch")

    def run(self, batch: InboxBatch) -> None:
        per_task: dict[int, list[Tuple]] = {}
        received = len(batch)
        reader = self._reader
        target: int | None
        for target, item in batch:
            kind = item.__class__
            if kind is bytes or kind is list or kind is Columns:
                tuples, carried = reader.unpack(item)
                received += carried - 1
                if tuples:  # a batch of columns keeps its rows: a task's part is a list of its own
                    self._gather(per_task, target, list(tuples) if kind is Columns else tuples)
            elif target is None:
                self._gather(per_task, None, [item])
            else:
                mine = per_task.get(target)
                if mine is None:
                    per_task[target] = [item]
                else:
                    mine.append(item)
        executed = 0
        for task, tuples in per_task.items():
            executed += self._call_in_parts(task, tuples, self._limit)
        self._counters.executed += executed
        self._counters.received += received

    def _gather(self, per_task: dict[int, list[Tuple]], task: int | None, tuples: list[Tuple]) -> None:
        """Add ``tuples`` to ``task``'s part (every task's, for a broadcast); may take the list."""
        if task is None:  # no task: broadcast to every task of this executor
            for each in self._calls:
                per_task.setdefault(each, []).extend(tuples)
            return
        mine = per_task.get(task)
        if mine is None:
            per_task[task] = tuples
        else:
            mine.extend(tuples)


class ColumnsRun(_PartsRun):
    """Each task's part of an inbox batch as one `Columns` per source (task and stream), for
    ``process``: the pieces one source sent (columns payloads, local ``emit_columns`` parts, rows,
    single tuples) are joined, so a bolt's call covers what the inbox batch holds, not what one
    emit held. Order holds per source, as Storm's does; between sources it does not. A batch
    tracked as a whole (acking) is a call of its own, however long; others are cut at ``limit``
    rows."""

    def __init__(
        self,
        calls: dict[int, Callable[[Columns], None]],
        limit: int,
        reader: InboxReader,
        counters: RunCounts,
        halt: Halt,
        failures: BoltFailures,
    ) -> None:
        super().__init__(calls, limit, reader, counters, halt, failures, "process")

    def run(self, batch: InboxBatch) -> None:
        per_task: dict[int, dict[tuple[int, str, str, int], list[Columns | list[Tuple]]]] = {}
        # per source: pieces after a batch tracked as a whole start a new group, so that the
        # source's order holds (the whole batch is a call of its own)
        generation: dict[tuple[int, int, str, str], int] = {}
        received = len(batch)
        reader = self._reader
        calls = self._calls
        target: int | None
        for target, item in batch:
            kind = item.__class__
            run: Columns | list[Tuple]
            if kind is bytes or kind is list or kind is Columns:
                run, carried = reader.read(item)
                received += carried - 1
            else:
                run = [item]
            if not len(run):
                continue
            first = run if isinstance(run, Columns) else run[0]
            whole = isinstance(run, Columns) and run.anchors is not None
            for task in calls if target is None else (target,):
                origin = (task, first.source_task, first.source_component, first.source_stream)
                age = generation.get(origin, 0)
                if whole:  # acked as a whole: a call of its own, and what follows comes after it
                    generation[origin] = age = age + 2
                    source = (first.source_task, first.source_component, first.source_stream, age - 1)
                else:
                    source = (first.source_task, first.source_component, first.source_stream, age)
                sources = per_task.get(task)
                if sources is None:
                    per_task[task] = {source: [run]}
                    continue
                pieces = sources.get(source)
                if pieces is None:
                    sources[source] = [run]
                else:
                    pieces.append(run)
        executed = 0
        for task, sources in per_task.items():
            for pieces in sources.values():
                columns = Columns.join(pieces)
                most = self._limit
                if columns.anchors is not None:  # tracked as a whole: one call, however long
                    columns.on_rows = reader.rows_of  # a bolt may ack it whole, or row by row
                    most = max(most, len(columns))
                executed += self._call_in_parts(task, columns, most)
        self._counters.executed += executed
        self._counters.received += received


class SampledRun:
    """Runs one inbox batch in ``every`` (on average) through ``wrapped`` (a feature's wrapped
    calls), the others through ``plain``: the first batch, then batches drawn at random around
    ``every`` apart, so batches that arrive in a fixed rotation (senders taking turns) are all
    sampled alike, and an executor that takes few batches still has one wrapped."""

    def __init__(self, plain: BoltRun, wrapped: BoltRun, every: int) -> None:
        self._plain = plain
        self._wrapped = wrapped
        self._every = every
        self._until_wrapped = 1

    def run(self, batch: InboxBatch) -> None:
        self._until_wrapped -= 1
        if self._until_wrapped > 0:
            self._plain.run(batch)
            return
        self._until_wrapped = random.randint(1, 2 * self._every - 1)  # ``every`` on average
        self._wrapped.run(batch)


def bolt_run(
    entry: str,
    calls: dict[int, Any],
    limit: int,
    reader: InboxReader,
    counters: RunCounts,
    halt: Halt,
    failures: BoltFailures,
) -> BoltRun:
    """The run for bolts whose entry point is ``entry`` (``process``, ``execute_batch`` or
    ``execute``), through ``calls`` (each task's), batch calls of at most ``limit`` tuples."""
    if entry == "process":
        return ColumnsRun(calls, limit, reader, counters, halt, failures)
    if entry == "execute_batch":
        return TaskBatchRun(calls, limit, reader, counters, halt, failures)
    return PerTupleRun(calls, reader, counters, halt, failures)
