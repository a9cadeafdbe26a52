"""Stream groupings: which task(s) of a subscribing component receive each emitted tuple.

A `Grouping` is the declaration (what the builder stores); ``chooser(...)`` makes the per-emitting
executor object whose ``choose(values)`` runs on the hot path, and whose ``split(columns, count)``
routes a whole columnar emit at once (`tuplemesh.topology.partition`). Fields grouping hashes with
CRC-32, not Python's ``hash()``, because ``hash(str)`` differs between processes and every worker
must route the same key to the same task.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tuplemesh.plugin_api import CustomStreamGrouping
from tuplemesh.topology.partition import MEMO_LIMIT, partition_by_key, stable_hash
from tuplemesh.topology.tuple import Fields

__all__ = [
    "LOOK_SECONDS",
    "REVIEW_ROWS",
    "AllGrouping",
    "CongestionReports",
    "CustomGrouping",
    "CustomStreamGrouping",
    "DirectGrouping",
    "FieldsGrouping",
    "GlobalGrouping",
    "Grouping",
    "LoadAwareShuffle",
    "LocalOrShuffleGrouping",
    "NoneGrouping",
    "Selection",
    "ShuffleGrouping",
    "TargetProbe",
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
    #: workers may route it by its targets' load (`LoadAwareShuffle`) over ``spread_over``'s
    #: tasks in place of ``chooser``
    load_aware = False

    def validate(self, source_fields: Fields) -> str | None:
        """Problem with this grouping for a stream with ``source_fields``, or None."""
        return None

    def chooser(
        self, target_tasks: tuple[int, ...], local_tasks: frozenset[int], source_fields: Fields
    ) -> TaskChooser:
        raise NotImplementedError

    def spread_over(self, target_tasks: tuple[int, ...], local_tasks: frozenset[int]) -> tuple[int, ...]:
        """The tasks a shuffling grouping spreads over (all of them; local-or-shuffle narrows)."""
        return target_tasks


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


class CongestionReports(Protocol):
    """Remote tasks reported congested (`tuplemesh.core.congestion.CongestionMap`)."""

    @property
    def blocked(self) -> Mapping[int, float]:
        """Task -> the end of its report's lease (monotonic); empty while none is congested.
        Replaced whole on each report."""
        ...


class TargetProbe(Protocol):
    """What a load-aware shuffle reads about its targets (from the emitting thread)."""

    @property
    def reports(self) -> CongestionReports: ...

    @property
    def review_rows(self) -> int:
        """Rows routed one at a time between two looks (`REVIEW_ROWS`, or fewer: at most an
        emit buffer's, so a task left out gets no more than one partial batch meanwhile)."""
        ...

    def with_room(self, choices: list[tuple[int]]) -> list[tuple[int]]:
        """Those of ``choices`` whose task can take more now: a local inbox at most as full as
        a congested task's, a remote task whose report has ended or was cleared."""
        ...

    def not_holding(self, choices: list[tuple[int]]) -> list[tuple[int]]:
        """Those of ``choices`` whose task does not set what it is sent aside now (a task of the
        emitter's worker aligning checkpoint barriers): however empty its inbox, what it gets
        waits in its memory, unbounded by any inbox."""
        ...


#: Rows a load-aware shuffle routes one at a time between two looks at its targets. A look
#: reads a few ring sequences: every 128 rows it is a small part of routing them, and a full
#: target is left within a batch or so. A columnar emit looks once, before it splits.
REVIEW_ROWS = 128
#: While some targets are left out, a look also comes after this long, so a slow stream does
#: not keep a task out for long after it has drained (a clock read per row, only then).
LOOK_SECONDS = 0.01


class LoadAwareShuffle(_RoundRobin):
    """Shuffle by load, as Storm 2's default shuffle (``LoadAwareShuffleGrouping``): round-robin
    over the target tasks that can take more now.

    A plain round-robin gives every target the same share, so one slow task (a busy worker, a
    slow call, a stalled peer) holds the emitter at its rate while the other targets run dry.
    Here a task whose inbox is fuller than ``topology.backpressure.watermark`` of its limit, or
    that its worker reports congested, gets nothing until it has room again; the others take
    its share. Below saturation no target is that full: the plain round-robin, rows spread
    evenly. A row is not routed to a task reported congested since the last look (the emitter
    would wait on it) while another target is left: checked per row, against a map that is
    empty while no task is congested.
    """

    __slots__ = ("_everywhere", "_look_at", "_narrowed", "_probe", "_reports", "_review_rows", "_rows_left")

    def __init__(self, tasks: Sequence[int], probe: TargetProbe) -> None:
        super().__init__(tasks)
        self._everywhere = self._choices
        self._probe = probe
        self._reports = probe.reports  # read per row: an attribute, not a call
        self._review_rows = probe.review_rows
        self._rows_left = self._review_rows
        self._narrowed = False  # some targets left out
        self._look_at = 0.0  # the latest next look while narrowed (monotonic)

    def choose(self, values: Sequence[Any]) -> Sequence[int]:
        self._rows_left -= 1
        if self._rows_left < 0 or (self._narrowed and time.monotonic() >= self._look_at):
            self.review()
        choice = _RoundRobin.choose(self, values)  # the walk over what is chosen now
        blocked = self._reports.blocked
        if blocked:
            until = blocked.get(choice[0])
            if until is not None and until > time.monotonic():  # reported since the last look
                self.review()
                choices = self._choices
                if choice in choices and len(choices) > 1:  # none had room: still not this one
                    self._route_over([c for c in choices if c != choice])
                if choice not in self._choices:
                    choice = _RoundRobin.choose(self, values)
        return choice

    def split(self, columns: Sequence[Sequence[Any]], count: int) -> list[tuple[int, Selection]]:
        self.review()
        return _RoundRobin.split(self, columns, count)

    def review(self) -> None:
        """Route over the targets that can take more now. When none can, keep to those that
        could at the last look: they are draining, where a stalled task never might (all of
        the targets again would hand it rows and the emitter would wait on it). Never to a task
        that sets its input aside while another is left: waiting on a full inbox bounds what
        is queued, setting aside does not. When every target sets its input aside (every task
        of a component aligns the same checkpoint), all of them: kept to the last one that
        began, that one would take everything and reach its alignment bound first."""
        self._rows_left = self._review_rows - 1  # a look comes before the first of the next rows
        probe = self._probe
        everywhere = self._everywhere
        choices = probe.with_room(everywhere)
        if not choices:
            choices = probe.not_holding(self._choices) or probe.not_holding(everywhere) or everywhere
        if choices and choices != self._choices:
            self._route_over(choices)
        if self._narrowed:
            self._look_at = time.monotonic() + LOOK_SECONDS

    def _route_over(self, choices: list[tuple[int]]) -> None:
        self._choices = choices
        self._narrowed = len(choices) < len(self._everywhere)
        self._next %= len(choices)  # the walk goes on near where it was: no task favoured


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
    """Each tuple to one task, evenly spread. Workers route it by load (`LoadAwareShuffle`) unless
    ``topology.disable.loadaware.messaging`` is set; this chooser is the plain spread."""

    load_aware = True

    def chooser(self, target_tasks, local_tasks, source_fields):  # type: ignore[no-untyped-def]
        return _RoundRobin(target_tasks)


@dataclass(frozen=True)
class NoneGrouping(ShuffleGrouping):
    """Storm's 'none': the caller does not care; behaves as shuffle."""


@dataclass(frozen=True)
class LocalOrShuffleGrouping(Grouping):
    """Shuffle among target tasks in the emitting worker when there are any (no serialization);
    by load among them, as shuffle (Storm 2's local-or-shuffle is load-aware too)."""

    load_aware = True

    def chooser(self, target_tasks, local_tasks, source_fields):  # type: ignore[no-untyped-def]
        return _RoundRobin(self.spread_over(target_tasks, local_tasks))

    def spread_over(self, target_tasks: tuple[int, ...], local_tasks: frozenset[int]) -> tuple[int, ...]:
        return tuple(t for t in target_tasks if t in local_tasks) or target_tasks


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
