"""Where a store keeps its checkpoints, said plainly, and the line a start that resumes logs.

A worker (``tuplemesh worker``) keeps its sqlite file at a stable place
(`tuplemesh.state.sqlite.default_sqlite_path`), so a restarted worker resumes its topology; a
one-off run gets a fresh file (`tuplemesh.state.run_file.RunStateFile`). Either way a start that
resumes from a committed checkpoint says so, once, naming where it is kept.
"""

from __future__ import annotations

import logging
from pathlib import Path

from tuplemesh.redis_address import RedisAddress
from tuplemesh.state.base import StateStore
from tuplemesh.state.memory import MemoryStore
from tuplemesh.state.sqlite import SQLITE_PATH_KEY

__all__ = ["log_resume", "store_location"]

log = logging.getLogger(__name__)

#: Topologies whose resume was logged at WARNING by this process: a rescale starts the worker
#: again in the same process, and says so at INFO only.
_announced: set[str] = set()


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
