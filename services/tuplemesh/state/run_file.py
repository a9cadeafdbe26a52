"""`RunStateFile`: the sqlite file of one run (``tuplemesh run``, a `LocalCluster`).

A one-off run gets a fresh file of its own, so running a topology again starts it from the
beginning rather than from the last run's final checkpoint; ``topology.state.sqlite.path``, when
set, decides the file instead.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any

from tuplemesh.config import env_name
from tuplemesh.state.sqlite import SQLITE_PATH_KEY
from tuplemesh.state.stores import backend_name
from tuplemesh.state.wiring import is_stateful
from tuplemesh.topology.builder import Topology

__all__ = ["RunStateFile"]


class RunStateFile:
    """The sqlite file of one run: a new temporary directory, removed by `close`, when the run's
    topology is checkpointed in sqlite and ``topology.state.sqlite.path`` is not set. ``overrides``
    (for a Config) and ``env`` (for worker processes) name it; both are empty otherwise."""

    def __init__(self, conf: Mapping[str, Any], topology: Topology) -> None:
        self.directory: str | None = None
        self.overrides: dict[str, str] = {}
        if is_stateful(topology) and backend_name(conf) == "sqlite" and not conf.get(SQLITE_PATH_KEY):
            self.directory = tempfile.mkdtemp(prefix="tuplemesh-run-")
            self.overrides = {SQLITE_PATH_KEY: os.path.join(self.directory, "state.sqlite")}

    @property
    def env(self) -> dict[str, str]:
        return {env_name(key): value for key, value in self.overrides.items()}

    def close(self) -> None:
        """Remove the run's file (the run is over: nothing will resume from it). Idempotent."""
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
