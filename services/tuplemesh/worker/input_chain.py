"""`InputChain`: how a bolt executor's handling of an inbox batch is put together, once, when it
is built: each task's call chosen by the bolt's entry point (``process``, ``execute_batch`` or
``execute``) behind its acking call; the features' wrappers around each call (on every batch,
or on one in ``every_batches`` of them); and the features' batch wrappers around the whole run,
one that holds input back (barrier alignment) innermost, then the observers in the order they
attached. With no feature, the chain is the plain run and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from tuplemesh.core.acking import ExecutorAcking
from tuplemesh.core.collectors import BoltOutputCollector
from tuplemesh.core.feature import BatchRun, ExecutorHooks
from tuplemesh.core.markers import Marker
from tuplemesh.topology import BatchBolt, Bolt, ColumnarBolt
from tuplemesh.worker.bolt_input import BoltFailures, BoltRun, Halt, SampledRun, bolt_run
from tuplemesh.worker.inbox_reader import InboxReader

__all__ = ["InputChain", "input_chain"]


@dataclass(frozen=True)
class InputChain:
    """What a bolt executor runs for each inbox batch."""

    #: the run of a batch's tuples through the tasks' calls (as features wrapped them)
    run: BatchRun
    #: the whole handling of a batch: ``run`` inside the features' batch wrappers
    take: BatchRun
    #: the features' markers and the work each one asks of the executor thread
    markers: Mapping[Marker, Callable[[], None]]


def input_chain(
    name: str,
    entry: str,
    bolts: Mapping[int, Bolt],
    collectors: Mapping[int, BoltOutputCollector],
    acking: ExecutorAcking,
    feature_hooks: Sequence[ExecutorHooks],
    limit: int,
    parts: tuple[InboxReader, Any, Halt, BoltFailures],
) -> InputChain:
    """The chain of executor ``name`` whose bolts' entry point is ``entry``; ``limit``: the most
    tuples in one batch call; ``parts``: its reader, counters, halt flag and failure handling,
    which every run shares. TypeError when more than one feature holds its input back."""
    # each task's call: a BasicBolt with acking on acks its input after it
    calls: dict[int, Any]
    if entry == "process":
        calls = {t: acking.process_call(cast(ColumnarBolt, b), collectors[t]) for t, b in bolts.items()}
    elif entry == "execute_batch":
        calls = {t: acking.batch_call(cast(BatchBolt, b), collectors[t]) for t, b in bolts.items()}
    else:
        calls = {t: acking.bolt_call(b, collectors[t]) for t, b in bolts.items()}
    markers: dict[Marker, Callable[[], None]] = {}
    wrapped = calls
    every = 0  # wrapped calls run on one inbox batch in ``every`` (0: nothing is wrapped)
    for hooks in feature_hooks:
        markers.update(hooks.markers)
        wrap: Callable[[int, Any], Any] | None = (
            hooks.wrap_process
            if entry == "process"
            else hooks.wrap_execute_batch
            if entry == "execute_batch"
            else hooks.wrap_execute
        )
        if wrap is not None:
            wrapped = {task: wrap(task, fn) for task, fn in wrapped.items()}
            every = hooks.every_batches if every == 0 else min(every, hooks.every_batches)
    reader, counters, halting, failures = parts
    run: BoltRun = bolt_run(entry, wrapped, limit, reader, counters, halting, failures)
    if every > 1:  # the wrapped calls on some batches only: the plain ones cost nothing more
        run = SampledRun(bolt_run(entry, calls, limit, reader, counters, halting, failures), run, every)
    wrappers = [h for h in feature_hooks if h.wrap_batch is not None]
    holding = [h for h in wrappers if h.holds_input]
    if len(holding) > 1:
        raise TypeError(f"executor {name}: {len(holding)} features hold its input back; at most one may")
    take: BatchRun = run.run
    for hooks in holding + [h for h in wrappers if not h.holds_input]:
        assert hooks.wrap_batch is not None
        take = hooks.wrap_batch(take)
    return InputChain(run.run, take, markers)
