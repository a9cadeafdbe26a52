"""`CheckpointedSpout`: what every spout of a checkpointed topology runs inside.

It wraps the user's spout: it emits nothing until the coordinator has said which checkpoint
the mesh starts from (and a `ReplayableSpout` has rewound to its position there), stores the
spout's position and emits the barrier when a checkpoint starts, emits the rollback marker
when an attempt begins, and hands a `ReplayableSpout` the position of each checkpoint that
commits (``committed``). Everything else is the user's spout, called as is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from tuplemesh.errors import SerializationError
from tuplemesh.logutil import RateLimitedLog
from tuplemesh.state.base import PartKey, StateRestoreError, StateStore, StoreUnavailable
from tuplemesh.state.codec import decode_value, encode_value
from tuplemesh.state.components import ReplayableSpout
from tuplemesh.state.parts import load_part
from tuplemesh.state.protocol import (
    BARRIER,
    BARRIER_STREAM,
    COMMIT,
    NO_CHECKPOINT,
    REPORT_STREAM,
    ROLLBACK,
    TRIGGER,
    CheckpointPlan,
)
from tuplemesh.state.stores import open_store
from tuplemesh.topology.components import OutputFieldsDeclarer, Spout, SpoutCollector, TaskContext
from tuplemesh.topology.tuple import Tuple

__all__ = ["CheckpointedSpout"]

log = logging.getLogger(__name__)

_RETRY_SECONDS = 1.0  # between attempts to rewind while the store is unavailable or the part bad


class CheckpointedSpout(Spout):
    """A user spout inside the checkpoint protocol (see the module docstring)."""

    def __init__(self, spout: Spout) -> None:
        self.spout = spout
        self.replayable = isinstance(spout, ReplayableSpout)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        self.spout.declare_output_fields(declarer)

    def open(self, conf: Mapping[str, Any], context: TaskContext, collector: SpoutCollector) -> None:
        plan = CheckpointPlan.for_task(context, conf)
        self._conf = conf
        self._collector = collector
        self._task = context.task_id
        self._key = PartKey(plan.topology, context.component_id, context.task_id)
        self._downstream = plan.outputs_of.get(context.task_id, ())
        self._coordinator = plan.coordinator_task
        self._store: StateStore | None = None
        self._errors = RateLimitedLog(log, plan.settings.log_interval_seconds, logging.ERROR)
        self.attempt = 0  # the attempt this task emits in; 0 until the coordinator's first rollback
        self.ready = False  # positioned for ``attempt``: next_tuple may run
        self._wanted: tuple[int, int] | None = None  # (checkpoint, attempt) a failed rewind retries
        self._retry_at = 0.0
        self.checkpoints = 0  # parts stored
        self._positions: dict[int, Any] = {}  # checkpoint -> position stored, until it commits
        self.failed_parts = 0
        self.restore_error: str | None = None
        self.spout.open(conf, context, collector)

    # -- the protocol -----------------------------------------------------------------------
    def on_system_message(self, tup: Tuple) -> bool:
        """A coordinator message (`tuplemesh.core.feature.ControlledSpout`); True when a rollback
        began: the spout was rewound, or will retry the rewind from ``next_tuple``, so its
        executor must call it again."""
        kind, checkpoint, attempt = tup.values
        if kind == ROLLBACK:
            return self._roll_back(checkpoint, attempt)
        if kind == TRIGGER:
            self._checkpoint(checkpoint, attempt)
        elif kind == COMMIT:
            self._committed(checkpoint, attempt)
        return False

    def _store_now(self) -> StateStore:
        if self._store is None:
            self._store = open_store(self._conf)
        return self._store

    def _roll_back(self, checkpoint: int, attempt: int) -> bool:
        if attempt <= self.attempt and (self._wanted is None or attempt < self._wanted[1]):
            return False  # an attempt this task already began, or an older one
        self.ready = False  # nothing of the old attempt may be emitted from here on
        self._wanted = (checkpoint, attempt)
        try:
            if self.replayable and checkpoint != NO_CHECKPOINT:
                position = load_part(self._store_now(), self._key, checkpoint, decode_value)
            else:
                position = None
            if self.replayable:
                self.spout.rewind(position)  # type: ignore[attr-defined]
        except (StoreUnavailable, StateRestoreError) as exc:
            self.restore_error = str(exc)
            self._errors.log("spout %s cannot rewind to checkpoint %d: %s", self._key, checkpoint, exc)
            self._retry_at = time.monotonic() + _RETRY_SECONDS
            return True
        self.attempt, self.ready, self._wanted, self.restore_error = attempt, True, None, None
        self._positions.clear()  # checkpoints of the attempt that ended never commit
        for task in self._downstream:
            self._collector.emit_direct(task, [ROLLBACK, checkpoint, attempt], stream=BARRIER_STREAM)
        return True

    def _checkpoint(self, checkpoint: int, attempt: int) -> None:
        if attempt != self.attempt or not self.ready:
            return  # a trigger of an earlier attempt
        stored = True
        try:
            position = self.spout.position() if self.replayable else None  # type: ignore[attr-defined]
            self._store_now().put_part(self._key, checkpoint, encode_value(position))
            self.checkpoints += 1
            if self.replayable:
                self._positions[checkpoint] = position
        except (StoreUnavailable, SerializationError) as exc:
            stored = False
            self.failed_parts += 1
            self._errors.log(
                "spout %s: position for checkpoint %d not stored: %s", self._key, checkpoint, exc
            )
        for task in self._downstream:
            self._collector.emit_direct(task, [BARRIER, checkpoint, attempt], stream=BARRIER_STREAM)
        self._collector.emit_direct(
            self._coordinator, [checkpoint, attempt, self._task, stored], stream=REPORT_STREAM
        )

    def _committed(self, checkpoint: int, attempt: int) -> None:
        if attempt != self.attempt or checkpoint not in self._positions:
            return  # of an earlier attempt, or a part this task did not store
        position = self._positions.pop(checkpoint)
        for older in [n for n in self._positions if n < checkpoint]:
            del self._positions[older]  # abandoned: never committed
        try:
            self.spout.committed(position)  # type: ignore[attr-defined]
        except Exception as exc:  # user code: its errors must not stop the protocol
            self._errors.log("spout %s: committed(%r) raised %r", self._key, position, exc)

    # -- the user's spout -------------------------------------------------------------------
    def next_tuple(self) -> None:
        if self.ready:
            self.spout.next_tuple()
        elif self._wanted is not None and time.monotonic() >= self._retry_at:
            self._roll_back(*self._wanted)

    def is_finished(self) -> bool:
        return self.ready and self.spout.is_finished()

    def pending(self) -> int:
        return self.spout.pending()

    def ack(self, msg_id: Any) -> None:
        self.spout.ack(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.spout.fail(msg_id)

    def close(self) -> None:
        try:
            self.spout.close()
        finally:
            if self._store is not None:
                self._store.close()

    def report(self) -> Any:
        return self.spout.report()
