"""The checkpoint protocol's wiring: system streams, message kinds, and the topology transform.

A topology with a `StatefulBolt` gets, like the acker, system parts that every worker derives
identically:

- a coordinator bolt ``__checkpoint`` (one task) that starts checkpoints and commits them;
- ``__checkpoint_control`` (coordinator -> every spout task and stateful bolt task):
  ``[TRIGGER, n, attempt]`` starts checkpoint ``n`` (spouts); ``[ROLLBACK, c, attempt]`` rewinds
  to committed checkpoint ``c`` (-1: none, spouts); ``[COMMIT, n, attempt]`` says ``n`` is
  committed (all), so a task can release what only ``n`` had to keep (a source's acks, an
  export log's records held back from readers);
- ``__barrier`` (every spout and bolt -> every task of every bolt subscribed to it, on any
  stream): ``[BARRIER, n, attempt]``, the rollback marker ``[ROLLBACK, c, attempt]`` and,
  from a task that gave checkpoint ``n`` up, ``[ABANDON, n, attempt]`` in place of its barrier.
  They are emitted through the same Outbox as the data, so on every path from one task to another
  they keep their place among the tuples (per source and destination task, delivery is FIFO on
  every transport);
- ``__checkpoint_report`` (every spout task and stateful bolt task -> coordinator):
  ``[n, attempt, task, stored]`` once the task's part of checkpoint ``n`` is stored (True), could
  not be stored (False), or was never taken because the task, or one upstream of it, gave up
  aligning (None).

`tuplemesh.state.wiring` adds them to a topology. Every user spout is wrapped in a
`CheckpointedSpout` (position, rewind, barriers); bolts align their inputs in
`tuplemesh.state.alignment`, hooked into the bolt executor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tuplemesh.errors import TopologyError
from tuplemesh.state.settings import StateSettings
from tuplemesh.topology.assignment import Assignment
from tuplemesh.topology.builder import Topology
from tuplemesh.topology.components import TaskContext
from tuplemesh.topology.tuple import Fields

__all__ = [
    "ABANDON",
    "ALIGNMENT_GIVEN_UP",
    "BARRIER",
    "BARRIER_STREAM",
    "CHECKPOINT_NOW",
    "CHECKPOINT_STREAMS",
    "COMMIT",
    "CONTROL_STREAM",
    "COORDINATOR",
    "NO_CHECKPOINT",
    "REPORT_STREAM",
    "ROLLBACK",
    "SIGNAL_FIELDS",
    "TICK_STREAM",
    "TRIGGER",
    "CheckpointPlan",
]

COORDINATOR = "__checkpoint"
BARRIER_STREAM = "__barrier"
CONTROL_STREAM = "__checkpoint_control"
REPORT_STREAM = "__checkpoint_report"
#: The coordinator's clock: a tuple its worker puts into its inbox every tick (never on the wire);
#: ``[CHECKPOINT_NOW]`` asks for a checkpoint at once.
TICK_STREAM = "__checkpoint_tick"
#: The streams of the protocol's messages: a few per checkpoint and task, never user data.
CHECKPOINT_STREAMS = frozenset({BARRIER_STREAM, CONTROL_STREAM, REPORT_STREAM, TICK_STREAM})

#: kinds (first value) on the control and barrier streams
TRIGGER = BARRIER = 0
ROLLBACK = 1
COMMIT = 2
#: on the barrier stream: ``[ABANDON, n, attempt]`` in place of barrier ``n`` from a task that gave
#: ``n`` up. Its receivers give ``n`` up too (instead of holding their other inputs until their
#: own bound) and pass it on, so every task downstream, stateless or not, learns at once.
ABANDON = 3
#: the value of a tick that asks the coordinator for a checkpoint now (ordinary ticks have none)
CHECKPOINT_NOW = "now"
#: the ``stored`` value of a report from a task that gave up aligning: its part was never taken.
#: Falsy like a store failure's False, so a coordinator that tells them apart is not needed to
#: abandon the checkpoint; the one that does says what happened.
ALIGNMENT_GIVEN_UP = None
#: the checkpoint of a rollback when none was ever committed: start from the beginning
NO_CHECKPOINT = -1

#: the values of the control and barrier streams
SIGNAL_FIELDS = Fields(["kind", "checkpoint", "attempt"])
#: the values of the report stream
REPORT_FIELDS = Fields(["checkpoint", "attempt", "task", "stored"])


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
        """The plan of ``topology`` (already through ``with_checkpointing``), or None when it is not
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
