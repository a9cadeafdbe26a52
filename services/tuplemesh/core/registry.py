"""Every feature a worker process runs: one line each, ``"package.module:factory"``.

The worker's composition root loads these (`tuplemesh.core.feature.load_features`); nothing else
names a feature package, so a feature is added or removed here and nowhere in the worker.
"""

from __future__ import annotations

__all__ = ["FEATURES"]

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
