"""Transport plugins, selected by ``messaging.transport`` through an alias table."""

from __future__ import annotations

from typing import cast

from tuplemesh.errors import PluginError
from tuplemesh.plugins import resolve_plugin
from tuplemesh.transport.base import (
    SHUTDOWN_TASK,
    Binding,
    Capabilities,
    CongestedTasks,
    Connection,
    Context,
    OnBatch,
    OnCongestion,
    SharedServerContext,
    TaskMessage,
)
from tuplemesh.transport.stats import BindingStats, ConnectionStats

__all__ = [
    "SHUTDOWN_TASK",
    "TRANSPORTS",
    "Binding",
    "BindingStats",
    "Capabilities",
    "CongestedTasks",
    "Connection",
    "ConnectionStats",
    "Context",
    "OnBatch",
    "OnCongestion",
    "SharedServerContext",
    "TaskMessage",
    "make_context",
]

#: ``messaging.transport`` aliases. Backend modules are named ``*_impl`` so they never shadow
#: the library they wrap (``grpc``, ``zmq``).
TRANSPORTS = {
    "local": "tuplemesh.transport.local:LocalContext",
    "grpc": "tuplemesh.transport.grpc_impl:GrpcContext",
    "zmq": "tuplemesh.transport.zmq_impl:ZmqContext",
}


def make_context(name: str) -> Context:
    """A new, unprepared transport context for ``messaging.transport`` = ``name``."""
    factory = resolve_plugin("messaging.transport", name, TRANSPORTS)
    missing = [m for m in ("prepare", "bind", "connect", "term") if not callable(getattr(factory, m, None))]
    if not isinstance(getattr(factory, "capabilities", None), Capabilities):
        missing.append("capabilities")
    if missing:
        raise PluginError(
            f"messaging.transport: {name!r} is not a transport plugin (no {', '.join(missing)})"
        )
    return cast(Context, factory())
