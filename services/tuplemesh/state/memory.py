"""A state store in process memory: for tests and single-process (local transport) runs only.

It survives nothing: a process that dies takes every checkpoint with it. Every worker of one
process (the local transport runs them all in one) shares the store ``from_conf`` returns.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from tuplemesh.state.base import PartKey

__all__ = ["MemoryStore"]


class MemoryStore:
    """`StateStore` in a dict, guarded by one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parts: dict[tuple[PartKey, int], bytes] = {}
        self._committed: dict[str, int] = {}
        self._counters: dict[tuple[str, str], int] = {}

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> MemoryStore:
        """The one store of this process (the conf names nothing for it)."""
        return _SHARED

    def put_part(self, key: PartKey, checkpoint: int, blob: bytes) -> None:
        with self._lock:
            self._parts[(key, checkpoint)] = bytes(blob)

    def get_part(self, key: PartKey, checkpoint: int) -> bytes | None:
        with self._lock:
            return self._parts.get((key, checkpoint))

    def commit(self, topology: str, checkpoint: int) -> None:
        with self._lock:
            if checkpoint > self._committed.get(topology, -1):
                self._committed[topology] = checkpoint

    def last_committed(self, topology: str) -> int | None:
        with self._lock:
            return self._committed.get(topology)

    def prune(self, topology: str, below: int) -> None:
        with self._lock:
            stale = [pair for pair in self._parts if pair[0].topology == topology and pair[1] < below]
            for pair in stale:
                del self._parts[pair]

    def increment(self, topology: str, counter: str) -> int:
        with self._lock:
            value = self._counters.get((topology, counter), 0) + 1
            self._counters[(topology, counter)] = value
            return value

    def counter(self, topology: str, counter: str) -> int:
        with self._lock:
            return self._counters.get((topology, counter), 0)

    def close(self) -> None:
        pass


_SHARED = MemoryStore()
