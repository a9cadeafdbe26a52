"""`IngestQueue`: the bounded rows Gateway ``Publish`` hands to one IngestSpout task."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuplemesh.gateway.ticket import PublishTicket

__all__ = ["IngestChunk", "IngestEntry", "IngestQueue", "columns_of", "joined_columns"]

#: one row waiting for a checkpoint to commit: the ticket that settles it, its index in the
#: request, its values
IngestEntry = tuple[PublishTicket, int, list[Any]]


@dataclass(slots=True)
class IngestChunk:
    """Consecutive rows of one request, as columns: row ``k`` (``columns[f][k]`` for each field
    ``f``) is the row at ``indices[k]`` of ``ticket``'s request. The spout emits a chunk as one
    batch of columns."""

    ticket: PublishTicket
    indices: Sequence[int]
    columns: list[list[Any]]

    def __len__(self) -> int:
        return len(self.indices)

    def slice(self, start: int, stop: int) -> IngestChunk:
        """Rows ``start`` to ``stop`` (exclusive) of this chunk, in new lists."""
        return IngestChunk(self.ticket, self.indices[start:stop], [c[start:stop] for c in self.columns])

    def entries(self) -> list[IngestEntry]:
        """The chunk row by row."""
        ticket = self.ticket
        rows = zip(*self.columns, strict=True) if self.columns else ([] for _ in self.indices)
        return [(ticket, index, list(row)) for index, row in zip(self.indices, rows, strict=True)]


def columns_of(rows: list[list[Any]], width: int) -> list[list[Any]]:
    """``rows`` (each of ``width`` values) as ``width`` columns."""
    return [[row[field] for row in rows] for field in range(width)]


def joined_columns(chunks: list[IngestChunk], width: int) -> list[list[Any]]:
    """The rows of ``chunks``, in order, as ``width`` columns (one batch to emit)."""
    if len(chunks) == 1:
        return chunks[0].columns
    joined: list[list[Any]] = [[] for _ in range(width)]
    for chunk in chunks:
        for column, part in zip(joined, chunk.columns, strict=True):
            column.extend(part)  # no Python step per value
    return joined


class IngestQueue:
    """Bounded rows waiting for an IngestSpout task, each with the ticket its outcome settles.
    Thread-safe. Rows are kept as the chunks they came in (a request's rows), not one by one:
    a row costs the queue nothing of its own."""

    def __init__(self, capacity: int, fields: list[str]) -> None:
        self.capacity = capacity
        #: The spout's declared fields: every row must have one value for each.
        self.fields = fields
        self._chunks: deque[IngestChunk] = deque()
        self._rows = 0  # rows in _chunks
        self._cond = threading.Condition()
        self.accepted = 0
        self.closed = False

    def put(self, ticket: PublishTicket, columns: list[list[Any]], timeout: float) -> bool:
        """Queue the rows of ``ticket.indices`` (all at once; the request's rows as ``columns``,
        one per field) once there is room; False if none came in ``timeout`` or the queue is
        closed (check ``closed`` to tell the two apart)."""
        indices = ticket.indices
        if len(indices) == ticket.size:  # a first attempt: every row, in order (a range)
            chunk = IngestChunk(ticket, indices, columns)
        else:  # a retry: only the rows the earlier attempts did not complete
            chunk = IngestChunk(ticket, indices, [[column[i] for i in indices] for column in columns])
        count = len(chunk)
        with self._cond:
            if not self._cond.wait_for(
                lambda: self.closed or not self._rows or self._rows + count <= self.capacity,
                timeout,
            ):
                return False
            if self.closed:
                return False
            self._chunks.append(chunk)
            self._rows += count
            self.accepted += count
            return True

    def take(self, limit: int) -> list[IngestChunk]:
        """Up to ``limit`` rows, in order, as chunks (a chunk larger than what is left of the
        limit is split), without waiting."""
        taken: list[IngestChunk] = []
        with self._cond:
            chunks = self._chunks
            left = min(limit, self._rows)
            while left > 0:
                chunk = chunks[0]
                if len(chunk) <= left:
                    taken.append(chunks.popleft())
                    left -= len(chunk)
                else:
                    taken.append(chunk.slice(0, left))
                    # the rest stays queued, in new lists: the columns may be the request's own
                    chunks[0] = chunk.slice(left, len(chunk))
                    left = 0
            if taken:
                self._rows -= sum(len(chunk) for chunk in taken)
                self._cond.notify_all()
        return taken

    def close(self) -> None:
        """Refuse rows from now on (the spout stops); rows already queued stay countable."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        return self._rows
