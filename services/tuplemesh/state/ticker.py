"""`CheckpointTicker`: the checkpoint coordinator's clock (run by the checkpointing feature)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from tuplemesh.errors import AlertError
from tuplemesh.state.protocol import CHECKPOINT_NOW, TICK_STREAM
from tuplemesh.topology.tuple import Fields, Tuple

__all__ = ["CheckpointTicker", "Inject"]

_TICK_FIELDS = Fields([])
_REQUEST_FIELDS = Fields(["request"])


#: Delivers a tuple to a local task from outside the data path, counted as the worker's own
#: (`tuplemesh.core.feature.FeatureContext.inject`).
Inject = Callable[[int, Tuple], None]


class CheckpointTicker:
    """The coordinator's clock: a thread in the coordinator task's worker that puts a tick tuple
    into the coordinator's inbox every ``tick_seconds`` (bolts have no timer of their own)."""

    def __init__(self, worker: int, inject: Inject, task: int, period: float) -> None:
        self._inject = inject
        self._task = task
        self._period = period
        self._stop = threading.Event()
        self._paused = False
        self._thread = threading.Thread(target=self._run, name=f"checkpoint-ticker-{worker}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        tick = Tuple([], -1, "__system", TICK_STREAM, _TICK_FIELDS)
        while not self._stop.wait(self._period):
            if self._paused:
                continue
            try:
                self._inject(self._task, tick)
            except AlertError:
                return  # the coordinator's executor stopped

    def pause(self) -> None:
        """Stop the clock (a draining mesh): its ticks would keep an idle mesh from reading idle.
        A checkpoint asked for with ``checkpoint_now`` still runs to its commit."""
        self._paused = True

    def checkpoint_now(self) -> None:
        """Ask the coordinator for a checkpoint at once (or right after the one under way)."""
        self._inject(self._task, Tuple([CHECKPOINT_NOW], -1, "__system", TICK_STREAM, _REQUEST_FIELDS))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
