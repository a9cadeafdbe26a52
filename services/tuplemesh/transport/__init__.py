"""Transport plugins, selected by ``messaging.transport`` through the alias table `TRANSPORTS`
(kept in `tuplemesh.plugin_kinds` with the check of a plugin's shape, which the configuration
runs too)."""

from __future__ import annotations

from typing import cast

from tuplemesh.plugin_kinds import TRANSPORTS, transport_class
from tuplemesh.transport.base import (
    SHUTDOWN_TASK,
    Binding,
    Capabilities,
    CongestedTasks,
    Connection,
    Context,
    HeldBytes,
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
    "HeldBytes",
    "OnBatch",
    "OnCongestion",
    "SharedServerContext",
    "TaskMessage",
    "make_context",
]


def make_context(name: str) -> Context:
    """A new, unprepared transport context for ``messaging.transport`` = ``name``."""
    return cast(Context, transport_class(name)())
