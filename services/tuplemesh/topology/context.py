"""`TopologyContext`: what the runtime tells each task about its place in the topology."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tuplemesh.topology.assignment import Assignment
from tuplemesh.topology.builder import Topology
from tuplemesh.topology.tuple import DEFAULT_STREAM, Fields

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
