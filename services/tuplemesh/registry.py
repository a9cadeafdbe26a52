"""What plugs into a worker, one line per feature, ``"package.module:SPEC"`` naming the feature's
`tuplemesh.core.feature_spec.FeatureSpec`: its settings, its running part in each worker, the
components it adds to every topology, what a one-off run holds for it, and (one feature) how
executors take part in acking.

The worker's plan, its composition root and a run load these (`registered_features`), and the
configuration reads the settings they declare (`feature_settings`); nothing else names a feature
package, so a feature is added or removed here and nowhere else.

It imports nothing of tuplemesh (the features are named, not imported, until asked for), so both
the configuration and the layers above it can read it.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

__all__ = ["FEATURES", "feature_settings", "resolve"]

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


def feature_settings(names: Sequence[str] = FEATURES) -> list[tuple[str, Sequence[Any]]]:
    """``(line, the configuration keys its spec declares)`` for every line of ``names``, in order
    (``tuplemesh.config`` merges them into its table the first time it is read)."""
    found: list[tuple[str, Sequence[Any]]] = []
    for name in names:
        try:
            settings = resolve(name).settings
        except AttributeError:
            raise TypeError(f"feature {name!r} declares no settings: it is not a FeatureSpec") from None
        found.append((name, tuple(settings)))
    return found
