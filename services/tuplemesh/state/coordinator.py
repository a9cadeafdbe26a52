"""`CoordinatorBolt`: starts checkpoints, commits complete ones, and starts rollbacks.

One task per topology (``__checkpoint``), driven by ticks its worker puts into its inbox
(`tuplemesh.state.ticker`) and by the reports of the tasks that store parts. Per tick:

- a new *attempt* in the store (a worker process started and counted itself in) means the
  mesh must roll back: every spout task gets ``[ROLLBACK, c, attempt]`` with ``c`` the last
  committed checkpoint, decided here once per attempt, so every task restores the same one;
- otherwise, once the interval has passed since the last checkpoint ended, checkpoint ``n``
  (a store counter, so numbers never repeat across restarts) starts: every spout task gets
  ``[TRIGGER, n, attempt]``;
- a checkpoint older than the timeout is abandoned;
- a tick that asks for a checkpoint (``[CHECKPOINT_NOW]``, from a stopping or rescaling mesh)
  starts one at once, or, with one under way, as soon as that one ends: the caller waits for a
  checkpoint that began after its request (`tuplemesh.state.on_demand`).

Checkpoint ``n`` is committed when every spout task and every stateful bolt task reported its
part of ``n`` stored, in the current attempt; older parts are then pruned, and each of those
tasks gets ``[COMMIT, n, attempt]``. A part that could not
be stored (`StoreUnavailable`) abandons ``n``; the next interval tries again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from tuplemesh.core.stats import CheckpointSnapshot
from tuplemesh.logutil import RateLimitedLog
from tuplemesh.state.base import StateStore, StoreUnavailable
from tuplemesh.state.locations import log_resume
from tuplemesh.state.protocol import (
    ALIGNMENT_GIVEN_UP,
    CHECKPOINT_NOW,
    COMMIT,
    CONTROL_STREAM,
    NO_CHECKPOINT,
    REPORT_STREAM,
    ROLLBACK,
    TICK_STREAM,
    TRIGGER,
    CheckpointPlan,
)
from tuplemesh.state.stores import open_store
from tuplemesh.topology.components import Bolt, BoltCollector, TaskContext
from tuplemesh.topology.tuple import Tuple

__all__ = ["ATTEMPT_COUNTER", "CHECKPOINT_COUNTER", "CoordinatorBolt", "register_attempt"]

log = logging.getLogger(__name__)

#: store counters, per topology: worker process starts, and checkpoint numbers handed out
ATTEMPT_COUNTER = "attempt"
CHECKPOINT_COUNTER = "checkpoint"


def register_attempt(conf: Mapping[str, Any], topology: str) -> int:
    """Count a worker process start in the store: the coordinator rolls the mesh back to the last
    committed checkpoint when it sees a new attempt. Retries while the store is unavailable.
    Logs where that checkpoint is kept when the store holds one (a resume)."""
    store = open_store(conf)
    try:
        attempt = store.increment(topology, ATTEMPT_COUNTER)
        log_resume(store, topology, attempt)
        return attempt
    finally:
        store.close()


class CoordinatorBolt(Bolt):
    """The checkpoint coordinator (see the module docstring). One task."""

    def __init__(self, spouts: tuple[str, ...], reporters: tuple[str, ...]) -> None:
        self.spouts = spouts
        self.reporters = reporters
        # counts, read by the worker's snapshot from any time on (before prepare too)
        self.attempt = 0
        self.restored_from = NO_CHECKPOINT
        self.committed = 0
        self.last_committed = NO_CHECKPOINT
        self.last_duration = 0.0  # seconds from trigger to commit of the last committed one
        self.abandoned = 0  # timed out, a task could not store its part, or gave up aligning
        self.alignments_given_up = 0  # of those abandoned: a task held back too many tuples
        self.store_errors = 0
        self.rollbacks = 0

    def prepare(self, conf: Mapping[str, Any], context: TaskContext, collector: BoltCollector) -> None:
        self._collector = collector
        self._conf = conf
        plan = CheckpointPlan.for_task(context, conf)
        self._settings = plan.settings
        self._topology = plan.topology
        self._spout_tasks = [t for name in self.spouts for t in context.tasks_of(name)]
        self._expected = frozenset(t for name in self.reporters for t in context.tasks_of(name))
        self._store: StateStore | None = None
        interval = plan.settings.log_interval_seconds
        self._errors = RateLimitedLog(log, interval, logging.ERROR)
        self._warnings = RateLimitedLog(log, interval, logging.WARNING)
        self._pending: int | None = None  # the checkpoint under way
        self._pending_since = 0.0
        self._stored: set[int] = set()
        self._next_start = 0.0  # monotonic time the next checkpoint may start
        self._asked = False  # a checkpoint was asked for and has not started yet

    def execute(self, tup: Tuple) -> None:
        stream = tup.source_stream
        try:
            if stream == TICK_STREAM:
                if tup.values and tup.values[0] == CHECKPOINT_NOW:
                    self._asked = True
                self._tick(time.monotonic())
            elif stream == REPORT_STREAM:
                checkpoint, attempt, task, stored = tup.values
                self._on_report(checkpoint, attempt, task, stored)
            else:
                log.error("checkpoint coordinator: unexpected tuple %r", tup)
        except StoreUnavailable as exc:
            self.store_errors += 1
            self._errors.log(
                "checkpoint coordinator of topology %r: state store unavailable: %s", self._topology, exc
            )
            if self._pending is not None:
                self._abandon("the store is unavailable")

    def _store_now(self) -> StateStore:
        if self._store is None:
            self._store = open_store(self._conf)
        return self._store

    def _tick(self, now: float) -> None:
        store = self._store_now()
        attempt = store.counter(self._topology, ATTEMPT_COUNTER)
        if attempt > self.attempt:
            self._roll_back(store, attempt, now)
            if not self._asked:
                return
            # Asked for: a mesh stopping right after it started, whose clock is already paused,
            # so this tick may be the only one. The checkpoint starts now, its triggers behind
            # the rollbacks on every spout's control stream (waiting for a next tick would wait
            # for ever, and the stop with it).
        if self._pending is not None:
            if now - self._pending_since > self._settings.timeout_seconds:
                self._abandon(f"not complete after {self._settings.timeout_seconds:g} s")
            return
        if (now >= self._next_start or self._asked) and self.attempt:
            self._asked = False
            checkpoint = store.increment(self._topology, CHECKPOINT_COUNTER)
            self._pending, self._pending_since, self._stored = checkpoint, now, set()
            for task in self._spout_tasks:
                self._collector.emit_direct(task, [TRIGGER, checkpoint, self.attempt], stream=CONTROL_STREAM)

    def _roll_back(self, store: StateStore, attempt: int, now: float) -> None:
        last = store.last_committed(self._topology)
        restore = NO_CHECKPOINT if last is None else last
        # what the store holds is what counts as committed, also for a coordinator that just
        # started (a restart, a rescale) and has committed nothing itself yet
        self.last_committed = max(self.last_committed, restore)
        log.warning(
            "topology %r: attempt %d begins; every task resumes from checkpoint %s",
            self._topology,
            attempt,
            "none (the beginning)" if last is None else last,
        )
        self.attempt, self.restored_from = attempt, restore
        self.rollbacks += 1
        self._pending = None
        self._next_start = now + self._settings.interval_seconds
        for task in self._spout_tasks:
            self._collector.emit_direct(task, [ROLLBACK, restore, attempt], stream=CONTROL_STREAM)

    def _on_report(self, checkpoint: int, attempt: int, task: int, stored: bool) -> None:
        if checkpoint != self._pending or attempt != self.attempt:
            return  # from an abandoned checkpoint or an earlier attempt
        if stored is ALIGNMENT_GIVEN_UP:
            self.alignments_given_up += 1
            self._abandon(
                f"task {task} gave up aligning, or a task upstream of it did: one held back more "
                f"than {self._settings.alignment_buffer} tuples waiting for this checkpoint's "
                "barriers from its other inputs. Not a store error: the task processes on and the next "
                "checkpoint follows. If this repeats, raise topology.state.alignment.buffer.size "
                "(memory per task) or look for the input that lags behind (its barriers come late)",
                logging.WARNING,
            )
            return
        if not stored:
            self._abandon(f"task {task} could not store its part in the state store")
            return
        self._stored.add(task)
        if self._stored >= self._expected:
            store = self._store_now()
            store.commit(self._topology, checkpoint)
            store.prune(self._topology, checkpoint)
            now = time.monotonic()
            self.committed += 1
            self.last_committed = checkpoint
            self.last_duration = now - self._pending_since
            self._pending = None
            self._next_start = now + self._settings.interval_seconds
            for reporter in sorted(self._expected):
                self._collector.emit_direct(
                    reporter, [COMMIT, checkpoint, self.attempt], stream=CONTROL_STREAM
                )
            self._next_start = time.monotonic() + self._settings.interval_seconds
            if self._asked:  # asked for while this one ran: the next starts now, not at a tick
                self._tick(time.monotonic())

    def _abandon(self, why: str, level: int = logging.ERROR) -> None:
        errors = self._warnings if level == logging.WARNING else self._errors
        errors.log("topology %r: checkpoint %s abandoned: %s", self._topology, self._pending, why)
        self.abandoned += 1
        self._pending = None
        self._next_start = time.monotonic() + self._settings.interval_seconds

    def cleanup(self) -> None:
        if self._store is not None:
            self._store.close()

    def snapshot(self) -> CheckpointSnapshot:
        """Its counts now, for metrics and Admin. Any thread: each is one read of an int."""
        return CheckpointSnapshot(
            attempt=self.attempt,
            rollbacks=self.rollbacks,
            committed=self.committed,
            abandoned=self.abandoned,
            store_errors=self.store_errors,
            last_committed=self.last_committed,
            last_duration_seconds=self.last_duration,
        )

    def report(self) -> Any:
        return {
            "attempt": self.attempt,
            "restored_from": self.restored_from,
            "committed": self.committed,
            "last_committed": self.last_committed,
            "last_duration_seconds": self.last_duration,
            "abandoned": self.abandoned,
            "abandoned_alignments": self.alignments_given_up,
            "store_errors": self.store_errors,
            "rollbacks": self.rollbacks,
        }
