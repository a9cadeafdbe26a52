"""`TopologyBuilder` and the immutable, validated `Topology` it builds.

Everything that can be wrong with a topology is found in ``build()``: unknown components or
streams, fields groupings on undeclared fields, direct/non-direct mismatches, zero tasks.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuplemesh.errors import TopologyError
from tuplemesh.topology.components import Bolt, BoltSource, OutputFieldsDeclarer, Spout, StreamDef
from tuplemesh.topology.groupings import (
    AllGrouping,
    CustomGrouping,
    DirectGrouping,
    FieldsGrouping,
    GlobalGrouping,
    Grouping,
    LocalOrShuffleGrouping,
    NoneGrouping,
    ShuffleGrouping,
)
from tuplemesh.topology.tuple import DEFAULT_STREAM, WATERMARK_STREAM

#: The per-component key of tick tuples' period (also a topology-wide key).
TICK_FREQ_KEY = "topology.tick.tuple.freq.secs"

__all__ = [
    "TICK_FREQ_KEY",
    "BoltDeclarer",
    "ComponentSpec",
    "ResultCheck",
    "Subscription",
    "Topology",
    "TopologyBuilder",
]

#: A topology's optional result check: component -> per-task reports, to (matched, message).
ResultCheck = Callable[[Mapping[str, list[Any]]], tuple[bool, str]]


@dataclass(frozen=True)
class Subscription:
    """A bolt's input: ``source``'s ``stream`` distributed by ``grouping``."""

    source: str
    stream: str
    grouping: Grouping


@dataclass(frozen=True)
class ComponentSpec:
    """One spout or bolt as declared: prototype instance, parallelism, tasks, streams, inputs."""

    name: str
    prototype: Spout | Bolt
    parallelism: int
    num_tasks: int
    streams: Mapping[str, StreamDef]
    inputs: tuple[Subscription, ...] = ()
    #: configuration set for this component only (``component_config`` and ``tick_every``)
    conf: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_spout(self) -> bool:
        return isinstance(self.prototype, Spout)

    def new_instance(self) -> Spout | Bolt:
        """A fresh copy for one task (Storm serializes the component once per task)."""
        return copy.deepcopy(self.prototype)


@dataclass(frozen=True)
class Topology:
    """A validated topology. Immutable; every worker derives the same assignment from it."""

    name: str
    components: Mapping[str, ComponentSpec]
    conf: Mapping[str, Any] = field(default_factory=dict)
    check: ResultCheck | None = None

    def subscribers(self, source: str, stream: str) -> list[tuple[str, Grouping]]:
        """(component, grouping) of every subscription to ``source``/``stream``, sorted by name."""
        found = []
        for name in sorted(self.components):
            for sub in self.components[name].inputs:
                if sub.source == source and sub.stream == stream:
                    found.append((name, sub.grouping))
        return found

    def stream_ids(self) -> dict[tuple[str, str], int]:
        """Compact wire id of every (component, stream), identical in every worker."""
        pairs = sorted((c, s) for c, spec in self.components.items() for s in spec.streams)
        return {pair: i for i, pair in enumerate(pairs)}

    @property
    def spouts(self) -> list[str]:
        return sorted(n for n, c in self.components.items() if c.is_spout)


class BoltDeclarer:
    """Returned by ``set_bolt``: declares the bolt's inputs, one grouping call per subscription."""

    def __init__(self, builder: TopologyBuilder, name: str) -> None:
        self._builder = builder
        self._name = name

    def _add(self, source: str, stream: str, grouping: Grouping) -> BoltDeclarer:
        self._builder._inputs[self._name].append(Subscription(source, stream, grouping))
        return self

    def shuffle_grouping(self, source: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Each tuple of ``source``'s ``stream`` goes to one task of this bolt, spread evenly."""
        return self._add(source, stream, ShuffleGrouping())

    def fields_grouping(
        self, source: str, fields: Sequence[str], stream: str = DEFAULT_STREAM
    ) -> BoltDeclarer:
        """Tuples with equal values of ``fields`` (a name or a list of names, declared by ``source``)
        always go to the same task of this bolt."""
        if isinstance(fields, str):
            fields = [fields]
        return self._add(source, stream, FieldsGrouping(tuple(fields)))

    def all_grouping(self, source: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Every tuple goes to every task of this bolt."""
        return self._add(source, stream, AllGrouping())

    def global_grouping(self, source: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Every tuple goes to one task of this bolt, the one with the lowest id."""
        return self._add(source, stream, GlobalGrouping())

    def direct_grouping(self, source: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """The emitter picks the task with ``emit_direct``; ``stream`` must be declared direct."""
        return self._add(source, stream, DirectGrouping())

    def local_or_shuffle_grouping(self, source: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Shuffle among this bolt's tasks in the emitting worker when it has any, else among all."""
        return self._add(source, stream, LocalOrShuffleGrouping())

    def none_grouping(self, source: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """No preference where tuples go (Storm's none grouping; distributed as shuffle)."""
        return self._add(source, stream, NoneGrouping())

    def custom_grouping(self, source: str, grouping: Any, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Your ``CustomStreamGrouping`` chooses the tasks of each tuple."""
        return self._add(source, stream, CustomGrouping(grouping))

    def tick_every(self, seconds: float) -> BoltDeclarer:
        """Give every task of this bolt a tick tuple each ``seconds`` (overrides the topology's
        ``topology.tick.tuple.freq.secs`` and the bolt's own ``component_config``); 0: none."""
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise TopologyError(f"component {self._name!r}: tick_every needs seconds >= 0, got {seconds!r}")
        self._builder._conf[self._name][TICK_FREQ_KEY] = float(seconds)
        return self


class TopologyBuilder:
    """Declares spouts and bolts, then ``build()`` validates and freezes them into a Topology."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name or any(c.isspace() for c in name):
            raise TopologyError(f"topology name must be a non-empty word, got {name!r}")
        self.name = name
        self._components: dict[str, tuple[Spout | Bolt, int, int | None]] = {}
        self._inputs: dict[str, list[Subscription]] = {}
        self._conf: dict[str, dict[str, Any]] = {}

    def _declare(self, name: str, obj: Spout | Bolt, parallelism: int, tasks: int | None) -> None:
        if not isinstance(name, str) or not name:
            raise TopologyError(f"component names must be non-empty strings, got {name!r}")
        if name.startswith("__"):
            raise TopologyError(f"component {name!r}: names starting with '__' are reserved")
        if name in self._components:
            raise TopologyError(f"component {name!r} declared twice")
        if not isinstance(parallelism, int) or parallelism < 1:
            raise TopologyError(
                f"component {name!r}: parallelism must be an integer >= 1, got {parallelism!r}"
            )
        if tasks is not None and (not isinstance(tasks, int) or tasks < 1):
            raise TopologyError(f"component {name!r}: task count must be an integer >= 1, got {tasks!r}")
        self._components[name] = (obj, parallelism, tasks)
        self._inputs[name] = []
        self._conf[name] = {}

    def set_spout(self, name: str, spout: Spout, parallelism: int = 1, tasks: int | None = None) -> None:
        """Add a spout with ``parallelism`` executors and ``tasks`` tasks (default: one per executor)."""
        if not isinstance(spout, Spout):
            raise TopologyError(f"component {name!r}: set_spout needs a Spout, got {type(spout).__name__}")
        self._declare(name, spout, parallelism, tasks)

    def set_bolt(
        self, name: str, bolt: Bolt | BoltSource, parallelism: int = 1, tasks: int | None = None
    ) -> BoltDeclarer:
        """Add a bolt (or a windowed bolt); subscribe it with the grouping methods of the returned
        declarer."""
        as_bolt = getattr(bolt, "as_bolt", None)
        if not isinstance(bolt, Bolt) and callable(as_bolt):
            bolt = as_bolt()
        if not isinstance(bolt, Bolt):
            raise TopologyError(f"component {name!r}: set_bolt needs a Bolt, got {type(bolt).__name__}")
        self._declare(name, bolt, parallelism, tasks)
        return BoltDeclarer(self, name)

    def build(self, conf: Mapping[str, Any] | None = None, check: ResultCheck | None = None) -> Topology:
        """Validate everything and return the immutable Topology."""
        if not self._components:
            raise TopologyError(f"topology {self.name!r} has no components")
        if not any(isinstance(obj, Spout) for obj, _, _ in self._components.values()):
            raise TopologyError(f"topology {self.name!r} has no spout")
        streams: dict[str, dict[str, StreamDef]] = {}
        for name, (obj, _, _) in self._components.items():
            declarer = OutputFieldsDeclarer()
            try:
                obj.declare_output_fields(declarer)
            except ValueError as exc:
                raise TopologyError(f"component {name!r}: {exc}") from exc
            streams[name] = dict(declarer.streams)
        specs: dict[str, ComponentSpec] = {}
        for name, (obj, parallelism, tasks) in sorted(self._components.items()):
            num_tasks = parallelism if tasks is None else tasks
            for sub in self._inputs[name]:
                self._check_subscription(name, sub, streams)
            specs[name] = ComponentSpec(
                name=name,
                prototype=obj,
                parallelism=min(parallelism, num_tasks),
                num_tasks=num_tasks,
                streams=streams[name],
                inputs=tuple(self._inputs[name]) + self._watermark_inputs(obj, name, streams),
                conf=self._component_conf(name, obj),
            )
        return Topology(self.name, specs, dict(conf or {}), check)

    def _watermark_inputs(
        self, obj: Spout | Bolt, name: str, streams: dict[str, dict[str, StreamDef]]
    ) -> tuple[Subscription, ...]:
        """An event-time windowed bolt hears the watermarks of every input that sends them (every
        task of it: they are broadcast, like checkpoint barriers)."""
        if not getattr(obj, "follows_watermarks", False):
            return ()
        sources = sorted({sub.source for sub in self._inputs[name]})
        return tuple(
            Subscription(source, WATERMARK_STREAM, AllGrouping())
            for source in sources
            if WATERMARK_STREAM in streams[source]
        )

    def _component_conf(self, name: str, obj: Spout | Bolt) -> dict[str, Any]:
        conf: dict[str, Any] = {}
        if isinstance(obj, Bolt):
            conf.update(obj.component_config())
        conf.update(self._conf[name])
        tick = conf.get(TICK_FREQ_KEY)
        if tick is not None and (isinstance(tick, bool) or not isinstance(tick, int | float) or tick < 0):
            raise TopologyError(f"component {name!r}: {TICK_FREQ_KEY} must be seconds >= 0, got {tick!r}")
        return conf

    def _check_subscription(
        self, name: str, sub: Subscription, streams: dict[str, dict[str, StreamDef]]
    ) -> None:
        where = f"component {name!r} subscribes to {sub.source!r} stream {sub.stream!r}"
        if sub.source not in self._components:
            known = ", ".join(sorted(self._components))
            raise TopologyError(f"{where}: unknown component {sub.source!r} (known: {known})")
        declared = streams[sub.source]
        if sub.stream not in declared:
            raise TopologyError(
                f"{where}: {sub.source!r} declares no stream {sub.stream!r} (declared: {sorted(declared)})"
            )
        stream = declared[sub.stream]
        problem = sub.grouping.validate(stream.fields)
        if problem:
            raise TopologyError(f"{where}: {problem}")
        if stream.direct and not sub.grouping.direct:
            raise TopologyError(f"{where}: the stream is direct, so the grouping must be direct_grouping")
        if sub.grouping.direct and not stream.direct:
            raise TopologyError(f"{where}: direct_grouping needs a stream declared with direct=True")
