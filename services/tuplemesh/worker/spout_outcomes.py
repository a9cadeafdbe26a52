"""`SpoutOutcomes`: how a spout executor learns what became of the tuple trees its tasks started,
and tells each spout (Storm's ``ack`` and ``fail``): an acker's verdicts, trees that completed
at once (nothing anchored to them), and trees past ``topology.message.timeout.secs``, all kept by
the executor's `SpoutTracker`. Executor thread only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuplemesh.core.tracker import SpoutTracker
from tuplemesh.topology import Spout
from tuplemesh.worker.user_code import UserCode

__all__ = ["SpoutOutcomes"]


class SpoutOutcomes:
    """Ack and fail calls for one spout executor's tasks, counted in its ``counters``."""

    def __init__(
        self, tracker: SpoutTracker, spouts: Mapping[int, Spout], counters: Any, user_code: UserCode
    ) -> None:
        self._tracker = tracker
        self._spouts = spouts
        self._counters = counters
        self._user_code = user_code

    def on_verdict(self, acked: Sequence[Any], failed: Sequence[Any]) -> None:
        """An acker's verdict (the roots it acked, those it failed): call the spouts' ack and fail."""
        finish = self._tracker.finish
        for outcome, roots in ((True, acked), (False, failed)):
            for root in roots:
                entry = finish(root)
                if entry is None:
                    continue  # the tree timed out before the verdict came, and was failed then
                self.tell(*entry, acked=outcome)

    def settle(self, now: float) -> None:
        """Ack what completed without a tree and fail trees past their timeout."""
        tracker = self._tracker
        if tracker.acked_at_once:
            done, tracker.acked_at_once = tracker.acked_at_once, []
            for task, msg_id in done:
                self.tell(task, msg_id, acked=True)
        if len(tracker):
            for task, msg_id in tracker.expired(now):
                self._counters.timed_out += 1
                self.tell(task, msg_id, acked=False)

    def tell(self, task: int, msg_id: Any, acked: bool) -> None:
        """Count and call the spout's ``ack`` or ``fail`` for one message id."""
        if acked:
            self._counters.acked += 1
            self._user_code.call("ack", task, self._spouts[task].ack, msg_id)
        else:
            self._counters.failed += 1
            self._user_code.call("fail", task, self._spouts[task].fail, msg_id)
