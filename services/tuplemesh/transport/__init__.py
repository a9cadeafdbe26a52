"""Transport plugins, selected by ``messaging.transport`` through an alias table."""

from __future__ import annotations

from typing import cast

from tuplemesh.plugins import resolve_plugin
from tuplemesh.transport.base import SHUTDOWN_TASK, Binding, Connection, Context, OnBatch, TaskMessage

__all__ = [
    "SHUTDOWN_TASK",
    "TRANSPORTS",
    "Binding",
    "Connection",
    "Context",
    "OnBatch",
    "TaskMessage",
    "make_context",
]

#: ``messaging.transport`` aliases. Backend modules are named ``*_impl`` so they never shadow
#: the library they wrap (``grpc``, ``zmq``).
TRANSPORTS = {
    "local": "tuplemesh.transport.local:LocalContext",
    "grpc": "tuplemesh.transport.grpc_impl:GrpcContext",
}


def make_context(name: str) -> Context:
    """A new, unprepared transport context for ``messaging.transport`` = ``name``."""
    factory = resolve_plugin("messaging.transport", name, TRANSPORTS)
    return cast(Context, factory())
