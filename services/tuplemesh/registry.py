"""What plugs into a worker, one line per feature: a `FeatureLine` naming the feature's
`tuplemesh.core.feature_spec.FeatureSpec` (``"package.module:FEATURE"``: its running part in each
worker, the components it adds to every topology, what a one-off run holds for it, its web UI
panel and, for one feature, how executors take part in acking) and, when it has any, its
configuration keys (``"package.module:SETTINGS"``, a sequence of `tuplemesh.config.ConfigKey`).

The worker's plan, its composition root and a run load the specs (`registered_features`); the
configuration reads only the settings (`feature_settings`), from modules kept apart from the
feature's running code, so reading the configuration imports no feature (nor gRPC), and a feature
whose code fails to import breaks the worker that loads it, naming its line, not every reader of
the configuration. Nothing else names a feature package, so a feature is added or removed here
and nowhere else.

It imports nothing of tuplemesh (the features are named, not imported, until asked for), so both
the configuration and the layers above it can read it.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = ["FEATURES", "FeatureLine", "feature_settings", "resolve"]


class FeatureLine(NamedTuple):
    """One registered feature."""

    #: ``"package.module:attribute"``: its FeatureSpec, imported when a worker or a run loads it
    spec: str
    #: ``"package.module:attribute"``: its configuration keys (a sequence of ConfigKey rows), in a
    #: module the configuration can import on its first read; "" when it declares none
    settings: str = ""


#: In order: topology parts apply, running parts start and run resources open in this order.
FEATURES: tuple[FeatureLine, ...] = (
    # first: its checkpoint coordinator is added before the ackers (so they track its trees
    # too); its running part starts first (a new attempt counted before anything else starts)
    # and its clock stops before the other features hear the worker stop
    FeatureLine("tuplemesh.state.feature:FEATURE"),
    FeatureLine("tuplemesh.acking.mode:FEATURE"),
    FeatureLine("tuplemesh.ticks.feature:FEATURE"),
    FeatureLine("tuplemesh.hotkeys.feature:FEATURE", settings="tuplemesh.hotkeys.settings:SETTINGS"),
    FeatureLine("tuplemesh.sampling.feature:FEATURE"),
    FeatureLine("tuplemesh.batchtrace.feature:FEATURE"),
    FeatureLine("tuplemesh.gateway.worker_feature:FEATURE"),
)


def resolve(name: str) -> Any:
    """What ``name`` (``"package.module:attribute"``) points at, imported now: a name that does
    not resolve raises ImportError naming it."""
    module_name, _, attribute = name.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"{name!r} does not resolve: {exc}") from exc


def feature_settings(names: Sequence[str] | None = None) -> list[tuple[str, tuple[Any, ...]]]:
    """``(name, the keys it holds)`` for every settings name of ``names`` (by default the
    registry's, in its order), imported now (``tuplemesh.config`` merges them into its table the
    first time it is read); TypeError naming one that holds no sequence."""
    if names is None:
        names = [line.settings for line in FEATURES if line.settings]
    found: list[tuple[str, tuple[Any, ...]]] = []
    for name in names:
        settings = resolve(name)
        if isinstance(settings, (str, bytes)) or not isinstance(settings, Sequence):
            raise TypeError(
                f"feature settings {name!r} are a {type(settings).__name__}, not a sequence of ConfigKey rows"
            )
        found.append((name, tuple(settings)))
    return found
