"""Checkpointing as a worker feature: the worker names none of it (tuplemesh.registry does).

For a checkpointed topology (one with the coordinator component ``with_checkpointing`` adds), on
every worker of the mesh, the feature

- counts the worker process's start as a new attempt in the store (``start``, which runs before
  any executor starts: every task's restore sees it), and, on the worker that runs the
  coordinator task, starts the coordinator's clock (`CheckpointTicker`), whose ticks go into the
  coordinator's inbox counted as the worker's injected tuples;
- pauses that clock as the worker drains (its ticks would keep an idle mesh from reading idle)
  and hands the drain the final checkpoint of a whole-mesh stop (`StopCheckpoint`): the drain
  asks through `tuplemesh.core.feature.DrainingFeature`, a narrow protocol only a feature with a
  part in the drain implements, rather than a method of every feature or a call of the worker's
  that names checkpointing; the clock stops as the worker begins to stop (``stopping``);
- fills the snapshot's ``checkpoints`` (the coordinator's counts, on its worker only: Admin's
  status, ``/metrics`` and the UI read them there) and serves in its section the stateful tasks
  of this worker whose state is not restored yet (``restoring``: Admin refuses their reports);
- aligns barriers in every bolt executor of a component that takes part (`AlignedInput`, the
  executor's handling of each inbox batch: the registry lists this feature first, so it sits
  below every other feature's wrappers, right above the tasks), fills that executor's snapshot
  ``alignment`` counts, and closes its store on the executor thread as its loop ends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuplemesh.core.feature import (
    ExecutorHooks,
    ExecutorView,
    FeatureContext,
    FeatureMetric,
    FeatureServer,
)
from tuplemesh.core.feature_spec import FeatureSpec
from tuplemesh.state.alignment import AlignedInput
from tuplemesh.state.coordinator import CoordinatorBolt, register_attempt
from tuplemesh.state.on_demand import StopCheckpoint
from tuplemesh.state.protocol import CHECKPOINT_STREAMS, COORDINATOR, CheckpointPlan
from tuplemesh.state.run_file import RunStateFile
from tuplemesh.state.ticker import CheckpointTicker
from tuplemesh.state.wiring import checkpointing_part, needs_checkpoints

__all__ = ["FEATURE", "Checkpoints", "feature"]


class Checkpoints:
    """One worker's part in checkpointing a topology (see the module docstring)."""

    name = "checkpoints"

    def __init__(self, context: FeatureContext, plan: CheckpointPlan, coordinator_worker: int) -> None:
        self._context = context
        self.plan = plan
        #: the worker running the coordinator task (the final checkpoint is asked for there)
        self.coordinator_worker = coordinator_worker
        #: the coordinator task when this worker runs it (its counts are the snapshot's)
        self.coordinator: CoordinatorBolt | None = None
        #: executor name -> its barrier alignment, for the bolt executors whose tasks align
        self.aligned: dict[str, AlignedInput] = {}
        #: the coordinator's clock, on its worker once started
        self.ticker: CheckpointTicker | None = None

    def attach(self, executor: ExecutorView) -> ExecutorHooks | None:
        # triggers, barriers and reports never wait on a congested task (`Outbox.unheld_streams`)
        executor.outbox.unheld_streams = CHECKPOINT_STREAMS
        # and data waits on a task of this worker that would only set it aside (`Outbox.held_back`)
        executor.outbox.held_back = self._context.held_back
        executor.outbox.source_tasks = frozenset(executor.task_ids)
        coordinator = executor.tasks.get(self.plan.coordinator_task)
        if isinstance(coordinator, CoordinatorBolt):
            self.coordinator = coordinator
        aligned = (
            AlignedInput.attach(executor, self.plan, self._context.conf, self._context.held_back)
            if executor.is_bolt
            else None
        )
        if aligned is None:
            return None
        self.aligned[executor.name] = aligned
        return ExecutorHooks(
            wrap_batch=aligned.wrap,
            holds_input=True,
            on_exit=aligned.close,
            snapshot_fields=lambda: {"alignment": aligned.snapshot()},
        )

    def start(self) -> None:
        # before any task runs: counts this start as a new attempt (a rollback for a running mesh)
        register_attempt(self._context.conf, self.plan.topology)
        if self.coordinator is None:
            return
        inject = self._context.inject
        if inject is None:
            raise TypeError(
                f"worker {self._context.worker} runs the checkpoint coordinator but was built "
                "without a way to deliver its ticks (FeatureContext.inject is None)"
            )
        self.ticker = CheckpointTicker(
            self._context.worker, inject, self.plan.coordinator_task, self.plan.settings.tick_seconds
        )
        self.ticker.start()

    def draining(self) -> StopCheckpoint:
        """Pause the clock; the final checkpoint a whole-mesh stop waits for."""
        if self.ticker is not None:
            self.ticker.pause()
        return StopCheckpoint(self._context.conf, self.plan.topology, self.coordinator_worker, self.ticker)

    def stopping(self) -> None:
        if self.ticker is not None:
            self.ticker.stop()  # before the spouts stop: no tick for an executor about to end

    def stop(self) -> None:
        self.stopping()  # idempotent: the clock stopped in ``stopping`` already

    def serve(self, where: FeatureServer) -> None:
        pass  # no gRPC service of its own: Admin's status carries the counts

    def restoring(self) -> list[int]:
        """The stateful tasks of this worker whose checkpointed state is not restored yet. Any
        thread."""
        return sorted(task for aligned in list(self.aligned.values()) for task in aligned.restoring())

    def section(self) -> Mapping[str, Any]:
        return {"restoring": self.restoring()}

    def metrics(self) -> Sequence[FeatureMetric]:
        return ()  # its counts are the snapshot's ``checkpoints``, exported with the worker's own

    def snapshot_fields(self) -> Mapping[str, Any]:
        """``checkpoints``: the coordinator's counts, on the worker that runs it."""
        return {} if self.coordinator is None else {"checkpoints": self.coordinator.snapshot()}


def feature(context: FeatureContext) -> Checkpoints | None:
    """The running part's factory (``FEATURE.build``): None when the topology is not checkpointed."""
    assignment = context.assignment
    if COORDINATOR not in context.topology.components or assignment is None:
        return None  # not checkpointed, or no worker plan to take part with
    plan = CheckpointPlan.of(context.topology, assignment, context.conf)
    if plan is None:
        return None
    return Checkpoints(context, plan, assignment.worker_of_task()[plan.coordinator_task])


#: The registry's entry: checkpoints' coordinator in every checkpointed topology, its running
#: part in each worker, a one-off run's own sqlite file, and what needs it (a stateful bolt).
FEATURE = FeatureSpec(
    "checkpoints",
    build=feature,
    topology_part=checkpointing_part,
    run_resource=RunStateFile,
    needed_by=needs_checkpoints,
)
