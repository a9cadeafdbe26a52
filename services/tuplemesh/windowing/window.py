"""`Window`: the tuples of one window as a windowed bolt's ``execute_window`` gets them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from tuplemesh.topology.tuple import Fields, Tuple

__all__ = ["Window"]


class Window:
    """One evaluated window (Storm's TupleWindow). Treat as read-only.

    ``tuples`` are in arrival order under processing time and in timestamp order (ties in
    arrival order) under event time. ``start`` and ``end`` bound a duration window, ``[start,
    end)`` in seconds of its time; a count window has neither. ``new`` and ``expired`` compare
    with the previous window this task evaluated since it started or was restored.
    """

    __slots__ = ("_previous", "end", "start", "tuples")

    def __init__(
        self,
        tuples: Sequence[Tuple],
        start: float | None,
        end: float | None,
        previous: Sequence[Tuple],
    ) -> None:
        self.tuples = tuples
        self.start = start
        self.end = end
        self._previous = previous

    @property
    def new(self) -> list[Tuple]:
        """The tuples that were not in the previous window."""
        before = {id(t) for t in self._previous}
        return [t for t in self.tuples if id(t) not in before]

    @property
    def expired(self) -> list[Tuple]:
        """The tuples of the previous window that are not in this one."""
        now = {id(t) for t in self.tuples}
        return [t for t in self._previous if id(t) not in now]

    def column(self, name: str) -> list[Any]:
        """The values of field ``name``, one per tuple in window order (as ``Columns.column``
        gives a batch's): aggregate a window over columns, ``sum(window.column("value"))``, with
        no row view touched by your code. A tuple whose stream has no such field raises KeyError
        naming that stream's fields."""
        values: list[Any] = []
        fields: Fields | None = None
        at = 0
        for tup in self.tuples:
            if tup.fields is not fields:  # a window may mix streams: look the position up again
                fields = tup.fields
                at = fields.index(name)
            values.append(tup.values[at])
        return values

    def __len__(self) -> int:
        return len(self.tuples)

    def __iter__(self) -> Iterator[Tuple]:
        return iter(self.tuples)

    def __repr__(self) -> str:
        bounds = "" if self.start is None else f" [{self.start}, {self.end})"
        return f"Window({len(self.tuples)} tuples{bounds})"
