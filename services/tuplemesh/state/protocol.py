"""The checkpoint protocol's wiring: system streams, message kinds, and the topology transform.

A topology with a `StatefulBolt` gets, like the acker, system parts that every worker derives
identically (`with_checkpointing`):

- a coordinator bolt ``__checkpoint`` (one task) that starts checkpoints and commits them;
- ``__checkpoint_control`` (coordinator -> every spout task): ``[TRIGGER, n, attempt]`` starts
  checkpoint ``n``; ``[ROLLBACK, c, attempt]`` rewinds to committed checkpoint ``c`` (-1: none);
- ``__barrier`` (every spout and bolt -> every task of every bolt subscribed to it, on any
  stream): ``[BARRIER, n, attempt]`` and the rollback marker ``[ROLLBACK, c, attempt]``. They
  are emitted through the same Outbox as the data, so on every path from one task to another
  they keep their place among the tuples (per source and destination task, delivery is FIFO on
  every transport);
- ``__checkpoint_report`` (every spout task and stateful bolt task -> coordinator):
  ``[n, attempt, task, stored]`` once the task's part of checkpoint ``n`` is stored (or failed).

Every user spout is wrapped in a `CheckpointedSpout` (position, rewind, barriers); bolts align
their inputs in `tuplemesh.state.alignment`, hooked into the bolt executor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from tuplemesh.errors import TopologyError
from tuplemesh.state.components import StatefulBolt
from tuplemesh.state.settings import StateSettings
from tuplemesh.topology.assignment import Assignment
from tuplemesh.topology.builder import ComponentSpec, Subscription, Topology
from tuplemesh.topology.components import Spout, StreamDef, TaskContext
from tuplemesh.topology.groupings import DirectGrouping
from tuplemesh.topology.tuple import Fields

__all__ = [
    "BARRIER",
    "BARRIER_STREAM",
    "CHECKPOINT_STREAMS",
    "CONTROL_STREAM",
    "COORDINATOR",
    "NO_CHECKPOINT",
    "REPORT_STREAM",
    "ROLLBACK",
    "TICK_STREAM",
    "TRIGGER",
    "CheckpointPlan",
    "is_stateful",
    "with_checkpointing",
]

COORDINATOR = "__checkpoint"
BARRIER_STREAM = "__barrier"
CONTROL_STREAM = "__checkpoint_control"
REPORT_STREAM = "__checkpoint_report"
#: The coordinator's clock: a tuple its worker puts into its inbox every tick (never on the wire).
TICK_STREAM = "__checkpoint_tick"
CHECKPOINT_STREAMS = frozenset({BARRIER_STREAM, CONTROL_STREAM, REPORT_STREAM, TICK_STREAM})

#: kinds (first value) on the control and barrier streams
TRIGGER = BARRIER = 0
ROLLBACK = 1
#: the checkpoint of a rollback when none was ever committed: start from the beginning
NO_CHECKPOINT = -1

_SIGNAL_FIELDS = Fields(["kind", "checkpoint", "attempt"])
_BARRIER_OUT = {BARRIER_STREAM: StreamDef(_SIGNAL_FIELDS, direct=True)}
_REPORT_OUT = {REPORT_STREAM: StreamDef(Fields(["checkpoint", "attempt", "task", "stored"]), direct=True)}


def is_stateful(topology: Topology) -> bool:
    """Whether ``topology`` is checkpointed: it has at least one StatefulBolt."""
    return any(isinstance(spec.prototype, StatefulBolt) for spec in topology.components.values())


def with_checkpointing(topology: Topology) -> Topology:
    """``topology`` plus the coordinator and the checkpoint streams; itself when not stateful.

    Called before the ackers are added, on the user's components only; every worker calls it
    with the same topology and so derives the same task ids.
    """
    if not is_stateful(topology):
        return topology
    from tuplemesh.state.coordinator import CoordinatorBolt
    from tuplemesh.state.spout import CheckpointedSpout

    direct = DirectGrouping()
    spouts = sorted(n for n, c in topology.components.items() if c.is_spout)
    stateful = sorted(n for n, c in topology.components.items() if isinstance(c.prototype, StatefulBolt))
    components: dict[str, ComponentSpec] = {}
    for name, spec in topology.components.items():
        streams = {**spec.streams, **_BARRIER_OUT}
        sources = sorted({sub.source for sub in spec.inputs})
        inputs = (*spec.inputs, *(Subscription(source, BARRIER_STREAM, direct) for source in sources))
        if spec.is_spout:
            streams.update(_REPORT_OUT)
            inputs = (*inputs, Subscription(COORDINATOR, CONTROL_STREAM, direct))
            user_spout = spec.prototype
            assert isinstance(user_spout, Spout)
            wrapped = CheckpointedSpout(user_spout)
            components[name] = replace(spec, prototype=wrapped, streams=streams, inputs=inputs)
            continue
        if name in stateful:
            streams.update(_REPORT_OUT)
        components[name] = replace(spec, streams=streams, inputs=inputs)
    components[COORDINATOR] = ComponentSpec(
        name=COORDINATOR,
        prototype=CoordinatorBolt(spouts=tuple(spouts), reporters=tuple(spouts + stateful)),
        parallelism=1,
        num_tasks=1,
        streams={CONTROL_STREAM: StreamDef(_SIGNAL_FIELDS, direct=True)},
        inputs=tuple(Subscription(name, REPORT_STREAM, direct) for name in spouts + stateful),
    )
    return replace(topology, components=components)


@dataclass(frozen=True)
class CheckpointPlan:
    """What a worker needs to know about checkpointing, computed once with the WorkerPlan."""

    settings: StateSettings
    topology: str  # the name state is kept under
    coordinator_task: int
    #: bolt components whose tasks align barriers (every user bolt)
    aligned: frozenset[str]
    #: bolt task -> every task that sends it barriers (all tasks of the components it subscribes to)
    inputs_of: Mapping[int, frozenset[int]]
    #: task -> every task it sends barriers to
    outputs_of: Mapping[int, tuple[int, ...]]

    @classmethod
    def for_task(cls, context: TaskContext, conf: Mapping[str, object]) -> CheckpointPlan:
        """The plan, from inside a task of a checkpointed topology (its runtime context)."""
        plan = cls.of(context.topology, context.assignment, conf)  # type: ignore[attr-defined]
        if plan is None:
            raise TopologyError(f"topology {context.topology_name!r} is not checkpointed")
        return plan

    @classmethod
    def of(
        cls, topology: Topology, assignment: Assignment, conf: Mapping[str, object]
    ) -> CheckpointPlan | None:
        """The plan of ``topology`` (already through `with_checkpointing`), or None when it is not
        checkpointed."""
        if COORDINATOR not in topology.components:
            return None
        tasks = assignment.component_tasks
        aligned = frozenset(
            name
            for name, spec in topology.components.items()
            if not spec.is_spout and BARRIER_STREAM in spec.streams
        )
        inputs_of: dict[int, frozenset[int]] = {}
        outputs_of: dict[int, list[int]] = {}
        for name in aligned:
            senders = [s.source for s in topology.components[name].inputs if s.stream == BARRIER_STREAM]
            upstream = frozenset(t for source in senders for t in tasks[source])
            for task in tasks[name]:
                inputs_of[task] = upstream
                for sender in upstream:
                    outputs_of.setdefault(sender, []).append(task)
        return cls(
            settings=StateSettings.from_config(conf),
            topology=topology.name,
            coordinator_task=tasks[COORDINATOR][0],
            aligned=aligned,
            inputs_of=inputs_of,
            outputs_of={task: tuple(sorted(out)) for task, out in outputs_of.items()},
        )
