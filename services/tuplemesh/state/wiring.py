"""`with_checkpointing`: a stateful topology plus the checkpoint protocol's system parts
(the coordinator, the barrier, control and report streams, spouts wrapped), as every worker
derives it (see `tuplemesh.state.protocol`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tuplemesh.state.components import StatefulBolt
from tuplemesh.state.coordinator import CoordinatorBolt
from tuplemesh.state.protocol import (
    BARRIER_STREAM,
    CONTROL_STREAM,
    COORDINATOR,
    REPORT_FIELDS,
    REPORT_STREAM,
    SIGNAL_FIELDS,
)
from tuplemesh.state.spout import CheckpointedSpout
from tuplemesh.topology.builder import ComponentSpec, Subscription, Topology
from tuplemesh.topology.components import Spout, StreamDef
from tuplemesh.topology.groupings import DirectGrouping

__all__ = [
    "checkpointed_bolts",
    "checkpointing_part",
    "is_stateful",
    "needs_checkpoints",
    "with_checkpointing",
]

BARRIER_OUT = {BARRIER_STREAM: StreamDef(SIGNAL_FIELDS, direct=True)}
REPORT_OUT = {REPORT_STREAM: StreamDef(REPORT_FIELDS, direct=True)}


def checkpointed_bolts(topology: Topology) -> list[str]:
    """The StatefulBolts of ``topology`` that ask for checkpoints, by name."""
    return sorted(
        name
        for name, spec in topology.components.items()
        if isinstance(spec.prototype, StatefulBolt) and spec.prototype.checkpoints_topology
    )


def is_stateful(topology: Topology) -> bool:
    """Whether ``topology`` is checkpointed: it has at least one StatefulBolt that asks for it."""
    return bool(checkpointed_bolts(topology))


def needs_checkpoints(topology: Topology, conf: Mapping[str, Any]) -> str | None:
    """Why ``topology`` needs the checkpoints feature: its stateful bolts, which would otherwise
    run without their state restored, saved or committed."""
    stateful = checkpointed_bolts(topology)
    return f"stateful bolt(s) {', '.join(stateful)}" if stateful else None


def with_checkpointing(topology: Topology) -> Topology:
    """``topology`` plus the coordinator and the checkpoint streams; itself when not stateful.

    Called before the ackers are added, on the user's components only; every worker calls it
    with the same topology and so derives the same task ids.
    """
    if not is_stateful(topology):
        return topology
    direct = DirectGrouping()
    spouts = sorted(n for n, c in topology.components.items() if c.is_spout)
    stateful = sorted(n for n, c in topology.components.items() if isinstance(c.prototype, StatefulBolt))
    components: dict[str, ComponentSpec] = {}
    for name, spec in topology.components.items():
        streams = {**spec.streams, **BARRIER_OUT}
        sources = sorted({sub.source for sub in spec.inputs})
        inputs = (*spec.inputs, *(Subscription(source, BARRIER_STREAM, direct) for source in sources))
        if spec.is_spout:
            streams.update(REPORT_OUT)
            inputs = (*inputs, Subscription(COORDINATOR, CONTROL_STREAM, direct))
            user_spout = spec.prototype
            assert isinstance(user_spout, Spout)
            wrapped = CheckpointedSpout(user_spout)
            components[name] = replace(spec, prototype=wrapped, streams=streams, inputs=inputs)
            continue
        if name in stateful:
            streams.update(REPORT_OUT)
            inputs = (*inputs, Subscription(COORDINATOR, CONTROL_STREAM, direct))  # COMMIT notices
        components[name] = replace(spec, streams=streams, inputs=inputs)
    components[COORDINATOR] = ComponentSpec(
        name=COORDINATOR,
        prototype=CoordinatorBolt(spouts=tuple(spouts), reporters=tuple(spouts + stateful)),
        parallelism=1,
        num_tasks=1,
        streams={CONTROL_STREAM: StreamDef(SIGNAL_FIELDS, direct=True)},
        inputs=tuple(Subscription(name, REPORT_STREAM, direct) for name in spouts + stateful),
    )
    return replace(topology, components=components)


def checkpointing_part(topology: Topology, conf: Mapping[str, Any]) -> Topology:
    """`with_checkpointing` as the topology part of the checkpoints feature (its
    ``FEATURE``); whether a topology is checkpointed depends on its bolts alone."""
    return with_checkpointing(topology)
