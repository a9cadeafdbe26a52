"""A topology as a graph for the UI: components (nodes) and subscriptions (edges)."""

from __future__ import annotations

from typing import Any

from tuplemesh.topology.builder import Topology
from tuplemesh.topology.groupings import FieldsGrouping, Grouping

__all__ = ["grouping_name", "topology_graph"]


def grouping_name(grouping: Grouping) -> str:
    """``shuffle``, ``fields``, ``all``, ...: the class name without ``Grouping``, lower case."""
    name = type(grouping).__name__
    name = name.removesuffix("Grouping") or name
    return "".join(("_" + c.lower()) if c.isupper() and i else c.lower() for i, c in enumerate(name))


def topology_graph(topology: Topology) -> dict[str, Any]:
    """Plain data (JSON-ready): every component and every stream a bolt subscribes to."""
    components = [
        {
            "name": name,
            "spout": spec.is_spout,
            "parallelism": spec.parallelism,
            "tasks": spec.num_tasks,
            # the ackers and other components the worker adds to what the user declared
            "system": name.startswith("__"),
        }
        for name, spec in sorted(topology.components.items())
    ]
    streams = [
        {
            "source": sub.source,
            "stream": sub.stream,
            "target": name,
            "grouping": grouping_name(sub.grouping),
            "fields": list(sub.grouping.fields) if isinstance(sub.grouping, FieldsGrouping) else [],
        }
        for name, spec in sorted(topology.components.items())
        for sub in spec.inputs
    ]
    return {"name": topology.name, "components": components, "streams": streams}
