"""Where the Gateway finds the ingest queues and export logs of the tasks on its worker.

Tasks register when they open/prepare (on their executor thread); the Gateway looks them up by
(topology, worker index, name). One process may hold several workers (local mode), hence the key.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ExportInfo",
    "ExportLog",
    "IngestQueue",
    "exports",
    "ingest_queues",
    "register_export",
    "register_ingest",
]

Key = tuple[str, int, str]  # (topology, worker index, component name)

_lock = threading.Lock()
_ingest: dict[Key, list[IngestQueue]] = {}
_exports: dict[Key, ExportInfo] = {}


class IngestQueue:
    """Bounded rows waiting for an IngestSpout task. Thread-safe."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._rows: deque[list[Any]] = deque()
        self._cond = threading.Condition()
        self.accepted = 0

    def put_many(self, rows: list[list[Any]], timeout: float) -> bool:
        """Append ``rows`` once there is room (all at once); False if none came in ``timeout``."""
        with self._cond:
            if not self._cond.wait_for(
                lambda: not self._rows or len(self._rows) + len(rows) <= self.capacity, timeout
            ):
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

    def __len__(self) -> int:
        return len(self._rows)


class ExportLog:
    """A bounded log of records with offsets (one per ExportBolt task = partition). Thread-safe.

    A list with a head index, not a deque: fetches slice from the middle of the log, and
    indexing into a deque there costs O(n) per record (measured: it capped reads near 80k rows/s).
    """

    def __init__(self, retention: int) -> None:
        self.retention = retention
        self._records: list[list[Any]] = []
        self._head = 0  # index in _records of the first retained record
        self.start = 0  # offset of the first retained record
        self._cond = threading.Condition()

    def __len__(self) -> int:
        return len(self._records) - self._head

    @property
    def end(self) -> int:
        return self.start + len(self)

    def append(self, values: list[Any], stop: threading.Event) -> None:
        """Append, waiting while the log is full (backpressure upstream) until a commit frees room."""
        with self._cond:
            while len(self) >= self.retention and not stop.is_set():
                self._cond.wait(0.5)
            self._records.append(values)

    def fetch(self, start: int, limit: int) -> tuple[list[list[Any]], int]:
        """(records from ``start``, end offset); ValueError when ``start`` was committed away."""
        with self._cond:
            if start < self.start:
                raise ValueError(f"offset {start} is below the retained start {self.start} (committed)")
            first = self._head + (start - self.start)
            return self._records[first : first + limit], self.end

    def commit(self, offset: int) -> int:
        """Forget records below ``offset``; returns the new start."""
        with self._cond:
            drop = max(0, min(offset, self.end) - self.start)
            self._head += drop
            self.start += drop
            if self._head > len(self._records) // 2:  # compact now and then: amortised O(1)
                del self._records[: self._head]
                self._head = 0
            self._cond.notify_all()
            return self.start


@dataclass
class ExportInfo:
    total_partitions: int
    fields: list[str]
    schema: str
    logs: dict[int, ExportLog] = field(default_factory=dict)


def register_ingest(key: Key, queue: IngestQueue) -> None:
    with _lock:
        _ingest.setdefault(key, []).append(queue)


def register_export(
    key: Key, partition: int, log: ExportLog, total: int, fields: list[str], schema: str
) -> None:
    with _lock:
        info = _exports.setdefault(key, ExportInfo(total, fields, schema))
        info.logs[partition] = log


def ingest_queues(key: Key) -> list[IngestQueue]:
    with _lock:
        return list(_ingest.get(key, []))


def exports(key: Key) -> ExportInfo | None:
    with _lock:
        return _exports.get(key)
