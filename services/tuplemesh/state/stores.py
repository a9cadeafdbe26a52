"""Which `StateStore` a topology's checkpoints go to: ``topology.state.backend`` resolved by name.

Like ``topology.tuple.serializer``: an alias from `STORES` or a ``"module:attr"`` path to a class
with a ``from_conf(conf)`` classmethod that opens the store from the topology's configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from tuplemesh.errors import PluginError
from tuplemesh.plugins import resolve_plugin
from tuplemesh.state.base import StateStore

__all__ = ["AUTO_BACKEND", "STORES", "backend_name", "open_store", "store_class"]

STORES = {
    "memory": "tuplemesh.state.memory:MemoryStore",
    "sqlite": "tuplemesh.state.sqlite:SqliteStore",
    "redis": "tuplemesh.state.redis:RedisStore",
}

#: The default: ``memory`` when every worker runs in one process (the local transport), else ``sqlite``.
AUTO_BACKEND = "auto"


def backend_name(conf: Mapping[str, Any]) -> str:
    """The backend ``conf`` selects, with ``auto`` decided."""
    name = str(conf.get("topology.state.backend", AUTO_BACKEND))
    if name == AUTO_BACKEND:
        return "memory" if conf.get("messaging.transport") == "local" else "sqlite"
    return name


def store_class(name: str) -> Any:
    """The store class ``name`` stands for (an alias or ``module:attr``); PluginError if none."""
    if name == AUTO_BACKEND:
        return None
    cls = resolve_plugin("topology.state.backend", name, STORES)
    if not callable(getattr(cls, "from_conf", None)):
        raise PluginError(f"topology.state.backend {name!r}: {cls!r} has no from_conf(conf) classmethod")
    return cls


def open_store(conf: Mapping[str, Any]) -> StateStore:
    """A new connection to the store ``conf`` selects (may raise `StoreUnavailable`)."""
    return cast(StateStore, store_class(backend_name(conf)).from_conf(conf))
