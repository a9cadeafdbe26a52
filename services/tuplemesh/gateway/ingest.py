"""`IngestQueue`: the bounded rows Gateway ``Publish`` hands to one IngestSpout task."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from tuplemesh.gateway.ticket import PublishTicket

__all__ = ["IngestEntry", "IngestQueue"]

#: one row waiting for the spout: the ticket that settles it, its index in the request, its values
IngestEntry = tuple[PublishTicket, int, list[Any]]


class IngestQueue:
    """Bounded rows waiting for an IngestSpout task, each with the ticket its outcome settles.
    Thread-safe."""

    def __init__(self, capacity: int, fields: list[str]) -> None:
        self.capacity = capacity
        #: The spout's declared fields: every row must have one value for each.
        self.fields = fields
        self._rows: deque[IngestEntry] = deque()
        self._cond = threading.Condition()
        self.accepted = 0
        self.closed = False

    def put(self, ticket: PublishTicket, rows: list[list[Any]], timeout: float) -> bool:
        """Queue the rows of ``ticket.indices`` (all at once) once there is room; False if none
        came in ``timeout`` or the queue is closed (check ``closed`` to tell the two apart)."""
        entries = [(ticket, index, rows[index]) for index in ticket.indices]
        with self._cond:
            if not self._cond.wait_for(
                lambda: self.closed or not self._rows or len(self._rows) + len(entries) <= self.capacity,
                timeout,
            ):
                return False
            if self.closed:
                return False
            self._rows.extend(entries)
            self.accepted += len(entries)
            return True

    def take(self, limit: int) -> list[IngestEntry]:
        """Up to ``limit`` rows, without waiting."""
        with self._cond:
            n = min(limit, len(self._rows))
            rows = [self._rows.popleft() for _ in range(n)]
            if n:
                self._cond.notify_all()
            return rows

    def close(self) -> None:
        """Refuse rows from now on (the spout stops); rows already queued stay countable."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        return len(self._rows)
