"""`IngestQueue`: the bounded rows Gateway ``Publish`` hands to one IngestSpout task."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

__all__ = ["IngestQueue"]


class IngestQueue:
    """Bounded rows waiting for an IngestSpout task. Thread-safe."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._rows: deque[list[Any]] = deque()
        self._cond = threading.Condition()
        self.accepted = 0
        self.closed = False

    def put_many(self, rows: list[list[Any]], timeout: float) -> bool:
        """Append ``rows`` once there is room (all at once); False if none came in ``timeout`` or
        the queue is closed (check ``closed`` to tell the two apart)."""
        with self._cond:
            if not self._cond.wait_for(
                lambda: self.closed or not self._rows or len(self._rows) + len(rows) <= self.capacity,
                timeout,
            ):
                return False
            if self.closed:
                return False
            self._rows.extend(rows)
            self.accepted += len(rows)
            return True

    def take(self, limit: int) -> list[list[Any]]:
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
