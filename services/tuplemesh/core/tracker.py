"""`SpoutTracker`: a spout executor's tuple trees in flight, their timeouts and completions.

The spout side of guaranteed processing: which message id each root id stands for, which task
emitted it, and when it times out (``topology.message.timeout.secs``). It also bounds how many
trees each task may have open (``topology.max.spout.pending``). Executor thread only.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["SpoutTracker"]


class SpoutTracker:
    """Open tuple trees of one spout executor, oldest first."""

    def __init__(self, timeout_secs: float, max_pending: int) -> None:
        self.timeout = timeout_secs
        self.max_pending = max_pending  # per task; 0 means no limit
        # root -> (task, msg_id, deadline). Insertion order is emit order, so expiry stops at
        # the first tree that is still young (all timeouts are equal).
        self._open: dict[int, tuple[int, Any, float]] = {}
        self._open_per_task: dict[int, int] = {}
        #: (task, msg_id) completed without a tree (acking off, or no subscriber): ack them next.
        self.acked_at_once: list[tuple[int, Any]] = []

    def __len__(self) -> int:
        return len(self._open)

    def track(self, root: int, task: int, msg_id: Any) -> None:
        self._open[root] = (task, msg_id, time.monotonic() + self.timeout)
        self._open_per_task[task] = self._open_per_task.get(task, 0) + 1

    def completed_at_once(self, task: int, msg_id: Any) -> None:
        self.acked_at_once.append((task, msg_id))

    def finish(self, root: int) -> tuple[int, Any] | None:
        """(task, msg_id) of an open tree, now closed; None for a root not open (timed out)."""
        entry = self._open.pop(root, None)
        if entry is None:
            return None
        self._open_per_task[entry[0]] -= 1
        return entry[0], entry[1]

    def expired(self, now: float) -> list[tuple[int, Any]]:
        """Close and return (task, msg_id) of every tree past its deadline."""
        out = []
        opened = self._open
        while opened:
            root, (task, msg_id, deadline) = next(iter(opened.items()))
            if deadline > now:
                break
            del opened[root]
            self._open_per_task[task] -= 1
            out.append((task, msg_id))
        return out

    def may_emit(self, task: int) -> bool:
        """False while ``task`` has ``max_pending`` trees open (Storm's max spout pending)."""
        return not self.max_pending or self._open_per_task.get(task, 0) < self.max_pending
