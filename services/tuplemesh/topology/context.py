"""`TopologyContext`: what the runtime tells each task about its place in the topology."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tuplemesh.topology.assignment import Assignment
from tuplemesh.topology.builder import Topology
from tuplemesh.topology.tuple import DEFAULT_STREAM, Fields
from tuplemesh.topology.user_metrics import TaskMetrics, UserMetrics

__all__ = ["TopologyContext"]


@dataclass(frozen=True)
class TopologyContext:
    """What a task knows about its place in the topology. Immutable."""

    topology: Topology
    assignment: Assignment
    task_id: int
    component_id: str
    worker_index: int
    conf: Mapping[str, Any]
    #: The worker's user metrics (exported on its /metrics); a context built on its own gets
    #: a registry nothing exports.
    user_metrics: UserMetrics = field(default_factory=UserMetrics, compare=False, repr=False)

    @cached_property
    def metrics(self) -> TaskMetrics:
        """This task's user metrics: counters, gauges, histograms under its component's labels."""
        return self.user_metrics.for_task(self.component_id, self.task_id)

    @property
    def component_tasks(self) -> tuple[int, ...]:
        """Every task id of this task's component, across all workers."""
        return self.assignment.tasks_of(self.component_id)

    @property
    def task_index(self) -> int:
        """Position of this task among its component's tasks (0-based)."""
        return self.component_tasks.index(self.task_id)

    def tasks_of(self, component: str) -> tuple[int, ...]:
        return self.assignment.tasks_of(component)

    @property
    def topology_name(self) -> str:
        return self.topology.name

    def output_fields(self, stream: str = DEFAULT_STREAM) -> Fields:
        return self.fields_of(self.component_id, stream)

    def sources(self) -> list[tuple[str, str]]:
        return [(s.source, s.stream) for s in self.topology.components[self.component_id].inputs]

    def fields_of(self, component: str, stream: str = DEFAULT_STREAM) -> Fields:
        return self.topology.components[component].streams[stream].fields
