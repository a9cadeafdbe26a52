"""Control markers published into rings in place of a batch (never sent over a transport)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["FLUSH", "STOP", "Batch", "Marker"]


class Batch(list):
    """A batch of ``(task, tuple or payload)`` for one inbox, stamped when it was published.

    Every field has its value from construction on (an executor reads them without asking
    whether they are there); a batch is made while it fills, so the publisher sets the stamp."""

    __slots__ = ("nbytes", "stamp", "trace")

    def __init__(self, items: Iterable[Any] = ()) -> None:
        super().__init__(items)
        #: Payload bytes (set by the receive path, for the worker's ceiling on bytes held)
        self.nbytes = 0
        #: ``time.monotonic()`` when the batch was published into the inbox (None: not yet)
        self.stamp: float | None = None
        #: The OpenTelemetry context of the span that published it (None unless tracing)
        self.trace: object = None


class Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


#: Ask an executor to flush its emit buffers (published by the worker's flush timer).
FLUSH = Marker("FLUSH")
#: Ask a ring's consumer to finish everything before this marker, flush, and exit.
STOP = Marker("STOP")
