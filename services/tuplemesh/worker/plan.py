"""`WorkerPlan`: what one worker runs and where every tuple goes, computed once and never changed.

A pure function of (topology, worker index, number of workers, conf): every worker computes the
plan of its own index, and executors are built from it instead of reading the Worker. The plan
holds the assignment epoch the worker routes by: the one place it is derived from the
configuration (``topology.epoch``, the counter) unless the process chose it already (a worker
that joins a running mesh takes the epoch its peers route by).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from tuplemesh.core.acking import AckingFactory, AckingSettings
from tuplemesh.core.feature_spec import FeatureSet, registered_features
from tuplemesh.core.stream_plan import StreamPlan
from tuplemesh.topology import Assignment, ExecutorSpec, Fields, Topology
from tuplemesh.topology.assignment import Epoch, code_hash
from tuplemesh.topology.groupings import Grouping
from tuplemesh.worker.settings import QueueSettings, WorkerSettings

__all__ = ["WorkerPlan"]


@dataclass(frozen=True)
class WorkerPlan:
    """The assignment, the stream table and the routes of worker ``index``. Immutable."""

    #: with the components features add (their topology parts: the checkpoint coordinator, the
    #: ackers; every worker adds the same)
    topology: Topology
    index: int
    conf: Mapping[str, Any]  # as components see it in open/prepare
    #: the keys the worker and its executors read, typed and in seconds (built once, here)
    queue_settings: QueueSettings
    worker_settings: WorkerSettings
    acking_settings: AckingSettings
    assignment: Assignment
    #: the assignment epoch this worker routes by, named on every Transfer stream it opens and
    #: required of every stream it takes
    epoch: Epoch
    stream_ids: Mapping[tuple[str, str], int]
    #: stream id -> (component, stream, fields): how a received payload is read
    stream_info: Mapping[int, tuple[str, str, Fields]]
    executors: tuple[ExecutorSpec, ...]  # this worker's
    #: local task -> index of the executor (and so of the inbox) that runs it
    executor_of_task: Mapping[int, int]
    remote_worker_of_task: Mapping[int, int]
    #: component -> stream -> StreamPlan
    streams: Mapping[str, Mapping[str, StreamPlan]]
    #: builds each executor's part in guaranteed processing (the acking feature's, for this
    #: topology; untracked without one)
    acking: AckingFactory

    @classmethod
    def build(
        cls,
        topology: Topology,
        index: int,
        num_workers: int,
        conf: Mapping[str, Any],
        epoch: Epoch | None = None,
        features: FeatureSet | None = None,
    ) -> WorkerPlan:
        """``epoch``: the one the process chose (None: ``topology.epoch``'s counter at
        ``num_workers`` workers); ``features``: whose topology parts and acking it takes (None:
        the registered ones; a set of its own that leaves out a registered feature the topology
        needs raises ValueError naming both, `FeatureSet.refuse_missing`)."""
        if not 0 <= index < num_workers:
            raise ValueError(f"worker index must be in 0..{num_workers - 1}, got {index}")
        if epoch is None:
            epoch = Epoch.configured(topology, num_workers, conf)
        elif epoch.workers != num_workers or epoch.code != code_hash(topology):
            raise ValueError(f"epoch {epoch} is not one of this topology at {num_workers} worker(s)")
        registered = registered_features()
        if features is None:
            features = registered
        else:  # a set of its own must not silently leave out what the topology relies on
            features.refuse_missing(topology, conf, registered)
        topology = features.with_parts(topology, conf)
        assignment = Assignment.compute(topology, num_workers)
        stream_ids = topology.stream_ids()
        executors = assignment.executors_of(index)
        streams = {
            component: MappingProxyType(
                {
                    stream: _stream_plan(topology, assignment, stream_ids, component, stream)
                    for stream in spec.streams
                }
            )
            for component, spec in topology.components.items()
        }
        return cls(
            topology=topology,
            index=index,
            conf=conf,
            queue_settings=QueueSettings.from_config(conf),
            worker_settings=WorkerSettings.from_config(conf),
            acking_settings=AckingSettings.from_config(conf),
            assignment=assignment,
            epoch=epoch,
            stream_ids=MappingProxyType(stream_ids),
            stream_info=MappingProxyType(
                {
                    sid: (component, stream, topology.components[component].streams[stream].fields)
                    for (component, stream), sid in stream_ids.items()
                }
            ),
            executors=executors,
            executor_of_task=MappingProxyType({t: e.index for e in executors for t in e.tasks}),
            remote_worker_of_task=MappingProxyType(
                {t: w for t, w in assignment.worker_of_task().items() if w != index}
            ),
            streams=MappingProxyType(streams),
            acking=features.acking_of(topology, assignment),
        )

    @property
    def num_workers(self) -> int:
        return self.assignment.num_workers

    @property
    def local_tasks(self) -> frozenset[int]:
        return frozenset(self.executor_of_task)


def _stream_plan(
    topology: Topology,
    assignment: Assignment,
    stream_ids: Mapping[tuple[str, str], int],
    component: str,
    stream: str,
) -> StreamPlan:
    definition = topology.components[component].streams[stream]
    targets: list[tuple[Grouping, tuple[int, ...]]] = []
    direct_targets: set[int] = set()
    for target, grouping in topology.subscribers(component, stream):
        tasks = assignment.component_tasks[target]
        if grouping.direct:
            direct_targets.update(tasks)
        else:
            targets.append((grouping, tasks))
    return StreamPlan(
        stream,
        stream_ids[(component, stream)],
        definition.fields,
        definition.direct,
        tuple(targets),
        frozenset(direct_targets),
    )
