"""`HeldBack`: the tasks of a worker that hold tuples back outside their inbox right now.

A bolt task aligning checkpoint barriers (`tuplemesh.state.alignment`) keeps the tuples of the
inputs whose barrier already came in memory until the others' barriers come. Those tuples cost
it nothing to take (they are only set aside), so its inbox drains and it looks idle: a
load-aware shuffle (`tuplemesh.core.target_load`) would then send it more of exactly what it
sets aside, until it holds its alignment bound and gives the checkpoint up. Flink's aligned
barriers block the channel instead, which backpressures its sender; here the task is marked,
and a load-aware shuffle in its worker leaves it out until it holds nothing again.

The mark also names the inputs whose barrier the task has (`closed`). An executor of the same
worker about to emit to it waits while every one of its own tasks that feeds it is among
those: what it would send is only set aside, and it has passed that barrier on already. That is
Flink's blocked channel, per emitting thread: an executor one of whose tasks still owes the
barrier never waits on it (the barrier may be behind in its own inbox), so along the barriers'
paths the wait never keeps the alignment from completing. Through what carries no barriers (a
spout waiting while its ackers fill its inbox, a cycle in the topology) it could: that is why
every wait ends after `LEAVE_OUT_SECONDS` too.

A task counts as holding back for `LEAVE_OUT_SECONDS` at most: an alignment that takes longer
(an input whose barriers never come) must not keep it out of its worker's shuffles for good.

Written by executor threads (each for its own tasks), read by any emitting thread: a dict's
set, pop and get are each atomic, and a stale read only delays a choice by one look.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from tuplemesh.core.congestion import HoldCounts, hold_while

__all__ = ["LEAVE_OUT_SECONDS", "HeldBack"]

#: The longest a task counts as holding back from when it set its first tuple aside. Alignments
#: at full load took 0.01-0.7 s when measured (2 workers, checkpoint interval 1 s); past this
#: one is stuck, and the task takes tuples as any other again (up to its alignment bound).
LEAVE_OUT_SECONDS = 1.0

#: Between two looks while an emitter waits on a task that sets its input aside.
_LOOK_SECONDS = 0.0005


class HeldBack:
    """The worker's tasks that hold tuples back (``since``: task -> when it began, monotonic;
    ``closed``: task -> (its inputs whose barrier it has, all its inputs))."""

    __slots__ = ("closed", "since")

    def __init__(self) -> None:
        self.since: dict[int, float] = {}
        self.closed: dict[int, tuple[frozenset[int], frozenset[int]]] = {}

    def hold(
        self, task: int, barriered: frozenset[int] = frozenset(), inputs: frozenset[int] = frozenset()
    ) -> None:
        """``task`` set its first tuple aside: it has the barrier of ``barriered``, of ``inputs``."""
        self.since[task] = time.monotonic()
        self.closed[task] = (barriered, inputs)

    def barriered(self, task: int, barriered: frozenset[int], inputs: frozenset[int]) -> None:
        """One more input's barrier reached ``task`` while it holds tuples back."""
        if task in self.since:
            self.closed[task] = (barriered, inputs)

    def release(self, task: int) -> None:
        self.closed.pop(task, None)
        self.since.pop(task, None)

    def closed_to(self, task: int, sources: frozenset[int], now: float) -> bool:
        """Whether an executor running ``sources`` waits before it emits to ``task``: it holds
        back, and has the barrier of every one of ``sources`` that feeds it (at least one)."""
        entry = self.closed.get(task)
        if entry is None or task in sources or not self.holding(task, now):
            return False
        barriered, inputs = entry
        feeding = sources & inputs
        return bool(feeding) and feeding <= barriered

    def wait_open(
        self,
        task: int,
        sources: frozenset[int],
        counts: HoldCounts,
        interrupt: Callable[[], bool] | None = None,
    ) -> None:
        """Wait while ``task`` is closed to ``sources`` (`closed_to`): until it completes or gives
        its alignment up, holds past `LEAVE_OUT_SECONDS`, or ``interrupt`` returns True. Counted
        in ``counts`` as a hold, with its time added as it goes."""
        hold_while(lambda now: self.closed_to(task, sources, now), _LOOK_SECONDS, counts, interrupt)

    def holding(self, task: int, now: float) -> bool:
        """Whether ``task`` counts as holding back at ``now`` (monotonic)."""
        began = self.since.get(task)
        return began is not None and now - began < LEAVE_OUT_SECONDS

    def holding_any(self, tasks: Iterable[int], now: float) -> bool:
        """Whether one of ``tasks`` counts as holding back at ``now`` (monotonic)."""
        return any(self.holding(task, now) for task in tasks)
