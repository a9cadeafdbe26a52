"""`Columns`: tuples of one stream from one source task, held as one sequence per field.

What a bolt's columnar entry point ``process(batch)`` receives, and what travels between workers
when a component emits with ``emit_columns``: a column of words is one list, not a list per word.
Row views (`Tuple`) are made only when asked for (``tuples()``, iteration, ``row(i)``), e.g. to
feed a bolt that has only ``execute`` or ``execute_batch``.

With acking on, a batch may be one node of a tuple tree as a whole (``anchors``: root id -> this
batch's edge id, and ``ack_val``, as on an `AnchoredTuple`): a spout's ``emit_columns`` with a
``batch_id`` roots one tree for the whole batch, each task's part of it travels with one edge id,
and a bolt acks, fails or anchors to the batch once, not per row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tuplemesh.topology.tuple import DEFAULT_STREAM, Fields, Tuple

__all__ = ["Columns"]


class Columns:
    """A batch of tuples as columns. Treat as immutable: a batch delivered inside its worker is
    shared by every local receiver.

    ``len(batch)`` rows; ``batch.column("word")`` the values of one field, in row order;
    ``batch.columns`` every column in the order of ``fields`` (the stream's declared `Fields`);
    ``source_component``, ``source_task`` and ``source_stream`` say who emitted it on which
    stream, as on a `Tuple`. Iterating gives a `Tuple` per row.
    """

    __slots__ = (
        "_columns",
        "_length",
        "_tuples",
        "ack_val",
        "anchors",
        "fields",
        "on_rows",
        "source_component",
        "source_stream",
        "source_task",
    )

    def __init__(
        self,
        columns: Sequence[Sequence[Any]],
        length: int,
        fields: Fields,
        source_task: int = -1,
        source_component: str = "",
        source_stream: str = DEFAULT_STREAM,
        tuples: list[Tuple] | None = None,
        anchors: dict[int, int] | None = None,
    ) -> None:
        self._columns = columns
        #: root id -> this batch's edge id in that tree, when the batch is tracked as a whole
        self.anchors = anchors
        #: XOR of the edge ids of what was emitted anchored to this batch (acking)
        self.ack_val = 0
        #: Acking: makes a batch tracked as a whole into rows tracked one by one, the first time
        #: its rows are asked for (set by the executor before a bolt sees the batch), so that a
        #: bolt may ack, fail or anchor to the batch once, or to its rows one by one
        self.on_rows: Callable[[Columns], list[Tuple]] | None = None
        self._length = length
        self.fields = fields
        self.source_task = source_task
        self.source_component = source_component
        self.source_stream = source_stream
        self._tuples = tuples

    @staticmethod
    def from_tuples(tuples: list[Tuple]) -> Columns:
        """The columns of ``tuples``, which share one source and stream (the first one's); the
        tuples themselves are kept as the row views (with their anchors, when tracked)."""
        first = tuples[0]
        width = len(first.fields)
        columns: list[list[Any]] = [[] for _ in range(width)]
        for tup in tuples:
            values = tup.values
            for i in range(width):
                columns[i].append(values[i])
        return Columns(
            columns,
            len(tuples),
            first.fields,
            first.source_task,
            first.source_component,
            first.source_stream,
            tuples,
        )

    @staticmethod
    def join(pieces: list[Columns | list[Tuple]]) -> Columns:
        """One batch of ``pieces`` (batches, or lists of tuples) of one source and stream, their
        rows in order. Batches of columns are joined column by column; where any piece is a list
        of tuples, the tuples are kept as the row views (their anchors, when tracked)."""
        first = pieces[0]
        if len(pieces) == 1 and isinstance(first, Columns):
            return first
        for piece in pieces:
            if isinstance(piece, Columns) and piece.anchors is not None:
                raise ValueError("a batch tracked as a whole is acked as a whole: it joins no other")
        batches = [p for p in pieces if isinstance(p, Columns)]
        if len(batches) < len(pieces) or not batches[0]._columns:
            tuples: list[Tuple] = []
            for piece in pieces:
                tuples.extend(piece.tuples() if isinstance(piece, Columns) else piece)
            return Columns.from_tuples(tuples)
        head = batches[0]
        columns = [list(column) for column in head._columns]
        length = head._length
        for batch in batches[1:]:
            length += batch._length
            for joined, column in zip(columns, batch._columns, strict=True):
                joined.extend(column)
        return Columns(
            columns, length, head.fields, head.source_task, head.source_component, head.source_stream
        )

    @property
    def columns(self) -> Sequence[Sequence[Any]]:
        """Every column, in the order of ``fields``."""
        return self._columns

    def column(self, name: str) -> Sequence[Any]:
        """The values of field ``name``, one per row; KeyError naming the declared fields."""
        return self._columns[self.fields.index(name)]

    def __len__(self) -> int:
        return self._length

    def row(self, index: int) -> Tuple:
        """Row ``index`` as a `Tuple`."""
        return self.tuples()[index]

    @property
    def tracked_whole(self) -> bool:
        """Whether the batch is one node of its tuple trees now (acked, failed and anchored to as
        a whole): tracked as a whole, and its rows not made into rows tracked one by one."""
        return self.anchors is not None and self._tuples is None

    def rows_made(self, rows: list[Tuple]) -> None:
        """Its rows are now ``rows``, tracked one by one (see ``on_rows``)."""
        self._tuples = rows

    def tuples(self) -> list[Tuple]:
        """A `Tuple` per row, in order (made once, on the first call)."""
        made = self._tuples
        if made is None and self.anchors is not None:
            if self.on_rows is not None:
                return self.on_rows(self)  # rows tracked one by one from now on
            return self.row_values_as_tuples()  # a look (an observer's), not the bolt's rows
        if made is None:
            made = self.row_values_as_tuples()
            self._tuples = made
        return made

    def row_values_as_tuples(self) -> list[Tuple]:
        """A new untracked `Tuple` per row (nothing is kept)."""
        src, component, stream, fields = (
            self.source_task,
            self.source_component,
            self.source_stream,
            self.fields,
        )
        if self._columns:
            return [
                Tuple(values, src, component, stream, fields) for values in zip(*self._columns, strict=True)
            ]
        return [Tuple((), src, component, stream, fields) for _ in range(self._length)]  # no fields

    def __iter__(self) -> Iterator[Tuple]:
        return iter(self.tuples())

    def slice(self, start: int, stop: int) -> Columns:
        """Rows ``start`` to ``stop`` (exclusive) as a batch of their own (untracked batches only:
        a batch tracked as a whole is acked as a whole)."""
        if self.anchors is not None:
            raise ValueError("a batch tracked as a whole is acked as a whole: it cannot be sliced")
        stop = min(stop, self._length)
        tuples = None if self._tuples is None else self._tuples[start:stop]
        return Columns(
            [column[start:stop] for column in self._columns],
            max(0, stop - start),
            self.fields,
            self.source_task,
            self.source_component,
            self.source_stream,
            tuples,
        )

    def __repr__(self) -> str:
        return (
            f"Columns({len(self)} rows of {list(self.fields)}, "
            f"from={self.source_component}:{self.source_task}, stream={self.source_stream!r})"
        )
