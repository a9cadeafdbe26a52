"""Assignment: task ids, executors and their workers, as a pure function of (topology, workers).

Every worker computes the same answer independently, so no coordinator is needed (Storm needed
Nimbus and ZooKeeper for this). Task ids start at 1 and run through the components in name
order; a component's tasks are split into contiguous executor ranges; executors are dealt to
workers round-robin in (component, first task) order, like Storm's even scheduler.

An `Epoch` names the map a worker routes by: (worker count, a hash of the topology's code, a
counter a rescale raises). Workers compare epochs on every Transfer stream, so two that route by
different maps never deliver each other's tuples to the wrong task.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, is_dataclass
from typing import Any

from tuplemesh.topology.builder import Topology

__all__ = ["Assignment", "Epoch", "ExecutorSpec", "code_hash"]


def code_hash(topology: Topology) -> str:
    """16 hex digits over what decides routing and task code: every component's name, class,
    parallelism, tasks, streams and inputs. Equal on every worker running the same topology."""
    digest = hashlib.sha256(topology.name.encode())
    for name in sorted(topology.components):
        spec = topology.components[name]
        kind = type(spec.prototype)
        streams = sorted((s, tuple(d.fields), d.direct) for s, d in spec.streams.items())
        inputs = sorted((i.source, i.stream, _describe(i.grouping)) for i in spec.inputs)
        line = (
            name,
            f"{kind.__module__}.{kind.__qualname__}",
            spec.parallelism,
            spec.num_tasks,
            streams,
            inputs,
        )
        digest.update(repr(line).encode())
    return digest.hexdigest()[:16]


def _describe(grouping: object) -> str:
    # a dataclass repr is its fields; any other repr may hold an address that differs per process
    kind = type(grouping)
    return repr(grouping) if is_dataclass(grouping) else f"{kind.__module__}.{kind.__qualname__}"


@dataclass(frozen=True)
class Epoch:
    """The assignment a worker routes by. Immutable; its text form (``counter/workers/code``) is
    what Transfer handshakes and Admin carry."""

    workers: int
    code: str
    counter: int = 0

    @classmethod
    def of(cls, topology: Topology, workers: int, counter: int = 0) -> Epoch:
        return cls(workers, code_hash(topology), counter)

    @classmethod
    def configured(cls, topology: Topology, workers: int, conf: Mapping[str, Any]) -> Epoch:
        """The epoch a worker starts at by its configuration: ``topology.epoch``'s counter."""
        return cls.of(topology, workers, int(conf.get("topology.epoch", 0)))

    @classmethod
    def parse(cls, text: str) -> Epoch:
        """The epoch written as ``counter/workers/code``; ValueError naming ``text`` otherwise."""
        try:
            counter, workers, code = text.split("/")
            return cls(int(workers), code, int(counter))
        except ValueError:
            raise ValueError(f"not an epoch (counter/workers/code): {text!r}") from None

    def __str__(self) -> str:
        return f"{self.counter}/{self.workers}/{self.code}"


@dataclass(frozen=True)
class ExecutorSpec:
    """One executor: its global index, component, the tasks it runs, and its worker."""

    index: int
    component: str
    tasks: tuple[int, ...]
    worker: int

    @property
    def name(self) -> str:
        return f"{self.component}[{self.tasks[0]}-{self.tasks[-1]}]"


@dataclass(frozen=True)
class Assignment:
    """Task -> executor -> worker map. Immutable; compare two with ``==``."""

    num_workers: int
    component_tasks: dict[str, tuple[int, ...]]
    executors: tuple[ExecutorSpec, ...]

    @classmethod
    def compute(cls, topology: Topology, num_workers: int) -> Assignment:
        if not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"number of workers must be an integer >= 1, got {num_workers!r}")
        component_tasks: dict[str, tuple[int, ...]] = {}
        next_task = 1
        for name in sorted(topology.components):
            n = topology.components[name].num_tasks
            component_tasks[name] = tuple(range(next_task, next_task + n))
            next_task += n
        ranges: list[tuple[str, tuple[int, ...]]] = []
        for name in sorted(topology.components):
            spec = topology.components[name]
            tasks = component_tasks[name]
            base, extra = divmod(len(tasks), spec.parallelism)
            start = 0
            for i in range(spec.parallelism):
                size = base + (1 if i < extra else 0)
                ranges.append((name, tasks[start : start + size]))
                start += size
        executors = tuple(
            ExecutorSpec(index=i, component=name, tasks=tasks, worker=i % num_workers)
            for i, (name, tasks) in enumerate(ranges)
        )
        return cls(num_workers, component_tasks, executors)

    def tasks_of(self, component: str) -> tuple[int, ...]:
        return self.component_tasks[component]

    def executors_of(self, worker: int) -> tuple[ExecutorSpec, ...]:
        return tuple(e for e in self.executors if e.worker == worker)

    def worker_of_task(self) -> dict[int, int]:
        return {t: e.worker for e in self.executors for t in e.tasks}

    def executor_of_task(self) -> dict[int, ExecutorSpec]:
        return {t: e for e in self.executors for t in e.tasks}

    def component_of_task(self) -> dict[int, str]:
        return {t: c for c, tasks in self.component_tasks.items() for t in tasks}

    def to_dict(self) -> dict[str, object]:
        """JSON form (Admin's GetAssignment, ``--json`` output)."""
        return {
            "workers": self.num_workers,
            "executors": [
                {"index": e.index, "component": e.component, "tasks": list(e.tasks), "worker": e.worker}
                for e in self.executors
            ],
        }
