"""Load-aware shuffle in a worker: what `LoadAwareShuffle` reads about its target tasks.

Storm 2 routes shuffle grouping by its targets' load (``LoadAwareShuffleGrouping``; off with
``topology.disable.loadaware.messaging``). Here a target task is loaded by the same rule that
reports a task congested to other workers (`tuplemesh.core.congestion`): in the emitting
worker, its executor's inbox is fuller than ``topology.backpressure.watermark`` of the slots
its queue time lets producers fill; in another worker, its peer reports it so on Transfer acks.
The half of the limit left above the watermark takes the partial batches emitters still hold
for a task when it is left out, so leaving a task out never makes an emitter wait on it.

A task in its emitter's worker that holds tuples back outside its inbox (`HeldBack`: a bolt
aligning checkpoint barriers) is loaded too, however empty its inbox: what it is sent then is
set aside until the alignment ends, and flooding it would only make it give the checkpoint up
(for `tuplemesh.core.held_back.LEAVE_OUT_SECONDS` at most).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from tuplemesh.core.congestion import CongestionMap, above_watermark
from tuplemesh.core.held_back import HeldBack
from tuplemesh.disruptor import RingBuffer
from tuplemesh.topology.groupings import REVIEW_ROWS, LoadAwareShuffle, TaskChooser

__all__ = ["TargetLoad"]


class _NoReports:
    """The reports of a worker that takes none (backpressure off): nothing is ever congested."""

    blocked: Mapping[int, float] = {}


class TargetLoad:
    """A worker's view of the load of shuffle targets (`TargetProbe`): the inboxes of its own
    tasks, the congestion reports of the others'. One per executor, shared by its choosers."""

    __slots__ = ("_held", "_ring_of", "_watermark", "reports", "review_rows")

    def __init__(
        self,
        ring_of: Mapping[int, RingBuffer[Any]],
        congestion: CongestionMap | None,
        watermark: float,
        batch_tuples: int = REVIEW_ROWS,
        held_back: HeldBack | None = None,
    ) -> None:
        """``batch_tuples``: the emitters' batch per destination (``topology.producer.batch.size``);
        ``held_back``: the worker's tasks that set tuples aside (a task there is left out too)."""
        self._ring_of = ring_of
        self._held = held_back if held_back is not None else HeldBack()
        self._watermark = watermark
        #: a look at least once per emit batch: a task left out then gets at most one more
        #: partial batch, which the room above the watermark takes without a wait
        self.review_rows = max(1, min(REVIEW_ROWS, batch_tuples))
        #: the other workers' congestion reports (`CongestionReports`)
        self.reports: CongestionMap | _NoReports = congestion if congestion is not None else _NoReports()

    def shuffle(self, target_tasks: Sequence[int]) -> TaskChooser | None:
        """A load-aware chooser over ``target_tasks`` for one emitting task; None for a single
        task (nothing to choose: the grouping's own chooser does the same)."""
        if len(target_tasks) < 2:
            return None
        return LoadAwareShuffle(target_tasks, self)

    def with_room(self, choices: list[tuple[int]]) -> list[tuple[int]]:
        ring_of = self._ring_of
        watermark = self._watermark
        choices = self.not_holding(choices)
        blocked = self.reports.blocked
        now = 0.0
        out: list[tuple[int]] = []
        for choice in choices:
            task = choice[0]
            ring = ring_of.get(task)
            if ring is not None:
                if above_watermark(ring, watermark):
                    continue
            elif blocked:
                until = blocked.get(task)
                if until is not None:
                    if not now:
                        now = time.monotonic()
                    if until > now:
                        continue
            out.append(choice)
        return out

    def not_holding(self, choices: list[tuple[int]]) -> list[tuple[int]]:
        held = self._held
        if not held.since:
            return choices
        now = time.monotonic()
        return [choice for choice in choices if not held.holding(choice[0], now)]
