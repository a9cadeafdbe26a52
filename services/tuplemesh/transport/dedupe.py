"""`DuplicateFilter`: a receiver's memory of what each (sender, session) already delivered.

Senders resend unacknowledged batches after a reconnect; the receiver delivers each sequence
once. Delivery for one (sender, session) is serialised by its own lock, so a stale connection
and its replacement never both deliver a batch. Old sessions are forgotten first (bounded).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from enum import Enum

__all__ = ["DuplicateFilter", "Verdict"]

#: (sender, session) pairs remembered; the oldest is forgotten first.
SESSIONS_REMEMBERED = 4096


class Verdict(Enum):
    DELIVER = "deliver"
    DUPLICATE = "duplicate"
    GAP = "gap"


class DuplicateFilter:
    """Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: OrderedDict[tuple[int, int], int] = OrderedDict()
        self._key_locks: dict[tuple[int, int], threading.Lock] = {}
        self.duplicates = 0
        self.gaps = 0

    def lock(self, key: tuple[int, int]) -> threading.Lock:
        """Hold this while judging and delivering a batch of ``key``."""
        with self._lock:
            lock = self._key_locks.get(key)
            if lock is None:
                lock = self._key_locks[key] = threading.Lock()
            return lock

    def judge(
        self, key: tuple[int, int], sequence: int, first_unacked: int = 0
    ) -> tuple[Verdict, int | None]:
        """What to do with ``sequence`` of ``key``, and the last delivered sequence.

        ``first_unacked`` (when the transport sends it) is the sender's oldest unacknowledged
        sequence: a receiver with no memory of the session starts there and nowhere later, so a
        stale newer batch cannot overtake the in-order resend of older ones.
        """
        with self._lock:
            last = self._last.get(key)
            if last is None and first_unacked and sequence != first_unacked:
                self.gaps += 1
                return Verdict.GAP, None
            if last is not None and sequence <= last:
                self.duplicates += 1
                return Verdict.DUPLICATE, last
            if last is not None and sequence != last + 1:
                self.gaps += 1
                return Verdict.GAP, last
            return Verdict.DELIVER, last

    def last(self, key: tuple[int, int]) -> int | None:
        """The last sequence of ``key`` delivered (None: none remembered)."""
        with self._lock:
            return self._last.get(key)

    def delivered(self, key: tuple[int, int], sequence: int) -> None:
        with self._lock:
            self._last[key] = sequence
            self._last.move_to_end(key)
            while len(self._last) > SESSIONS_REMEMBERED:
                old, _ = self._last.popitem(last=False)
                self._key_locks.pop(old, None)
