"""`FlushTimer`: when a worker's flush timer ticks, and how executors wake it from rest.

Storm 2's flush timer asks idle executors with partial batches to flush them, every
``topology.batch.flush.interval.millis`` (1 ms). Ticking at that pace with nothing to flush cost
an idle worker a few percent of a core (a thread woken a thousand times a second), which on one
host of dozens of workers was most of the machine. So the timer rests while nothing is pending:
each tick that finds nothing doubles its wait up to `LONGEST_REST`, and a tick that finds
something goes back to the interval.

A partial batch must still be flushed within the interval, so an executor that leaves one behind
at the end of its batch wakes a resting timer (one attribute read per batch when it does not
rest). The timer says it rests *before* it looks, so an executor that saw it awake left its
batch before the look, which then finds it.
"""

from __future__ import annotations

import threading

__all__ = ["LONGEST_REST", "FlushTimer"]

#: The longest wait of a timer that found nothing to flush on its last ticks.
LONGEST_REST = 0.05


class FlushTimer:
    """The flush timer's pace. ``tick`` runs on the timer's thread; ``wake`` on any."""

    def __init__(self, interval: float, longest_rest: float = LONGEST_REST) -> None:
        self.interval = interval
        self.longest_rest = max(interval, longest_rest)
        #: True from the moment the timer looks for work until it found some: executors that
        #: leave a partial batch then wake it
        self.resting = False
        self._wait = interval
        self._wake = threading.Event()
        self._stopped = False

    def wake(self) -> None:
        """Tick now (an executor left a partial batch while the timer rests)."""
        self._wake.set()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    def next_tick(self) -> bool:
        """Wait for the next tick; False once stopped. Then the caller looks for work and says
        what it found with `found`."""
        self._wake.wait(self._wait)
        self._wake.clear()
        self.resting = True  # before the look: see the module's docstring
        return not self._stopped

    def found(self, busy: bool) -> None:
        """What the look after `next_tick` found: pending work keeps the timer at its interval."""
        if busy:
            self.resting = False
            self._wait = self.interval
        else:
            self._wait = min(self._wait * 2, self.longest_rest)
