"""`AckerMailbox`: an executor's inits, acks and fails, batched per acker task until a flush."""

from __future__ import annotations

from tuplemesh.acking.acker import ACKING_STREAM
from tuplemesh.core.outbox import Outbox
from tuplemesh.topology import Fields

__all__ = ["AckerMailbox"]

#: One open box per acker task: flat lists [root, value, spout task]*, [root, value]*, [root]*.
Box = tuple[list[int], list[int], list[int]]


class AckerMailbox:
    """An executor's pending messages to ackers, one box ``[inits, acks, fails]`` per acker task.

    Boxes go out as one ``__acking`` tuple each when the executor flushes its Outbox (the Outbox
    calls ``post`` first), or as soon as a box holds ``limit`` entries of one kind. While a box is
    open it counts as one tuple in ``outbox.pending``, so the flush timer and idle checks see it.
    Executor thread only.
    """

    def __init__(
        self, outbox: Outbox, task: int, component: str, stream_id: int, fields: Fields, limit: int = 256
    ) -> None:
        self._outbox = outbox
        self._task = task  # any task of the executor: ackers do not look at the source
        self._component = component
        self._stream_id = stream_id
        self._fields = fields
        self._limit = limit
        self._boxes: dict[int, Box] = {}
        outbox.before_flush = self.post

    def _box(self, acker: int) -> Box:
        box = self._boxes.get(acker)
        if box is None:
            box = self._boxes[acker] = ([], [], [])
            self._outbox.pending += 1
        return box

    def init(self, acker: int, root: int, value: int, spout_task: int) -> None:
        box = self._boxes.get(acker) or self._box(acker)
        inits = box[0]
        inits += (root, value, spout_task)
        if len(inits) >= 3 * self._limit:
            self._post_one(acker)

    def ack(self, acker: int, root: int, value: int) -> None:
        box = self._boxes.get(acker) or self._box(acker)
        acks = box[1]
        acks += (root, value)
        if len(acks) >= 2 * self._limit:
            self._post_one(acker)

    def fail(self, acker: int, root: int) -> None:
        self._box(acker)[2].append(root)

    def _post_one(self, acker: int) -> None:
        box = self._boxes.pop(acker)
        self._outbox.pending -= 1
        self._deliver(acker, box)

    def post(self) -> None:
        """Hand every open box to the Outbox (called by ``Outbox.flush`` before it flushes)."""
        boxes, self._boxes = self._boxes, {}
        self._outbox.pending -= len(boxes)
        for acker, box in boxes.items():
            self._deliver(acker, box)

    def _deliver(self, acker: int, box: Box) -> None:
        self._outbox.deliver_one(
            acker, self._task, self._component, ACKING_STREAM, self._stream_id, self._fields, box, None
        )
