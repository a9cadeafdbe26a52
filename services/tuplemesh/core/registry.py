"""What plugs into a worker, one line per feature, ``"package.module:SPEC"`` naming the feature's
`tuplemesh.core.feature_spec.FeatureSpec`: its running part in each worker, the components it
adds to every topology, what a one-off run holds for it, and (one feature) how executors take
part in acking.

The worker's plan, its composition root and a run load these (`registered_features`); nothing
else names a feature package, so a feature is added or removed here and nowhere in the worker.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["FEATURES", "resolve"]

#: In order: topology parts apply, running parts start and run resources open in this order.
FEATURES: tuple[str, ...] = (
    # first: its checkpoint coordinator is added before the ackers (so they track its trees
    # too); its running part starts first (a new attempt counted before anything else starts)
    # and its clock stops before the other features hear the worker stop
    "tuplemesh.state.feature:FEATURE",
    "tuplemesh.acking.mode:FEATURE",
    "tuplemesh.ticks.feature:FEATURE",
    "tuplemesh.hotkeys.feature:FEATURE",
    "tuplemesh.sampling.feature:FEATURE",
    "tuplemesh.batchtrace.feature:FEATURE",
    "tuplemesh.gateway.worker_feature:FEATURE",
)


def resolve(name: str) -> Any:
    """What ``name`` (``"package.module:attribute"``) points at, imported now: a name that does
    not resolve raises ImportError naming it."""
    module_name, _, attribute = name.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"{name!r} does not resolve: {exc}") from exc
