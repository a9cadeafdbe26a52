"""`HeldBack`: the tasks of a worker that hold tuples back outside their inbox right now.

A bolt task aligning checkpoint barriers (`tuplemesh.state.alignment`) keeps the tuples of the
inputs whose barrier already came in memory until the others' barriers come. Those tuples cost
it nothing to take (they are only set aside), so its inbox drains and it looks idle: a
load-aware shuffle (`tuplemesh.core.target_load`) would then send it more of exactly what it
sets aside, until it holds its alignment bound and gives the checkpoint up. Flink's aligned
barriers block the channel instead, which backpressures its sender; here the task is marked,
and a load-aware shuffle in its worker leaves it out until it holds nothing again.

Written by executor threads (each for its own tasks), read by any emitting thread: a set's add,
discard and ``in`` are each atomic, and a stale read only delays a choice by one look.
"""

from __future__ import annotations

__all__ = ["HeldBack"]


class HeldBack:
    """The worker's tasks that hold tuples back (``tasks``)."""

    __slots__ = ("tasks",)

    def __init__(self) -> None:
        self.tasks: set[int] = set()

    def hold(self, task: int) -> None:
        self.tasks.add(task)

    def release(self, task: int) -> None:
        self.tasks.discard(task)
