"""The plugins a configuration key names: each kind's built-in names and what a plugin of it must be.

``messaging.transport`` and ``topology.state.backend`` each name a plugin: a built-in alias or a
``"module:attr"`` path to the user's own class. Two places load one: the configuration table, which
refuses a value naming no such plugin when the config is built (a bad name fails at load, not in a
worker), and the transport and state packages, which build the plugin. Both ask this module, so the
built-in names and the check of a plugin's shape are written once and agree.

This module sits below all of them: it imports neither `tuplemesh.transport` nor `tuplemesh.state`
(those read their keys through `tuplemesh.config`, and a configuration that imported them back
would make the packages one layer). It reaches a built-in plugin the way it reaches a user's: by
its path. That is why `Capabilities`, the one type a transport plugin must declare, is defined here
and not beside the transport protocols; `tuplemesh.transport` re-exports it for plugin authors.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from tuplemesh.errors import PluginError
from tuplemesh.plugins import resolve_plugin

__all__ = ["AUTO_BACKEND", "STORES", "TRANSPORTS", "Capabilities", "store_class", "transport_class"]

#: ``messaging.transport`` aliases. Backend modules are named ``*_impl`` so they never shadow
#: the library they wrap (``grpc``, ``zmq``).
TRANSPORTS = {
    "local": "tuplemesh.transport.local:LocalContext",
    "grpc": "tuplemesh.transport.grpc_impl:GrpcContext",
    "zmq": "tuplemesh.transport.zmq_impl:ZmqContext",
}

#: ``topology.state.backend`` aliases: where a stateful topology keeps its checkpoints.
STORES = {
    "memory": "tuplemesh.state.memory:MemoryStore",
    "sqlite": "tuplemesh.state.sqlite:SqliteStore",
    "redis": "tuplemesh.state.redis:RedisStore",
}

#: The default state backend: ``memory`` when every worker runs in one process (the local
#: transport), else ``sqlite``; decided by `tuplemesh.state.stores.backend_name`.
AUTO_BACKEND = "auto"


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a plugin can do beyond the protocol; the core asks these instead of ``isinstance``."""

    #: One context serves every worker of a cluster in this process; ports are only names
    #: (Storm's local mode). Otherwise every worker needs its own context and a real port.
    in_process: bool = False
    #: Can serve on the worker's own gRPC server (`SharedServerContext.use_server`), so the
    #: transfer service shares the worker port with Admin, health and reflection.
    shares_server: bool = False
    #: Bindings tell senders which tasks are congested and connections hear it, so a full inbox
    #: need not block the receive thread. Without it a blocking put is the only backpressure.
    reports_congestion: bool = False


def transport_class(name: str) -> Any:
    """The context factory ``messaging.transport`` = ``name`` stands for (an alias or
    ``module:attr``), not yet called; PluginError if it is no transport plugin."""
    factory = resolve_plugin("messaging.transport", name, TRANSPORTS)
    missing = [m for m in ("prepare", "bind", "connect", "term") if not callable(getattr(factory, m, None))]
    if not isinstance(getattr(factory, "capabilities", None), Capabilities):
        missing.append("capabilities")
    if missing:
        raise PluginError(
            f"messaging.transport: {name!r} is not a transport plugin (no {', '.join(missing)})"
        )
    if not _takes_keyword(factory.connect, "held"):
        # said here, when the configuration is built, not as a TypeError when a worker connects
        raise PluginError(
            f"messaging.transport: {name!r}: its connect() takes no 'held' argument (the worker's "
            "ceiling on outgoing bytes, tuplemesh.transport.HeldBytes; accept held=None and "
            "ignore it if the transport keeps nothing unacknowledged)"
        )
    return factory


def _takes_keyword(function: Any, name: str) -> bool:
    """``function`` accepts keyword argument ``name`` (by name or through ``**kwargs``); True
    when its signature cannot be read (a builtin): it is not refused on a guess."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(
        p.kind is p.VAR_KEYWORD or (p.name == name and p.kind is not p.POSITIONAL_ONLY) for p in parameters
    )


def store_class(name: str) -> Any:
    """The store class ``name`` stands for (an alias or ``module:attr``), None for `AUTO_BACKEND`
    (decided later, from the transport); PluginError if it is no store."""
    if name == AUTO_BACKEND:
        return None
    cls = resolve_plugin("topology.state.backend", name, STORES)
    if not callable(getattr(cls, "from_conf", None)):
        raise PluginError(f"topology.state.backend {name!r}: {cls!r} has no from_conf(conf) classmethod")
    return cls
