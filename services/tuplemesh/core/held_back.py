"""`HeldBack`: the tasks of a worker that hold tuples back outside their inbox right now.

A bolt task aligning checkpoint barriers (`tuplemesh.state.alignment`) keeps the tuples of the
inputs whose barrier already came in memory until the others' barriers come. Those tuples cost
it nothing to take (they are only set aside), so its inbox drains and it looks idle: a
load-aware shuffle (`tuplemesh.core.target_load`) would then send it more of exactly what it
sets aside, until it holds its alignment bound and gives the checkpoint up. Flink's aligned
barriers block the channel instead, which backpressures its sender; here the task is marked,
and a load-aware shuffle in its worker leaves it out until it holds nothing again.

A task counts as holding back for `LEAVE_OUT_SECONDS` at most: an alignment that takes longer
(an input whose barriers never come) must not keep it out of its worker's shuffles for good.

Written by executor threads (each for its own tasks), read by any emitting thread: a dict's
set, pop and get are each atomic, and a stale read only delays a choice by one look.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

__all__ = ["LEAVE_OUT_SECONDS", "HeldBack"]

#: The longest a task counts as holding back from when it set its first tuple aside. Alignments
#: at full load took 0.01-0.7 s when measured (2 workers, checkpoint interval 1 s); past this
#: one is stuck, and the task takes tuples as any other again (up to its alignment bound).
LEAVE_OUT_SECONDS = 1.0


class HeldBack:
    """The worker's tasks that hold tuples back (``since``: task -> when it began, monotonic)."""

    __slots__ = ("since",)

    def __init__(self) -> None:
        self.since: dict[int, float] = {}

    def hold(self, task: int) -> None:
        self.since[task] = time.monotonic()

    def release(self, task: int) -> None:
        self.since.pop(task, None)

    def holding(self, task: int, now: float) -> bool:
        """Whether ``task`` counts as holding back at ``now`` (monotonic)."""
        began = self.since.get(task)
        return began is not None and now - began < LEAVE_OUT_SECONDS

    def holding_any(self, tasks: Iterable[int], now: float) -> bool:
        """Whether one of ``tasks`` counts as holding back at ``now`` (monotonic)."""
        return any(self.holding(task, now) for task in tasks)
