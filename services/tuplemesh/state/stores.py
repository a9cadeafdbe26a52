"""Which `StateStore` a topology's checkpoints go to: ``topology.state.backend`` resolved by name.

Like ``topology.tuple.serializer``: an alias from `STORES` or a ``"module:attr"`` path to a class
with a ``from_conf(conf)`` classmethod that opens the store from the topology's configuration.
The aliases and `store_class` live in `tuplemesh.plugin_kinds`, which the configuration asks too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from tuplemesh.plugin_kinds import AUTO_BACKEND, STORES, store_class
from tuplemesh.state.base import StateStore

__all__ = ["AUTO_BACKEND", "STORES", "backend_name", "open_store", "store_class"]


def backend_name(conf: Mapping[str, Any]) -> str:
    """The backend ``conf`` selects, with ``auto`` decided."""
    name = str(conf.get("topology.state.backend", AUTO_BACKEND))
    if name == AUTO_BACKEND:
        return "memory" if conf.get("messaging.transport") == "local" else "sqlite"
    return name


def open_store(conf: Mapping[str, Any]) -> StateStore:
    """A new connection to the store ``conf`` selects (may raise `StoreUnavailable`)."""
    return cast(StateStore, store_class(backend_name(conf)).from_conf(conf))
