"""`Sequence`: a counter one thread writes and others read (LMAX's Sequence, without padding).

CPython's GIL makes a single attribute store visible to every thread atomically, so no fences
or cache-line padding are needed; hot paths read and write ``.value`` directly.
"""

from __future__ import annotations

from collections.abc import Iterable

INITIAL_VALUE = -1


class Sequence:
    """A monotonically advancing position in a ring. Thread-safe for one writer, many readers."""

    __slots__ = ("value",)

    def __init__(self, initial: int = INITIAL_VALUE) -> None:
        self.value = initial

    def get(self) -> int:
        """Current value. Any thread."""
        return self.value

    def set(self, value: int) -> None:
        """Store a new value. Owning thread only."""
        self.value = value

    def __repr__(self) -> str:
        return f"Sequence({self.value})"


def minimum_sequence(sequences: Iterable[Sequence], default: int) -> int:
    """Smallest value among ``sequences``, or ``default`` when there are none. Any thread."""
    lowest = default
    for seq in sequences:
        value = seq.value
        if value < lowest:
            lowest = value
    return lowest
