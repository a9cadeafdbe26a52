"""`RunResources`: what a one-off run (``tuplemesh run``, a `LocalCluster`) holds for its whole
length on behalf of its features, e.g. a checkpointed topology's fresh sqlite file, so that running
a topology again starts it from the beginning. Each feature declares its part
(``FeatureSpec.run_resource``): the run names none of them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuplemesh.core.feature_spec import RunResource, RunResourceFactory, registered_features
from tuplemesh.topology import Topology

__all__ = ["RunResource", "RunResources"]


class RunResources:
    """Every registered feature's part of one run, opened together (in the registry's order) and
    closed together. ``parts``: what opens them (None: the registered features' own)."""

    def __init__(
        self, conf: Mapping[str, Any], topology: Topology, parts: Sequence[RunResourceFactory] | None = None
    ) -> None:
        if parts is None:
            parts = registered_features().run_resources()
        opened: list[RunResource] = []
        try:
            for open_part in parts:
                opened.append(open_part(conf, topology))
        except BaseException:
            _close_all(opened)  # a part that cannot open leaves none of the others behind
            raise
        self.parts: tuple[RunResource, ...] = tuple(opened)

    @property
    def overrides(self) -> dict[str, str]:
        """Config overrides naming what the run holds (set below the topology's own conf)."""
        return {key: value for part in self.parts for key, value in part.overrides.items()}

    @property
    def env(self) -> dict[str, str]:
        """The same, as the environment of the run's worker processes."""
        return {key: value for part in self.parts for key, value in part.env.items()}

    def close(self) -> None:
        """The run is over: release every part (nothing will resume from them), each even when
        another raised (the first error is raised once all were asked). Idempotent."""
        _close_all(self.parts)


def _close_all(parts: Sequence[RunResource]) -> None:
    failed: BaseException | None = None
    for part in parts:
        try:
            part.close()
        except Exception as exc:
            failed = failed or exc
    if failed is not None:
        raise failed
