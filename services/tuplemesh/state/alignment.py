"""`AlignedInput`: a bolt executor's side of the checkpoint protocol (barrier alignment,
snapshots, rollbacks), hooked between its inbox and its tasks' ``execute``.

Per task and per input channel (an upstream task), in arrival order:

- *Attempts.* A rollback marker ``[ROLLBACK, c, a]`` newer than the task's attempt restores the
  task's part of checkpoint ``c`` (``init_state``), forwards the marker, and switches the task to
  attempt ``a``. A channel's tuples count only once that channel delivered the marker of the
  task's attempt: anything before it was sent in an earlier attempt and is dropped (counted,
  and failed when it is in a tuple tree), because the rewound spouts emit it again.
- *Alignment* (Flink's aligned barriers). When barrier ``n`` arrives on a channel, that
  channel's later tuples are held back until barrier ``n`` arrived on every input channel: then
  every tuple before the barriers, and none after, has been executed, so the task stores its
  state as its part of ``n``, forwards barrier ``n`` and executes the held tuples. Holding is
  bounded (``topology.state.alignment.buffer.size``): past it the task gives ``n`` up, and sends
  ``[ABANDON, n]`` in place of the barrier, on which the tasks downstream give ``n`` up too.

A stateful task's ``pre_checkpoint(n)`` runs just before its state is stored as its part of
``n``, and ``checkpoint_committed(n)`` when the coordinator's ``[COMMIT, n, attempt]`` arrives.

Tuples from tasks that are not inputs (Admin.Emit) run at once; they are outside any checkpoint.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, Protocol

from tuplemesh.core.feature import BatchRun, ExecutorCounts
from tuplemesh.core.held_back import HeldBack
from tuplemesh.core.stats import AlignmentSnapshot
from tuplemesh.errors import SerializationError
from tuplemesh.logutil import RateLimitedLog
from tuplemesh.state.base import PartKey, StateRestoreError, StateStore, StoreUnavailable
from tuplemesh.state.components import StatefulBolt
from tuplemesh.state.kv import DictState
from tuplemesh.state.parts import load_part
from tuplemesh.state.protocol import (
    ABANDON,
    ALIGNMENT_GIVEN_UP,
    BARRIER,
    BARRIER_STREAM,
    COMMIT,
    CONTROL_STREAM,
    NO_CHECKPOINT,
    REPORT_STREAM,
    ROLLBACK,
    CheckpointPlan,
)
from tuplemesh.state.stores import open_store
from tuplemesh.topology.tuple import AnchoredTuple, Tuple

__all__ = ["AlignedInput", "BoltTasks", "TaskAlignment"]

log = logging.getLogger(__name__)

Item = tuple[int | None, Any]

#: the barrier-stream kinds that stand for checkpoint ``n`` on a channel
_IN_PLACE_OF_BARRIER = (BARRIER, ABANDON)


class BoltTasks(Protocol):
    """What alignment needs of a bolt executor (the feature interface's ``ExecutorView`` has it)."""

    @property
    def component(self) -> str: ...

    @property
    def task_ids(self) -> tuple[int, ...]: ...

    @property
    def tasks(self) -> Mapping[int, Any]: ...  # task -> its bolt

    @property
    def collectors(self) -> Mapping[int, Any]: ...  # task -> its BoltCollector

    @property
    def counters(self) -> ExecutorCounts: ...  # .received and .errors are counted here

    def unpack(self, entry: Any) -> tuple[list[Tuple], int]: ...


class TaskAlignment:
    """One bolt task's protocol state. Executor thread only."""

    def __init__(
        self, task: int, key: PartKey, inputs: frozenset[int], outputs: tuple[int, ...], bolt: Any
    ) -> None:
        self.task = task
        self.key = key
        self.inputs = inputs
        self.outputs = outputs
        self.bolt = bolt
        self.stateful = isinstance(bolt, StatefulBolt)
        self.state: DictState | None = None
        self.attempt = 0  # 0: no marker yet; everything is dropped until one arrives
        self.channel_attempt: dict[int, int] = {}
        self.aligning: int | None = None  # the checkpoint whose barriers are being collected
        self.arrived: set[int] = set()
        self.held: list[Item] = []
        self.done_upto = NO_CHECKPOINT  # barriers of checkpoints <= this are stale
        self.restore_error: str | None = None  # set: the task's state could not be restored

    @property
    def steady(self) -> bool:
        """Every channel in the task's attempt and nothing being aligned: tuples run as they come."""
        if self.attempt == 0 or self.aligning is not None or self.restore_error is not None:
            return False
        attempt, channels = self.attempt, self.channel_attempt
        return all(channels.get(source) == attempt for source in self.inputs)


class AlignedInput:
    """Feeds a bolt executor's batches to its tasks under the checkpoint protocol."""

    def __init__(
        self,
        executor: BoltTasks,
        plan: CheckpointPlan,
        conf: Mapping[str, Any],
        held_back: HeldBack | None = None,
    ) -> None:
        component = executor.component
        self._conf = conf
        self._plan = plan
        self._tasks = {
            task: TaskAlignment(
                task,
                PartKey(plan.topology, component, task),
                plan.inputs_of.get(task, frozenset()),
                plan.outputs_of.get(task, ()),
                executor.tasks[task],
            )
            for task in executor.task_ids
        }
        self._collectors = executor.collectors
        self._counters = executor.counters
        self._execute: BatchRun = _not_wrapped
        self._unpack = executor.unpack
        #: where a task is marked while it holds tuples, with the inputs whose barrier it has: its
        #: worker's load-aware shuffles leave it out then, and its worker's emitters that have
        #: passed the barrier on wait (what they sent it would only be set aside)
        self._held_back = held_back if held_back is not None else HeldBack()
        self._bound = plan.settings.alignment_buffer
        self._run: list[Item] = []
        self._steady = False
        self._store: StateStore | None = None
        interval = plan.settings.log_interval_seconds
        self._warnings = RateLimitedLog(log, interval)
        self._errors = RateLimitedLog(log, interval, logging.ERROR)
        self.stale_dropped = 0  # tuples of an earlier attempt, dropped
        self.held_max = 0  # most tuples one task held back at once
        self.alignments_given_up = 0
        self.parts_stored = 0
        self.parts_failed = 0

    def restoring(self) -> list[int]:
        """The stateful tasks whose state is not restored yet: no attempt begun (the start's
        rollback has not reached them) or a restore that failed. Any thread (reads ints)."""
        return sorted(
            ta.task
            for ta in self._tasks.values()
            if ta.stateful and (ta.attempt == 0 or ta.restore_error is not None)
        )

    @classmethod
    def attach(
        cls,
        executor: BoltTasks,
        plan: CheckpointPlan,
        conf: Mapping[str, Any],
        held_back: HeldBack | None = None,
    ) -> AlignedInput | None:
        """The protocol for ``executor`` when its component aligns barriers, else None. It runs
        once `wrap` gave it the executor's handling of what may execute now."""
        if executor.component not in plan.aligned:
            return None
        return cls(executor, plan, conf, held_back)

    def wrap(self, execute: BatchRun) -> BatchRun:
        """The executor's handling of an inbox batch under the protocol: ``execute`` runs the
        decoded items that may run now (counting them received); the executor calls what this
        returns instead, for every inbox batch."""
        self._execute = execute
        return self.on_batch

    def close(self) -> None:
        for task in self._tasks:  # a task that no longer runs holds no emitter of its worker up
            self._held_back.release(task)
        if self._store is not None:
            self._store.close()

    def snapshot(self) -> AlignmentSnapshot:
        """Its counts now, for metrics and Admin. Any thread: each is one read of an int."""
        return AlignmentSnapshot(
            stale_dropped=self.stale_dropped,
            alignments_given_up=self.alignments_given_up,
            parts_stored=self.parts_stored,
            parts_failed=self.parts_failed,
            held_max=self.held_max,
        )

    def tasks(self) -> dict[int, TaskAlignment]:
        return self._tasks

    # -- the batch loop -----------------------------------------------------------------------
    def on_batch(self, batch: list[Item]) -> None:
        """Execute what may run now, hold or drop the rest, act on barriers and markers."""
        self._feed(batch)
        self._flush()

    def _feed(self, items: list[Item]) -> None:
        counters = self._counters
        for task, entry in items:
            if isinstance(entry, Tuple):
                self._feed_one(task, entry)
                continue
            tuples, carried = self._unpack(entry)
            counters.received += carried - len(tuples)  # the undecodable ones
            for item in tuples:
                self._feed_one(task, item)

    def _feed_one(self, task: int | None, item: Tuple) -> None:
        """One tuple: a barrier or marker acts; data runs, is held behind a barrier, or is dropped."""
        counters = self._counters
        stream = item.source_stream
        if stream == BARRIER_STREAM:
            self._flush()  # everything before the signal runs before it acts
            counters.received += 1
            if task is not None:
                self._on_signal(self._tasks[task], item)
            self._steady = all(t.steady for t in self._tasks.values())
        elif stream == CONTROL_STREAM:
            self._flush()
            counters.received += 1
            if task is not None:
                self._on_commit(self._tasks[task], item)
        elif self._steady:
            self._run.append((task, item))  # not cached: a flush replaces the list
        elif task is not None:
            self._admit(self._tasks[task], item)
        else:  # a broadcast: decided per task, counted once
            counters.received -= len(self._tasks) - 1
            for each in self._tasks.values():
                self._admit(each, item)

    def _flush(self) -> None:
        if self._run:
            run, self._run = self._run, []
            self._execute(run)

    def _admit(self, ta: TaskAlignment, item: Tuple) -> None:
        source = item.source_task
        if source not in ta.inputs:
            self._run.append((ta.task, item))
        elif ta.attempt == 0 or ta.restore_error is not None or ta.channel_attempt.get(source) != ta.attempt:
            self._drop(ta, item)
        elif ta.aligning is not None and source in ta.arrived:
            if not ta.held:
                self._held_back.hold(ta.task, frozenset(ta.arrived), ta.inputs)
            ta.held.append((ta.task, item))
            if len(ta.held) > self.held_max:
                self.held_max = len(ta.held)
            if len(ta.held) > self._bound:
                self._warnings.log(
                    "%s: alignment given up: more than %d tuples held back waiting for the barriers "
                    "of checkpoint %d from its other inputs; that checkpoint is abandoned (not a "
                    "store error) and the held tuples run now. If this repeats, raise "
                    "topology.state.alignment.buffer.size or look for the input that lags behind",
                    ta.key,
                    self._bound,
                    ta.aligning,
                )
                self._flush()
                self._give_up(ta)
        else:
            self._run.append((ta.task, item))

    def _drop(self, ta: TaskAlignment, item: Tuple) -> None:
        self.stale_dropped += 1
        self._counters.received += 1
        if isinstance(item, AnchoredTuple):  # its tree fails now: an at-least-once spout replays it
            self._collectors[ta.task].fail(item)

    # -- barriers and markers -----------------------------------------------------------------
    def _on_signal(self, ta: TaskAlignment, signal: Tuple) -> None:
        kind, number, attempt = signal.values
        source = signal.source_task
        if kind == ROLLBACK:
            if attempt > ta.attempt:
                self._begin_attempt(ta, number, attempt)
            if attempt == ta.attempt:
                ta.channel_attempt[source] = attempt
            return
        if (
            kind not in _IN_PLACE_OF_BARRIER
            or attempt != ta.attempt
            or ta.channel_attempt.get(source) != attempt
        ):
            return  # of an earlier attempt
        if ta.restore_error is not None:
            return
        while ta.aligning is not None and number > ta.aligning:
            self._give_up(ta)  # a newer checkpoint's barrier: the older one cannot complete here
        if number <= ta.done_upto:
            return
        if kind == ABANDON:  # an upstream task gave ``number`` up: it can never complete here
            if ta.aligning is not None and number < ta.aligning:
                return  # an older one (its channel skipped the one aligned now): over here too
            ta.aligning = number
            self._give_up(ta, upstream=True)
            return
        if ta.aligning is None:
            ta.aligning, ta.arrived = number, set()
        ta.arrived.add(source)
        if ta.arrived >= ta.inputs:
            self._complete(ta)
        elif ta.held:  # the emitters of this worker that feed it only from here on wait now
            self._held_back.barriered(ta.task, frozenset(ta.arrived), ta.inputs)

    def _on_commit(self, ta: TaskAlignment, notice: Tuple) -> None:
        """The coordinator committed a checkpoint this task stored a part of: tell the bolt."""
        kind, checkpoint, attempt = notice.values
        if kind != COMMIT or not ta.stateful or attempt != ta.attempt or ta.restore_error is not None:
            return  # of an earlier attempt: the rollback since then decided what counts
        try:
            ta.bolt.checkpoint_committed(checkpoint)
        except Exception as exc:
            self._counters.errors += 1
            log.error("checkpoint_committed of %s raised %r", ta.key, exc, exc_info=exc)

    def _complete(self, ta: TaskAlignment) -> None:
        """Barrier ``n`` arrived on every input: store the part, forward ``n``, run what was held."""
        checkpoint = ta.aligning
        assert checkpoint is not None
        ta.aligning, ta.done_upto = None, checkpoint
        collector = self._collectors[ta.task]
        if ta.stateful:
            stored = self._store_part(ta, checkpoint)
        for task in ta.outputs:
            collector.emit_direct(task, [BARRIER, checkpoint, ta.attempt], stream=BARRIER_STREAM)
        if ta.stateful:
            collector.emit_direct(
                self._plan.coordinator_task, [checkpoint, ta.attempt, ta.task, stored], stream=REPORT_STREAM
            )
        self._release(ta)

    def _store_part(self, ta: TaskAlignment, checkpoint: int) -> bool:
        assert ta.state is not None
        try:
            ta.bolt.pre_checkpoint(checkpoint)
        except Exception as exc:
            self._counters.errors += 1
            self.parts_failed += 1
            log.error("pre_checkpoint of %s raised %r", ta.key, exc, exc_info=exc)
            return False
        try:
            self._store_now().put_part(ta.key, checkpoint, ta.state.snapshot())
        except (StoreUnavailable, SerializationError) as exc:
            self.parts_failed += 1
            self._errors.log("%s: part of checkpoint %d not stored: %s", ta.key, checkpoint, exc)
            return False
        self.parts_stored += 1
        return True

    def _give_up(self, ta: TaskAlignment, upstream: bool = False) -> None:
        """Stop aligning: the checkpoint is never completed here; held tuples run now. The tasks
        downstream are told in place of the barrier (``upstream``: they told this one), so none
        of them holds its other inputs for a barrier that never comes."""
        checkpoint = ta.aligning
        assert checkpoint is not None
        ta.aligning, ta.done_upto = None, checkpoint
        if not upstream:
            self.alignments_given_up += 1
        collector = self._collectors[ta.task]
        for task in ta.outputs:
            collector.emit_direct(task, [ABANDON, checkpoint, ta.attempt], stream=BARRIER_STREAM)
        if ta.stateful:  # the coordinator abandons the checkpoint now instead of at its timeout
            collector.emit_direct(
                self._plan.coordinator_task,
                [checkpoint, ta.attempt, ta.task, ALIGNMENT_GIVEN_UP],
                stream=REPORT_STREAM,
            )
        self._release(ta)

    def _release(self, ta: TaskAlignment) -> None:
        held, ta.held = ta.held, []
        self._held_back.release(ta.task)
        if held:
            self._feed(held)

    def _begin_attempt(self, ta: TaskAlignment, checkpoint: int, attempt: int) -> None:
        """Roll the task back to ``checkpoint`` and make ``attempt`` its own."""
        for _task, item in ta.held:  # held tuples are of the attempt that ends
            self._drop(ta, item)
        ta.held, ta.aligning, ta.arrived = [], None, set()
        self._held_back.release(ta.task)
        ta.channel_attempt, ta.restore_error = {}, None
        if ta.stateful:
            try:
                ta.state = self._restore(ta, checkpoint)
            except StateRestoreError as exc:
                ta.restore_error = str(exc)
                log.error("bolt task cannot start attempt %d: %s", attempt, exc)
            else:
                try:
                    ta.bolt.init_state(ta.state)
                except Exception as exc:
                    self._counters.errors += 1
                    log.error("init_state of %s raised %r", ta.key, exc, exc_info=exc)
        # only now: `restoring` (read by other threads) counts the task restored once its
        # attempt is set, and its state must be back by then
        ta.attempt = attempt
        collector = self._collectors[ta.task]
        for task in ta.outputs:
            collector.emit_direct(task, [ROLLBACK, checkpoint, attempt], stream=BARRIER_STREAM)

    def _restore(self, ta: TaskAlignment, checkpoint: int) -> DictState:
        """The task's state in ``checkpoint``; waits (up to the checkpoint timeout) for a store
        that is unavailable: the task cannot go on without its state."""
        if checkpoint == NO_CHECKPOINT:
            return DictState()
        deadline = time.monotonic() + self._plan.settings.timeout_seconds
        while True:
            try:
                started = time.monotonic()
                state = load_part(self._store_now(), ta.key, checkpoint, DictState.restore)
                log.info(
                    "%s: %d keys restored from checkpoint %d in %.3f s",
                    ta.key,
                    len(state),
                    checkpoint,
                    time.monotonic() - started,
                )
                return state
            except StoreUnavailable as exc:
                if time.monotonic() >= deadline:
                    raise StateRestoreError(f"{ta.key}: checkpoint {checkpoint} unreadable: {exc}") from exc
                self._errors.log(
                    "%s: waiting for the state store to restore checkpoint %d: %s", ta.key, checkpoint, exc
                )
                time.sleep(0.5)  # deliberate: nothing can run on this task until its state is back

    def _store_now(self) -> StateStore:
        if self._store is None:
            self._store = open_store(self._conf)
        return self._store


def _not_wrapped(items: list[Item]) -> None:
    raise RuntimeError("AlignedInput runs only once wrap() gave it the executor's handling")
