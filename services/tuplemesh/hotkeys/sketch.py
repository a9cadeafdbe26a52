"""`KeySketch`: the most frequent keys of one stream in bounded memory (Misra-Gries, batched).

Each key seen holds ``[tuples, execute seconds]``. When a new key arrives and the table holds
``capacity`` keys, the table is purged as Apache DataSketches' frequent-items sketch does: the
median count is subtracted from every key and the keys left at zero or below are dropped, so at
most half the table survives and a purge happens at most once per ``capacity / 2`` new keys
(amortised O(log capacity) per tuple). The sum of what purges subtracted is ``offset``: a kept
key's count is at most ``offset`` below its true count, and any key whose true count exceeds
``offset`` is kept. With fewer than ``capacity`` distinct keys nothing is ever purged and every
count is exact.

One executor thread writes a sketch; any thread may read it (``entries`` copies the table, which
purges replace rather than mutate).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

__all__ = ["KeySketch"]


class KeySketch:
    """Frequent keys of one stream, with their tuples and execute seconds."""

    __slots__ = ("capacity", "counts", "offset", "purges", "seconds", "tuples")

    def __init__(self, capacity: int) -> None:
        if capacity < 2:
            raise ValueError(f"a key sketch needs a capacity of at least 2, got {capacity}")
        self.capacity = capacity
        self.counts: dict[Hashable, list[Any]] = {}  # key -> [tuples, execute seconds]
        self.tuples = 0  # every tuple added (exact)
        self.seconds = 0.0  # their execute seconds (exact)
        self.offset = 0  # what purges subtracted: the most a kept count is below the truth
        self.purges = 0

    def add(self, key: Hashable, seconds: float, count: int = 1) -> None:
        """``count`` tuples of ``key`` executed in ``seconds``. An unhashable key (a list value)
        is counted by its ``repr``."""
        self.tuples += count
        self.seconds += seconds
        counts = self.counts
        try:
            entry = counts.get(key)
        except TypeError:
            key = repr(key)
            entry = counts.get(key)
        if entry is None:
            if len(counts) >= self.capacity:
                self._purge()
                counts = self.counts
            counts[key] = [count, seconds]
        else:
            entry[0] += count
            entry[1] += seconds

    def _purge(self) -> None:
        """Subtract the median count from every key, keep those left above zero (with their
        seconds scaled down alike), in a new table (a reader may hold the old one)."""
        ordered = sorted(entry[0] for entry in self.counts.values())
        cut = ordered[(len(ordered) - 1) // 2]
        kept: dict[Hashable, list[Any]] = {}
        for key, (tuples, seconds) in self.counts.items():
            if tuples > cut:
                left = tuples - cut
                kept[key] = [left, seconds * left / tuples]
        self.offset += cut
        self.purges += 1
        self.counts = kept

    def entries(self) -> list[tuple[Hashable, int, float]]:
        """(key, tuples, execute seconds) of every kept key, most tuples first (a copy)."""
        table = self.counts.copy()  # one C call: safe against the writer thread
        rows = [(key, int(entry[0]), float(entry[1])) for key, entry in table.items()]
        rows.sort(key=lambda row: (-row[1], repr(row[0])))
        return rows
