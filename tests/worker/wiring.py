"""The one worker of a one-worker mesh, wired as the Worker wires it (plan, features, inboxes,
`ExecutorWiring`) but without its threads: tests and benchmarks build executors from it and drive
them by hand."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tuplemesh.config import Config
from tuplemesh.core.feature import Feature, FeatureContext
from tuplemesh.core.held_back import HeldBack
from tuplemesh.disruptor import RingBuffer
from tuplemesh.serialization import load_serializer
from tuplemesh.topology import ExecutorSpec, Topology
from tuplemesh.worker.executor_base import ExecutorWiring
from tuplemesh.worker.plan import WorkerPlan

__all__ = ["Wired", "wire"]


@dataclass(frozen=True)
class Wired:
    plan: WorkerPlan
    #: The features built for it, in the order ``wire``'s ``features`` gave them.
    features: tuple[Feature, ...]
    wiring: ExecutorWiring

    def spec(self, component: str) -> ExecutorSpec:
        """The (first) executor of ``component``."""
        return next(e for e in self.plan.executors if e.component == component)


def wire(
    topology: Topology,
    conf: Config,
    features: Callable[[FeatureContext], Iterable[Feature | None]] = lambda context: (),
    *,
    slots: int = 64,
) -> Wired:
    """Worker 0 of 1 running ``topology``: its plan, the features ``features`` builds from its
    context (None: a feature with nothing to do here, as a feature's build factory returns), an inbox
    of ``slots`` per task and a transfer ring of as many; msgpack, no congestion reports."""
    plan = WorkerPlan.build(topology, 0, 1, conf)
    held_back = HeldBack()  # one per worker: what its features mark, its shuffles read
    context = FeatureContext(plan.topology, conf, 0, topology.name, plan.assignment, held_back=held_back)
    built = tuple(f for f in features(context) if f is not None)
    inboxes: dict[int, RingBuffer[Any]] = {t: RingBuffer.single_producer(slots) for t in plan.local_tasks}
    wiring = ExecutorWiring(
        plan,
        inboxes,
        RingBuffer.single_producer(slots),
        lambda: load_serializer("msgpack"),
        None,
        features=built,
        held_back=held_back,
    )
    return Wired(plan, built, wiring)
