"""Where checkpoints are kept when the configuration does not say, and what a start resumes.

A worker (``tuplemesh worker``) keeps its sqlite file at a stable place, so a restarted worker
resumes its topology: ``$XDG_STATE_HOME/tuplemesh/state.sqlite`` (``~/.local/state/...`` when
XDG_STATE_HOME is not set), whatever the working directory. A one-off run (``tuplemesh run``, a
`LocalCluster`) gets a fresh file of its own instead (`RunStateFile`), so running a topology
again starts it from the beginning rather than from the last run's final checkpoint. Setting
``topology.state.sqlite.path`` decides the file in both cases.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuplemesh.config import env_name
from tuplemesh.redis_address import RedisAddress
from tuplemesh.state.base import StateStore
from tuplemesh.state.memory import MemoryStore
from tuplemesh.state.stores import backend_name
from tuplemesh.topology.builder import Topology

__all__ = ["SQLITE_PATH_KEY", "RunStateFile", "default_sqlite_path", "log_resume", "store_location"]

log = logging.getLogger(__name__)

SQLITE_PATH_KEY = "topology.state.sqlite.path"

#: Topologies whose resume was logged at WARNING by this process: a rescale starts the worker
#: again in the same process, and says so at INFO only.
_announced: set[str] = set()


def default_sqlite_path() -> Path:
    """The sqlite file of a worker whose configuration names none (see the module docstring)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "tuplemesh" / "state.sqlite"


class RunStateFile:
    """The sqlite file of one run: a new temporary directory, removed by `close`, when the run's
    topology is checkpointed in sqlite and ``topology.state.sqlite.path`` is not set. ``overrides``
    (for a Config) and ``env`` (for worker processes) name it; both are empty otherwise."""

    def __init__(self, conf: Mapping[str, Any], topology: Topology) -> None:
        # here, not at the top: the wiring imports the coordinator, which imports this module
        from tuplemesh.state.wiring import is_stateful

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


def store_location(store: StateStore) -> tuple[str, str]:
    """Where ``store`` keeps checkpoints (never a password), and how to start afresh instead."""
    path = getattr(store, "path", None)
    if isinstance(path, Path):
        return (
            f"sqlite file {path.resolve()}",
            f"stop the workers and remove that file, or set {SQLITE_PATH_KEY} to another file",
        )
    address = getattr(store, "address", None)
    if isinstance(address, RedisAddress):
        return f"redis store {address}", "use another redis db (topology.state.redis.url) or topology name"
    if isinstance(store, MemoryStore):
        return "this process's memory store", "use another topology name"
    return f"the {type(store).__name__} store", "clear the store or use another topology name"


def log_resume(store: StateStore, topology: str, attempt: int) -> None:
    """Say, once per process and topology, that this start resumes from a committed checkpoint
    kept from an earlier start (nothing when the store holds none)."""
    last = store.last_committed(topology)
    if last is None:
        return
    level = logging.INFO if topology in _announced else logging.WARNING
    _announced.add(topology)
    where, afresh = store_location(store)
    log.log(
        level,
        "topology %r resumes from checkpoint %d committed in %s (worker start %d of this "
        "topology); to start from the beginning instead, %s",
        topology,
        last,
        where,
        attempt,
        afresh,
    )
