"""`FeatureSpec`: everything one feature plugs into tuplemesh, declared by the feature's own
package and named by one line of ``tuplemesh.registry.FEATURES`` (the same line names its
configuration keys, if it has any: the configuration reads those without importing the spec).

A feature may have six parts, each optional:

- ``build``: its running part in each worker process (a `tuplemesh.core.feature.Feature`: hooks
  around executors, threads, a snapshot section, metrics, gRPC services);
- ``topology_part``: components it adds to every topology, applied by every worker alike and in
  the registry's order, so that all derive the same task ids (the checkpoint coordinator, the
  ackers);
- ``run_resource``: what a one-off run (``tuplemesh run``, a `LocalCluster`, the launcher) holds
  for it while the run lasts (a checkpointed topology's fresh sqlite file);
- ``acking``: how executors take part in guaranteed processing. One feature at most provides it;
  without one, no executor is tracked (`tuplemesh.core.acking.NoAcking`);
- ``panel``: what it shows on the web UI of a mesh (`tuplemesh.core.panel.MeshPanel`);
- ``needed_by``: why a topology (with its conf) cannot run without the feature, or None when it
  can: a worker assembled with a feature set that leaves out a registered feature its topology
  needs (acking with ``topology.acker.executors`` set, checkpoints for a stateful bolt) refuses
  to start, naming both, instead of running without it.

`FeatureSet` is the loaded registry: the worker's plan takes its topology parts and acking from
it, the composition root its ``build`` factories, a run its resources. Nothing else names a
feature's package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tuplemesh.core.acking import AckingFactory, NoAcking
from tuplemesh.core.feature import Feature, FeatureContext, FeatureFactory
from tuplemesh.core.panel import MeshPanel
from tuplemesh.registry import FEATURES, resolve
from tuplemesh.topology import Assignment, Topology

__all__ = [
    "AckingPort",
    "FeatureSet",
    "FeatureSpec",
    "RunResource",
    "RunResourceFactory",
    "TopologyPart",
    "registered_features",
]


class RunResource(Protocol):
    """One feature's part of a run, built from ``(conf, topology)`` (the run's conf with the
    topology's own over it): the conf keys it sets for the run, as config overrides and as the
    environment of worker processes, and ``close`` once the run is over (idempotent)."""

    @property
    def overrides(self) -> Mapping[str, str]: ...

    @property
    def env(self) -> Mapping[str, str]: ...

    def close(self) -> None: ...


#: Adds a feature's components to a topology: ``(topology, conf) -> topology`` (the same one when
#: the topology does not need them).
TopologyPart = Callable[[Topology, Mapping[str, Any]], Topology]
#: Opens what a run holds for a feature: ``(conf, topology) -> RunResource``.
RunResourceFactory = Callable[[Mapping[str, Any], Topology], RunResource]
#: How the executors of a topology (placed by an assignment) take part in acking.
AckingPort = Callable[[Topology, Assignment], AckingFactory]


@dataclass(frozen=True)
class FeatureSpec:
    """What one feature plugs in (see the module docstring); every part but the name optional."""

    name: str
    build: FeatureFactory | None = None
    topology_part: TopologyPart | None = None
    run_resource: RunResourceFactory | None = None
    acking: AckingPort | None = None
    panel: MeshPanel | None = None
    needed_by: Callable[[Topology, Mapping[str, Any]], str | None] | None = None


def _no_acking(outbox: Any, component: str, *_: Any) -> NoAcking:
    return NoAcking(outbox, component)


@dataclass(frozen=True)
class FeatureSet:
    """Features in the order they were registered (which is the order their topology parts
    apply, their running parts start and their run resources open)."""

    specs: tuple[FeatureSpec, ...]

    def __post_init__(self) -> None:
        names = [spec.name for spec in self.specs]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"feature name(s) registered twice: {', '.join(repeated)}")
        acking = [spec.name for spec in self.specs if spec.acking is not None]
        if len(acking) > 1:
            raise ValueError(f"more than one feature provides acking: {', '.join(acking)}")

    def build(self, context: FeatureContext) -> dict[str, Feature]:
        """Every feature's running part for one worker, by the feature's name (a factory that
        returns None has nothing to do here); TypeError when a part's ``name`` is not its
        spec's, under which the worker, its page and its features find it."""
        built: dict[str, Feature] = {}
        for spec in self.specs:
            part = None if spec.build is None else spec.build(context)
            if part is None:
                continue
            named = getattr(part, "name", None)
            if named != spec.name:
                raise TypeError(
                    f"feature {spec.name!r} built a running part named {named!r}: they must match"
                )
            built[spec.name] = part
        return built

    def with_parts(self, topology: Topology, conf: Mapping[str, Any]) -> Topology:
        """``topology`` with every feature's components, added in order."""
        for spec in self.specs:
            if spec.topology_part is not None:
                topology = spec.topology_part(topology, conf)
        return topology

    def acking_of(self, topology: Topology, assignment: Assignment) -> AckingFactory:
        """How the executors of ``topology`` take part in acking: the acking feature's answer,
        or untracked when no feature provides acking."""
        for spec in self.specs:
            if spec.acking is not None:
                return spec.acking(topology, assignment)
        return _no_acking

    def panels(self) -> list[tuple[str, MeshPanel]]:
        """(feature name, its panel) for every feature that shows one on the web UI, in order."""
        return [(spec.name, spec.panel) for spec in self.specs if spec.panel is not None]

    def refuse_missing(self, topology: Topology, conf: Mapping[str, Any], registered: FeatureSet) -> None:
        """ValueError naming the first feature of ``registered`` that this set leaves out and
        ``topology`` (running with ``conf``) needs, with why it needs it; nothing when none."""
        have = {spec.name for spec in self.specs}
        for spec in registered.specs:
            if spec.name in have or spec.needed_by is None:
                continue
            reason = spec.needed_by(topology, conf)
            if reason is not None:
                raise ValueError(
                    f"topology {topology.name!r} needs the {spec.name} feature ({reason}), which "
                    f"this worker's features leave out (they are: {', '.join(sorted(have)) or 'none'})"
                )

    def run_resources(self) -> list[RunResourceFactory]:
        """What a run opens for its features, in order."""
        return [spec.run_resource for spec in self.specs if spec.run_resource is not None]


def registered_features(names: Sequence[str] | None = None) -> FeatureSet:
    """The features ``names`` point at (``"package.module:SPEC"``; by default the registry's
    lines, in order), imported now: a name that does not resolve raises ImportError naming it;
    one that is no `FeatureSpec` raises TypeError."""
    if names is None:
        names = [line.spec for line in FEATURES]
    specs = []
    for name in names:
        try:
            spec = resolve(name)
        except ImportError as exc:
            raise ImportError(f"feature {exc}") from exc
        if not isinstance(spec, FeatureSpec):
            raise TypeError(f"feature {name!r} is a {type(spec).__name__}, not a FeatureSpec")
        specs.append(spec)
    return FeatureSet(tuple(specs))
