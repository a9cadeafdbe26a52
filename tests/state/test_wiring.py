"""What a stateful topology gains (the coordinator, the checkpoint streams, wrapped spouts) and
what a topology without state keeps (nothing added, no checkpoint plan)."""

from __future__ import annotations

from examples.stateful_wordcount import ReplayableSentenceSpout, StatefulCountBolt
from examples.wordcount import SplitBolt
from examples.wordcount import topology as stateless
from tuplemesh.config import Config
from tuplemesh.state.protocol import (
    BARRIER_STREAM,
    CONTROL_STREAM,
    COORDINATOR,
    REPORT_STREAM,
    CheckpointPlan,
)
from tuplemesh.state.spout import CheckpointedSpout
from tuplemesh.state.wiring import is_stateful, with_checkpointing
from tuplemesh.topology import Topology, TopologyBuilder
from tuplemesh.worker.plan import WorkerPlan


def stateful() -> Topology:
    builder = TopologyBuilder("wired")
    builder.set_spout("sentences", ReplayableSentenceSpout(1), parallelism=2)
    builder.set_bolt("split", SplitBolt(), parallelism=2).shuffle_grouping("sentences")
    builder.set_bolt("count", StatefulCountBolt(), parallelism=3).fields_grouping("split", ["word"])
    return builder.build()


def test_a_topology_without_state_is_left_as_it_is_and_has_no_checkpoint_plan():
    assert not is_stateful(stateless)
    assert with_checkpointing(stateless) is stateless
    plan = WorkerPlan.build(stateless, 0, 2, Config({}))
    assert COORDINATOR not in plan.topology.components
    assert CheckpointPlan.of(plan.topology, plan.assignment, plan.conf) is None


def test_a_stateful_topology_gets_the_coordinator_streams_and_wrapped_spouts():
    topology = with_checkpointing(stateful())
    components = topology.components
    assert components[COORDINATOR].num_tasks == 1
    assert CONTROL_STREAM in components[COORDINATOR].streams
    assert isinstance(components["sentences"].prototype, CheckpointedSpout)
    assert {s.source for s in components[COORDINATOR].inputs} == {"sentences", "count"}  # who stores parts
    assert REPORT_STREAM in components["count"].streams and REPORT_STREAM not in components["split"].streams
    for name in ("sentences", "split", "count"):
        assert components[name].streams[BARRIER_STREAM].direct
    barrier_inputs = {
        name: [s.source for s in c.inputs if s.stream == BARRIER_STREAM] for name, c in components.items()
    }
    assert barrier_inputs["split"] == ["sentences"] and barrier_inputs["count"] == ["split"]


def test_the_plan_knows_every_tasks_barrier_inputs_and_outputs():
    plan = WorkerPlan.build(stateful(), 0, 2, Config({}))
    checkpointing = CheckpointPlan.of(plan.topology, plan.assignment, plan.conf)
    assert checkpointing is not None
    tasks = plan.assignment.component_tasks
    assert checkpointing.coordinator_task == tasks[COORDINATOR][0]
    assert checkpointing.aligned == {"split", "count"}
    for task in tasks["count"]:
        assert checkpointing.inputs_of[task] == frozenset(tasks["split"])
    for task in tasks["sentences"]:
        assert checkpointing.outputs_of[task] == tasks["split"]
    for task in tasks["split"]:
        assert checkpointing.outputs_of[task] == tasks["count"]
    assert checkpointing.settings.interval_seconds == 1.0
