"""`TickTimer`: puts tick markers into a bolt executor's inbox every ``topology.tick.tuple.freq.secs``.

A tick is a marker in the inbox, not a tuple on the wire: it costs the data path nothing and is
turned into one tick tuple per task by the executor. It is never counted as received or
executed, never acked or anchored. Under backpressure ticks do not pile up: while one waits in
the inbox no other is queued (the ``pending`` flag, set here and cleared by the executor when it
runs the tick), and a full inbox skips the tick instead of blocking the timer.
"""

from __future__ import annotations

import threading
from typing import Any

from tuplemesh.core.markers import Marker
from tuplemesh.disruptor import RingBuffer
from tuplemesh.errors import AlertError, InsufficientCapacityError

__all__ = ["TICK", "TickTimer"]

#: Ask a bolt executor to hand each of its tasks a tick tuple.
TICK = Marker("TICK")


class TickTimer:
    """One thread per bolt executor with ticks on. ``pending`` is shared with the executor thread:
    the timer only sets it, the executor only clears it (a stale read costs one skipped tick)."""

    def __init__(self, name: str, inbox: RingBuffer[Any], period: float) -> None:
        self.period = period
        self.pending = False
        self.queued = 0  # ticks put into the inbox
        self.skipped = 0  # periods that found a tick still pending or the inbox full
        self._inbox = inbox
        self._stop = threading.Event()
        self._timer = threading.Thread(target=self._run, name=f"ticks-{name}", daemon=True)

    def start(self) -> None:
        self._timer.start()

    def stop(self) -> None:
        """Queue no more ticks. Any thread; returns at once (the timer exits at its next wake-up)."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            if self.pending:
                self.skipped += 1
                continue
            self.pending = True
            try:
                self._inbox.try_put(TICK)
            except InsufficientCapacityError:
                self.pending = False
                self.skipped += 1
            except AlertError:
                return  # the executor halted
            else:
                self.queued += 1
