"""User metrics: counters, gauges and histograms a component defines through ``context.metrics``.

Each task gets its own handles, written by its executor thread only (a call is a plain add, no
lock); the worker's ``UserMetrics`` keeps every handle and the scrape-time collector sums them by
component, like the runtime's own counters. Exported as ``tuplemesh_user_<name>`` with the labels
``worker`` and ``component``.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Literal

from tuplemesh.buckets import SECONDS_BUCKETS, Buckets
from tuplemesh.errors import TopologyError

__all__ = [
    "PREFIX",
    "TaskMetrics",
    "UserCounter",
    "UserFamily",
    "UserGauge",
    "UserHistogram",
    "UserMetrics",
]

#: What every user metric's exported name starts with, so it never shadows a runtime metric.
PREFIX = "tuplemesh_user_"

Kind = Literal["counter", "gauge", "histogram"]

_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
#: Suffixes Prometheus gives the series of counters and histograms: a name ending in one would
#: read as a series of another metric (``requests_total`` is the counter ``requests``).
_RESERVED_SUFFIXES = ("_total", "_created", "_bucket", "_count", "_sum")


class UserCounter:
    """A monotonic count. ``inc`` is for the task's executor thread only."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        """Add ``amount`` (>= 0: a counter that goes down breaks ``rate()``)."""
        if amount < 0:
            raise ValueError(f"a counter only goes up; inc({amount!r}) refused")
        self.value += amount


class UserGauge:
    """A value that goes up and down; a component's gauge is the sum of its tasks' values."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def set(self, value: float) -> None:
        self.value = value

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount


class UserHistogram:
    """Observations counted per bucket; ``observe`` is for the task's executor thread only."""

    __slots__ = ("buckets",)

    def __init__(self, bounds: Sequence[float]) -> None:
        self.buckets = Buckets(bounds)

    def observe(self, value: float) -> None:
        self.buckets.observe(value)


Handle = UserCounter | UserGauge | UserHistogram


@dataclass
class UserFamily:
    """One user metric of a worker: its definition and every task's handle, with its component."""

    name: str
    kind: Kind
    help: str
    bounds: tuple[float, ...] = ()
    handles: list[tuple[str, Handle]] = field(default_factory=list)

    @property
    def metric(self) -> str:
        """The exported name (a counter's series add ``_total``, a histogram's ``_bucket`` ...)."""
        return PREFIX + self.name


class UserMetrics:
    """Every user metric of one worker. Registration from any thread; handles are per task."""

    def __init__(self) -> None:
        self._families: dict[str, UserFamily] = {}
        self._lock = threading.Lock()

    def for_task(self, component: str, task: int) -> TaskMetrics:
        """What ``context.metrics`` is for one task of ``component``."""
        return TaskMetrics(self, component, task)

    def families(self) -> list[UserFamily]:
        """A copy of the families and their handle lists, sorted by name (for the collector)."""
        with self._lock:
            return [
                UserFamily(f.name, f.kind, f.help, f.bounds, list(f.handles))
                for _, f in sorted(self._families.items())
            ]

    def register(
        self,
        component: str,
        name: str,
        kind: Kind,
        help: str,
        bounds: tuple[float, ...],
        handle: Handle | None,
    ) -> None:
        """Define ``name`` (or check it matches its definition: one name is one metric in a
        worker, else TopologyError) and add ``handle``, a new task's, when there is one."""
        with self._lock:
            family = self._families.get(name)
            if family is None:
                family = self._families[name] = UserFamily(name, kind, help, bounds)
            elif (family.kind, family.help, family.bounds) != (kind, help, bounds):
                raise TopologyError(
                    f"component {component!r}: user metric {name!r} is already a {family.kind} "
                    f"with help {family.help!r}{_bounds_text(family.bounds)}; it cannot also be a "
                    f"{kind} with help {help!r}{_bounds_text(bounds)} (give it another name)"
                )
            if handle is not None:
                family.handles.append((component, handle))


class TaskMetrics:
    """``context.metrics`` of one task: asking twice for one name gives the same handle.

    Define metrics in ``open``/``prepare`` and keep the handles: the lookup takes a lock, the
    handle's ``inc``/``set``/``observe`` does not.
    """

    def __init__(self, registry: UserMetrics, component: str, task: int) -> None:
        self._registry = registry
        self._component = component
        self._task = task
        self._mine: dict[str, Handle] = {}

    def counter(self, name: str, help: str) -> UserCounter:
        """A counter exported as ``tuplemesh_user_<name>_total{worker, component}``."""
        handle = self._get(name, "counter", help, (), UserCounter)
        assert isinstance(handle, UserCounter)
        return handle

    def gauge(self, name: str, help: str) -> UserGauge:
        """A gauge exported as ``tuplemesh_user_<name>{worker, component}``: the sum over the
        component's tasks in the worker."""
        handle = self._get(name, "gauge", help, (), UserGauge)
        assert isinstance(handle, UserGauge)
        return handle

    def histogram(self, name: str, help: str, buckets: Sequence[float] | None = None) -> UserHistogram:
        """A histogram exported as ``tuplemesh_user_<name>{worker, component}`` with the given
        upper bounds (increasing, finite; ``+Inf`` is added), seconds buckets by default."""
        bounds = SECONDS_BUCKETS if buckets is None else self._bounds(name, buckets)
        handle = self._get(name, "histogram", help, tuple(bounds), lambda: UserHistogram(bounds))
        assert isinstance(handle, UserHistogram)
        return handle

    def _get(
        self, name: str, kind: Kind, help: str, bounds: tuple[float, ...], new: Callable[[], Handle]
    ) -> Handle:
        self._check(name, help)
        handle = self._mine.get(name)
        fresh = new() if handle is None else None
        self._registry.register(self._component, name, kind, help, bounds, fresh)
        if fresh is not None:
            self._mine[name] = handle = fresh
        assert handle is not None
        return handle

    def _check(self, name: str, help: str) -> None:
        where = f"component {self._component!r} task {self._task}"
        if not isinstance(name, str) or not _NAME.match(name):
            raise TopologyError(
                f"{where}: user metric name {name!r} is not valid: use letters, digits and "
                "underscores, not starting with a digit"
            )
        for suffix in _RESERVED_SUFFIXES:
            if name.endswith(suffix):
                raise TopologyError(
                    f"{where}: user metric name {name!r} ends in {suffix!r}, which Prometheus "
                    f"gives the series of counters and histograms; name it {name[: -len(suffix)]!r}"
                )
        if not isinstance(help, str) or not help.strip():
            raise TopologyError(f"{where}: user metric {name!r} needs a help text saying what it counts")

    def _bounds(self, name: str, buckets: Sequence[float]) -> tuple[float, ...]:
        bounds = tuple(float(b) for b in buckets)
        ordered = all(a < b for a, b in pairwise(bounds))
        if not bounds or not ordered or not all(math.isfinite(b) for b in bounds):
            raise TopologyError(
                f"component {self._component!r} task {self._task}: user histogram {name!r} needs "
                f"finite, strictly increasing bucket bounds, got {list(buckets)!r}"
            )
        return bounds


def _bounds_text(bounds: tuple[float, ...]) -> str:
    return f" and buckets {list(bounds)!r}" if bounds else ""
