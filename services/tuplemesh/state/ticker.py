"""`CheckpointTicker`: the checkpoint coordinator's clock, and where a worker process start is
counted as a new attempt."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Protocol

from tuplemesh.errors import AlertError
from tuplemesh.state.coordinator import register_attempt
from tuplemesh.state.protocol import CHECKPOINT_NOW, TICK_STREAM
from tuplemesh.topology.tuple import Fields, Tuple

__all__ = ["CheckpointTicker", "TickedWorker"]

_TICK_FIELDS = Fields([])
_REQUEST_FIELDS = Fields(["request"])


class TickedWorker(Protocol):
    """What the ticker needs of a worker (`tuplemesh.worker.worker.Worker`)."""

    index: int
    conf: Mapping[str, Any]

    @property
    def plan(self) -> Any: ...  # a WorkerPlan: .checkpointing and .executor_of_task

    def inject(self, task: int, tup: Any) -> None: ...


class CheckpointTicker:
    """The coordinator's clock: a thread in the coordinator task's worker that puts a tick tuple
    into the coordinator's inbox every ``tick_seconds`` (bolts have no timer of their own)."""

    def __init__(self, worker: TickedWorker, task: int, period: float) -> None:
        self._worker = worker
        self._task = task
        self._period = period
        self._stop = threading.Event()
        self._paused = False
        self._thread = threading.Thread(
            target=self._run, name=f"checkpoint-ticker-{worker.index}", daemon=True
        )

    @classmethod
    def start_for(cls, worker: TickedWorker) -> CheckpointTicker | None:
        """Count this worker process's start (a new attempt) and, on the coordinator's worker,
        start the ticker; None when the topology is not checkpointed."""
        plan = worker.plan.checkpointing
        if plan is None:
            return None
        register_attempt(worker.conf, plan.topology)
        if plan.coordinator_task not in worker.plan.executor_of_task:
            return None
        ticker = cls(worker, plan.coordinator_task, plan.settings.tick_seconds)
        ticker._thread.start()
        return ticker

    def _run(self) -> None:
        tick = Tuple([], -1, "__system", TICK_STREAM, _TICK_FIELDS)
        while not self._stop.wait(self._period):
            if self._paused:
                continue
            try:
                self._worker.inject(self._task, tick)
            except AlertError:
                return  # the coordinator's executor stopped

    def pause(self) -> None:
        """Stop the clock (a draining mesh): its ticks would keep an idle mesh from reading idle.
        A checkpoint asked for with ``checkpoint_now`` still runs to its commit."""
        self._paused = True

    def checkpoint_now(self) -> None:
        """Ask the coordinator for a checkpoint at once (or right after the one under way)."""
        self._worker.inject(self._task, Tuple([CHECKPOINT_NOW], -1, "__system", TICK_STREAM, _REQUEST_FIELDS))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
