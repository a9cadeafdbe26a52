"""The worker runtime: receive path, executors, transfer path, worker lifecycle, local cluster.

``LocalCluster``, ``RunSummary`` and ``Worker`` are loaded on first use: importing one module of
the package (``tuplemesh.worker.outbox`` from the acking package, say) must not load the whole
runtime, or the runtime's own imports of that package would run into a half-loaded module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuplemesh.worker.local_cluster import LocalCluster, RunSummary
    from tuplemesh.worker.worker import Worker

__all__ = ["LocalCluster", "RunSummary", "Worker"]

_HOMES = {
    "LocalCluster": "tuplemesh.worker.local_cluster",
    "RunSummary": "tuplemesh.worker.local_cluster",
    "Worker": "tuplemesh.worker.worker",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
