"""`WatermarkTracker`: a task's event-time watermark, the minimum over its input tasks.

Each input task (a channel) has its own watermark: the newest timestamp it sent minus the lag,
or the watermark it sent itself (an upstream windowed bolt broadcasts its own), whichever is
later. The task's watermark is the minimum over its channels, and never goes back: a tuple
older than it is late. A channel that has sent nothing holds the watermark back, unless it has
been idle past the spec's ``idle_timeout`` (then it counts again from its next tuple).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["WatermarkTracker"]


class WatermarkTracker:
    """Executor thread only."""

    def __init__(self, channels: Iterable[int], lag: float) -> None:
        self.channels = frozenset(channels)
        self.lag = lag
        self.marks: dict[int, float] = {}  # channel -> its watermark
        self.idle: set[int] = set()  # channels left out of the minimum until they send again
        self.watermark: float | None = None
        self._floor: float | None = None  # the minimum over counted channels (may lag behind)

    def on_timestamp(self, channel: int, timestamp: float) -> bool:
        """A data tuple's event time from ``channel``; True when the watermark advanced."""
        mark = timestamp - self.lag
        current = self.marks.get(channel)
        if current is None or self.idle:
            return self.on_watermark(channel, mark)
        if mark <= current:
            return False  # not newer than what the channel sent before
        self.marks[channel] = mark
        floor = self._floor
        if floor is None or current <= floor:  # this channel held the minimum
            return self._recompute()
        return False

    def on_watermark(self, channel: int, mark: float) -> bool:
        """``channel`` will send nothing older than ``mark``; True when the watermark advanced."""
        if channel in self.idle:
            self.idle.discard(channel)
        current = self.marks.get(channel)
        if current is not None and mark <= current:
            return False
        if channel not in self.channels:
            return False  # not an input (Admin.Emit): it carries no promise
        self.marks[channel] = mark
        if current is not None and self._floor is not None and current > self._floor:
            return False  # the minimum is held by another channel
        return self._recompute()

    def mark_idle(self, channels: Iterable[int]) -> bool:
        """Leave ``channels`` out of the minimum until they send again; True when it advanced."""
        self.idle.update(c for c in channels if c in self.channels)
        return self._recompute()

    def _recompute(self) -> bool:
        if len(self.channels) == 1 and not self.idle:  # one input task: its mark is the minimum
            (only,) = self.channels
            floor_of_one = self.marks.get(only)
            self._floor = floor_of_one
            if floor_of_one is not None and (self.watermark is None or floor_of_one > self.watermark):
                self.watermark = floor_of_one
                return True
            return False
        counted = [self.marks.get(c) for c in self.channels if c not in self.idle]
        if not counted or any(m is None for m in counted):
            self._floor = None
            return False
        floor = min(m for m in counted if m is not None)
        self._floor = floor
        if self.watermark is None or floor > self.watermark:
            self.watermark = floor
            return True
        return False

    def export(self) -> list[object]:
        return [self.watermark, sorted(self.marks.items())]

    def restore(self, exported: list[object]) -> None:
        watermark, marks = exported
        self.watermark = watermark  # type: ignore[assignment]
        self.marks = {int(c): float(m) for c, m in marks}  # type: ignore[attr-defined]
        self.idle = set()
        self._recompute()
