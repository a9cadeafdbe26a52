"""`StreamPlan`: one output stream of a component as the emit path routes it, part of `WorkerPlan`."""

from __future__ import annotations

from dataclasses import dataclass

from tuplemesh.topology import Fields
from tuplemesh.topology.groupings import Grouping

__all__ = ["StreamPlan"]


@dataclass(frozen=True)
class StreamPlan:
    """One output stream of a component: its wire id, fields, and its subscribers' tasks."""

    stream: str
    stream_id: int
    fields: Fields
    direct: bool
    #: (grouping, tasks of the subscribing component) for every non-direct subscription
    targets: tuple[tuple[Grouping, tuple[int, ...]], ...]
    #: every task subscribing with direct_grouping
    direct_targets: frozenset[int]
