"""The transport plugin API: Storm's IContext/IConnection with the two roles split.

The queue layer knows no transport and the transport knows no queues: they meet at
``Connection.send(batch)`` on the sending side and the ``on_batch(batch)`` callback on the receiving
side. A batch is a list of TaskMessages; a TaskMessage is a plain ``(task id, payload bytes)``
tuple (no object per message on the hot path). Task id -1 is the shutdown notice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

__all__ = ["SHUTDOWN_TASK", "Binding", "Connection", "Context", "OnBatch", "TaskMessage"]

#: (task id, payload). A tuple, not a class: creating millions of objects per second costs.
TaskMessage = tuple[int, bytes]

#: Task id of the shutdown notice (Storm's ``task == -1``).
SHUTDOWN_TASK = -1

#: Receiving side callback: called on the transport's receive thread with one batch.
#: It may block (that is backpressure); it returns the task ids it could not deliver.
OnBatch = Callable[[list[TaskMessage]], list[int]]


class Connection(Protocol):
    """Client side of one peer. ``send`` may be called from one thread at a time."""

    def send(self, batch: list[TaskMessage]) -> None:
        """Hand over a batch; blocks while the peer's window is full. Never drops."""
        ...

    def close(self) -> None:
        """Deliver what was accepted if the peer lives, then release resources."""
        ...


class Binding(Protocol):
    """Server side of one (topology, port)."""

    def close(self) -> None:
        """Stop receiving; batches already delivered to ``on_batch`` stay delivered."""
        ...


class Context(Protocol):
    """A transport plugin instance: one per worker (one shared by all workers in local mode)."""

    def prepare(self, conf: Mapping[str, Any]) -> None:
        """Configure from the validated topology config; called once before bind/connect."""
        ...

    def bind(self, topology_id: str, port: int, on_batch: OnBatch) -> Binding:
        """Receive batches for ``topology_id`` on ``port``; each is passed to ``on_batch``."""
        ...

    def connect(self, topology_id: str, host: str, port: int) -> Connection:
        """A connection to the worker bound at ``host:port``. It need not be up yet."""
        ...

    def term(self) -> None:
        """Release everything; further use is an error."""
        ...
