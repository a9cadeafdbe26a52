"""Stream groupings: which task(s) of a subscribing component receive each emitted tuple.

A `Grouping` is the declaration (what the builder stores); ``chooser(...)`` makes the per-emitting
executor object whose ``choose(values)`` runs on the hot path, and whose ``split(columns, count)``
routes a whole columnar emit at once (`tuplemesh.topology.partition`). Fields grouping hashes with
CRC-32, not Python's ``hash()``, because ``hash(str)`` differs between processes and every worker
must route the same key to the same task.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tuplemesh.plugin_api import CustomStreamGrouping
from tuplemesh.topology.partition import MEMO_LIMIT, partition_by_key, stable_hash
from tuplemesh.topology.tuple import Fields

__all__ = [
    "AllGrouping",
    "CustomGrouping",
    "CustomStreamGrouping",
    "DirectGrouping",
    "FieldsGrouping",
    "GlobalGrouping",
    "Grouping",
    "LocalOrShuffleGrouping",
    "NoneGrouping",
    "Selection",
    "ShuffleGrouping",
    "TaskChooser",
    "split_by_rows",
    "stable_hash",
]

#: Which rows of a columnar emit go to one task: a slice, row indices in order, or None (all).
Selection = slice | list[int] | None


class TaskChooser(Protocol):
    """Picks target tasks for one emit. Called only from the emitting executor's thread."""

    def choose(self, values: Sequence[Any]) -> Sequence[int]: ...

    def split(self, columns: Sequence[Sequence[Any]], count: int) -> list[tuple[int, Selection]]:
        """Route ``count`` rows held as ``columns`` at once: (task, the rows it gets), each task
        at most once, none with no rows; the same tasks ``choose`` would pick row by row."""
        ...


def split_by_rows(
    chooser: TaskChooser, columns: Sequence[Sequence[Any]], count: int
) -> list[tuple[int, Selection]]:
    """``split`` one row at a time through ``choose``: for choosers with no columnar rule."""
    parts: dict[int, list[int]] = {}
    rows = zip(*columns, strict=True) if columns else (() for _ in range(count))
    for index, values in enumerate(rows):
        for task in chooser.choose(values):
            part = parts.get(task)
            if part is None:
                parts[task] = [index]
            else:
                part.append(index)
    return list(parts.items())


class Grouping:
    """Declaration of how a subscription distributes tuples; see the subclasses."""

    direct = False

    def validate(self, source_fields: Fields) -> str | None:
        """Problem with this grouping for a stream with ``source_fields``, or None."""
        return None

    def chooser(
        self, target_tasks: tuple[int, ...], local_tasks: frozenset[int], source_fields: Fields
    ) -> TaskChooser:
        raise NotImplementedError


class _RoundRobin:
    """Shuffle as Storm does it: one random permutation per emitting task, walked round-robin.

    Even load over every whole round and no per-emit random call; reshuffling each round cost
    a tenth of a spout's time with two targets (measured).
    """

    __slots__ = ("_choices", "_next")

    def __init__(self, tasks: Sequence[int]) -> None:
        self._choices = [(t,) for t in tasks]
        random.shuffle(self._choices)
        self._next = 0

    def choose(self, values: Sequence[Any]) -> Sequence[int]:
        i = self._next
        if i == len(self._choices):
            i = 0
        self._next = i + 1
        return self._choices[i]

    def split(self, columns: Sequence[Sequence[Any]], count: int) -> list[tuple[int, Selection]]:
        """Contiguous slices, as many rows to each task as ``count`` calls of ``choose`` would
        give it (the walk goes on where it stood), so load stays even across emits."""
        choices = self._choices
        width = len(choices)
        start = self._next % width
        each, extra = divmod(count, width)
        parts: list[tuple[int, Selection]] = []
        low = 0
        for step in range(width):
            size = each + (1 if step < extra else 0)
            if size:
                parts.append((choices[(start + step) % width][0], slice(low, low + size)))
                low += size
        self._next = (start + extra) % width  # where ``choose`` goes on: always a valid position
        return parts


class _Constant:
    __slots__ = ("_tasks",)

    def __init__(self, tasks: Sequence[int]) -> None:
        self._tasks = tuple(tasks)

    def choose(self, values: Sequence[Any]) -> Sequence[int]:
        return self._tasks

    def split(self, columns: Sequence[Sequence[Any]], count: int) -> list[tuple[int, Selection]]:
        return [(task, None) for task in self._tasks] if count else []


