"""The state contracts: what a stateful task sees, and the durable store checkpoints are kept in.

State belongs to a (topology, component, task), never to a worker: a task keeps its state when
it moves to another worker. A checkpoint is numbered per topology; every task stores its part of
checkpoint ``n`` as one opaque blob, and the checkpoint counts (is restorable) only once it has
been committed, after every part is stored. A store never returns a part of an uncommitted
checkpoint as the restore point: `last_committed` is the only way to choose one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from tuplemesh.errors import TuplemeshError

__all__ = ["KeyValueState", "PartKey", "StateRestoreError", "StateStore", "StoreUnavailable"]


class StoreUnavailable(TuplemeshError):
    """The state store cannot be reached (or refused the call); retrying later may succeed."""


class StateRestoreError(TuplemeshError):
    """A task's part of the checkpoint being restored is missing or cannot be decoded.

    The message names the topology, component, task and checkpoint: the task stays stopped
    (it processes nothing) until its state is repaired or the checkpoint is discarded.
    """


@dataclass(frozen=True, order=True)
class PartKey:
    """Whose state a checkpoint part is."""

    topology: str
    component: str
    task: int

    def __str__(self) -> str:
        return f"topology {self.topology!r}, component {self.component!r}, task {self.task}"


class KeyValueState(Protocol):
    """A task's key-value state, also usable as a mutable mapping.

    Keys and values are anything the topology's serializer can encode. Changes made between two
    checkpoints are kept in memory and become durable when the next checkpoint commits.
    """

    def get(self, key: Any, default: Any = None) -> Any:
        """The value of ``key``, or ``default`` when it has none."""
        ...

    def put(self, key: Any, value: Any) -> None:
        """Set ``key`` to ``value``."""
        ...

    def delete(self, key: Any) -> None:
        """Remove ``key``; a key that is absent is not an error."""
        ...

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Every (key, value) pair of this task's state."""
        ...

    def __getitem__(self, key: Any) -> Any: ...

    def __setitem__(self, key: Any, value: Any) -> None: ...

    def __delitem__(self, key: Any) -> None: ...

    def __contains__(self, key: object) -> bool: ...

    def __iter__(self) -> Iterator[Any]: ...

    def __len__(self) -> int: ...


class StateStore(Protocol):
    """Durable storage of checkpoint parts, the commit marker and small per-topology counters.

    Every method may raise `StoreUnavailable`; none may half-apply a call (a part is either
    stored whole or not at all). Implementations are safe to call from several threads and from
    several worker processes at once (each process opens its own store from the same settings).
    """

    def put_part(self, key: PartKey, checkpoint: int, blob: bytes) -> None:
        """Store ``key``'s part of ``checkpoint`` (a second put for the same pair replaces it)."""
        ...

    def get_part(self, key: PartKey, checkpoint: int) -> bytes | None:
        """``key``'s part of ``checkpoint``, or None when it was never stored."""
        ...

    def commit(self, topology: str, checkpoint: int) -> None:
        """Mark ``checkpoint`` complete: from now on it may be restored. Never moves backwards."""
        ...

    def last_committed(self, topology: str) -> int | None:
        """The newest committed checkpoint of ``topology``, or None when there is none."""
        ...

    def prune(self, topology: str, below: int) -> None:
        """Forget every part of ``topology`` from checkpoints older than ``below``."""
        ...

    def increment(self, topology: str, counter: str) -> int:
        """Atomically add one to a named per-topology counter (starting at 0); return the new value."""
        ...

    def counter(self, topology: str, counter: str) -> int:
        """A named per-topology counter's value (0 when never incremented)."""
        ...

    def close(self) -> None: ...
