"""What plugs into a worker, one line each, ``"package.module:name"``: its features, the parts a
feature adds to every topology, what a one-off run holds for them, and how executors take part in
acking.

The worker's plan and its composition root load these (`resolve`); nothing else names a feature
package, so a feature is added or removed here and nowhere in the worker.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ACKING", "FEATURES", "RUN_RESOURCES", "TOPOLOGY_PARTS", "resolve"]

FEATURES: tuple[str, ...] = (
    # first: it starts first (a new attempt counted before anything else starts) and its clock
    # stops before the other features hear the worker stop
    "tuplemesh.state.feature:feature",
    "tuplemesh.ticks:feature",
    "tuplemesh.hotkeys:feature",
    "tuplemesh.sampling:feature",
    "tuplemesh.batchtrace:feature",
    "tuplemesh.gateway:feature",
)

#: Components a feature adds to the user's topology, applied in this order by every worker
#: alike (so all derive the same task ids): each ``(topology, conf) -> topology``. The checkpoint
#: coordinator comes first, so the ackers added next track its trees too.
TOPOLOGY_PARTS: tuple[str, ...] = (
    "tuplemesh.state.wiring:checkpointing_part",
    "tuplemesh.acking.acker:with_ackers",
)

#: What a one-off run (``tuplemesh run``, a LocalCluster) holds for its features while it lasts:
#: each ``(conf, topology) -> tuplemesh.core.run_resources.RunResource``.
RUN_RESOURCES: tuple[str, ...] = ("tuplemesh.state.run_file:RunStateFile",)

#: How a topology's executors take part in guaranteed processing:
#: ``(topology, assignment) -> tuplemesh.core.acking.AckingFactory``.
ACKING = "tuplemesh.acking.mode:acking_of"


def resolve(name: str) -> Any:
    """What ``name`` (``"package.module:attribute"``) points at, imported now: a name that does
    not resolve raises ImportError naming it."""
    module_name, _, attribute = name.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"{name!r} does not resolve: {exc}") from exc