class _ByFields:
    """Fields grouping chooser. Single-field keys are memoised (bounded): vocabularies repeat, and
    a dict hit costs a fraction of encoding and hashing the key again."""

    __slots__ = ("_choices", "_count", "_indices", "_memo", "_positions", "_single")

    def __init__(self, tasks: Sequence[int], indices: tuple[int, ...]) -> None:
        self._choices = [(t,) for t in tasks]
        self._count = len(tasks)
        self._indices = indices
        self._single = indices[0] if len(indices) == 1 else None
        self._memo: dict[Any, Sequence[int]] = {}
        self._positions: dict[Any, int] = {}  # split's memo: key -> task position

    def choose(self, values: Sequence[Any]) -> Sequence[int]:
        if self._single is not None:
            value = values[self._single]
            chosen = self._memo.get(value) if type(value) in _MEMO_TYPES else None
            if chosen is None:
                chosen = self._choices[stable_hash((value,)) % self._count]
                if type(value) in _MEMO_TYPES:
                    if len(self._memo) >= MEMO_LIMIT:
                        self._memo.clear()
                    self._memo[value] = chosen
            return chosen
        return self._choices[stable_hash([values[i] for i in self._indices]) % self._count]

    def split(self, columns: Sequence[Sequence[Any]], count: int) -> list[tuple[int, Selection]]:
        """One pass over the key column (compiled); several key fields go row by row."""
        if self._single is None:
            return split_by_rows(self, columns, count)
        parts = partition_by_key(columns[self._single], self._count, self._positions)
        return [(self._choices[i][0], part) for i, part in enumerate(parts) if part]


# Exact types whose equality agrees with stable_hash (True == 1 but hashes differently: excluded).
_MEMO_TYPES = frozenset({str, bytes, int})


@dataclass(frozen=True)
class ShuffleGrouping(Grouping):
    """Each tuple to one task, evenly spread."""

    def chooser(self, target_tasks, local_tasks, source_fields):  # type: ignore[no-untyped-def]
        return _RoundRobin(target_tasks)


@dataclass(frozen=True)
class NoneGrouping(ShuffleGrouping):
    """Storm's 'none': the caller does not care; behaves as shuffle."""


@dataclass(frozen=True)
class LocalOrShuffleGrouping(Grouping):
    """Shuffle among target tasks in the emitting worker when there are any (no serialization)."""

    def chooser(self, target_tasks, local_tasks, source_fields):  # type: ignore[no-untyped-def]
        local = [t for t in target_tasks if t in local_tasks]
        return _RoundRobin(local or target_tasks)


@dataclass(frozen=True)
class FieldsGrouping(Grouping):
    """Tuples with equal values in ``fields`` go to the same task, in every worker."""

    fields: tuple[str, ...]

    def validate(self, source_fields: Fields) -> str | None:
        if not self.fields:
            return "fields grouping needs at least one field"
        missing = [f for f in self.fields if f not in source_fields]
        if missing:
            return f"fields grouping on undeclared field(s) {missing}; declared: {list(source_fields)}"
        return None

    def chooser(self, target_tasks, local_tasks, source_fields):  # type: ignore[no-untyped-def]
        return _ByFields(target_tasks, tuple(source_fields.index(f) for f in self.fields))


@dataclass(frozen=True)
class AllGrouping(Grouping):
    """Every tuple to every task."""

    def chooser(self, target_tasks, local_tasks, source_fields):  # type: ignore[no-untyped-def]
        return _Constant(target_tasks)


@dataclass(frozen=True)
class GlobalGrouping(Grouping):
    """Every tuple to the single task with the lowest id."""

    def chooser(self, target_tasks, local_tasks, source_fields):  # type: ignore[no-untyped-def]
        return _Constant((min(target_tasks),))


@dataclass(frozen=True)
class DirectGrouping(Grouping):
    """The emitter names the task with ``emit_direct``; the stream must be declared direct."""

    direct = True

    def chooser(self, target_tasks, local_tasks, source_fields):  # type: ignore[no-untyped-def]
        return _Constant(target_tasks)  # the set of legal targets; emit_direct picks one


class _CustomChooser:
    __slots__ = ("_impl", "_legal")

    def __init__(self, impl: CustomStreamGrouping, tasks: tuple[int, ...]) -> None:
        self._impl = impl
        self._legal = frozenset(tasks)
        impl.prepare(tasks)

    def choose(self, values: Sequence[Any]) -> Sequence[int]:
        chosen = self._impl.choose_tasks(values)
        for task in chosen:
            if task not in self._legal:
                raise ValueError(f"custom grouping chose task {task}, not one of {sorted(self._legal)}")
        return chosen

    def split(self, columns: Sequence[Sequence[Any]], count: int) -> list[tuple[int, Selection]]:
        return split_by_rows(self, columns, count)


@dataclass(frozen=True)
class CustomGrouping(Grouping):
    """Wraps a user ``CustomStreamGrouping``; each emitting executor gets a deep copy."""

    impl: Any

    def chooser(self, target_tasks, local_tasks, source_fields):  # type: ignore[no-untyped-def]
        import copy

        return _CustomChooser(copy.deepcopy(self.impl), target_tasks)
