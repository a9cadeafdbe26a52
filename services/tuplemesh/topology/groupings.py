"""Stream groupings: which task(s) of a subscribing component receive each emitted tuple.

A `Grouping` is the declaration (what the builder stores); ``chooser(...)`` makes the per-emitting
executor object whose ``choose(values)`` runs on the hot path. Fields grouping hashes with CRC-32,
not Python's ``hash()``, because ``hash(str)`` differs between processes and every worker must
route the same key to the same task.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import msgpack

from tuplemesh.plugin_api import CustomStreamGrouping
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
    "ShuffleGrouping",
    "TaskChooser",
    "stable_hash",
]


def stable_hash(values: Sequence[Any]) -> int:
    """Process-independent hash of ``values`` (str/bytes/int fast paths, msgpack otherwise)."""
    if len(values) == 1:
        value = values[0]
        kind = type(value)
        if kind is str:
            return zlib.crc32(value.encode())
        if kind is int:
            return value & 0xFFFFFFFF
        if kind is bytes:
            return zlib.crc32(value)
    return zlib.crc32(msgpack.packb(list(values), use_bin_type=True, default=repr))


class TaskChooser(Protocol):
    """Picks target tasks for one emit. Called only from the emitting executor's thread."""

    def choose(self, values: Sequence[Any]) -> Sequence[int]: ...


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


class _Constant:
    __slots__ = ("_tasks",)

    def __init__(self, tasks: Sequence[int]) -> None:
        self._tasks = tuple(tasks)

    def choose(self, values: Sequence[Any]) -> Sequence[int]:
        return self._tasks


class _ByFields:
    """Fields grouping chooser. Single-field keys are memoised (bounded): vocabularies repeat, and
    a dict hit costs a fraction of encoding and hashing the key again."""

    __slots__ = ("_choices", "_count", "_indices", "_memo", "_single")

    MEMO_LIMIT = 65_536

    def __init__(self, tasks: Sequence[int], indices: tuple[int, ...]) -> None:
        self._choices = [(t,) for t in tasks]
        self._count = len(tasks)
        self._indices = indices
        self._single = indices[0] if len(indices) == 1 else None
        self._memo: dict[Any, Sequence[int]] = {}

    def choose(self, values: Sequence[Any]) -> Sequence[int]:
        if self._single is not None:
            value = values[self._single]
            chosen = self._memo.get(value) if type(value) in _MEMO_TYPES else None
            if chosen is None:
                chosen = self._choices[stable_hash((value,)) % self._count]
                if type(value) in _MEMO_TYPES:
                    if len(self._memo) >= self.MEMO_LIMIT:
                        self._memo.clear()
                    self._memo[value] = chosen
            return chosen
        return self._choices[stable_hash([values[i] for i in self._indices]) % self._count]


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


@dataclass(frozen=True)
class CustomGrouping(Grouping):
    """Wraps a user ``CustomStreamGrouping``; each emitting executor gets a deep copy."""

    impl: Any

    def chooser(self, target_tasks, local_tasks, source_fields):  # type: ignore[no-untyped-def]
        import copy

        return _CustomChooser(copy.deepcopy(self.impl), target_tasks)
