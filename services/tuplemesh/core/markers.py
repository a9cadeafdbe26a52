"""Control markers published into rings in place of a batch (never sent over a transport)."""

from __future__ import annotations

__all__ = ["FLUSH", "STOP", "Batch", "Marker"]


class Batch(list):
    """A batch of ``(task, tuple or payload)`` for one inbox, stamped when it was published."""

    __slots__ = ("nbytes", "stamp", "trace")

    #: Payload bytes (set by the receive path, for the worker's ceiling on bytes held)
    nbytes: int
    #: ``time.monotonic()`` when the batch was published into the inbox
    stamp: float
    #: The OpenTelemetry context of the span that published it (set only while tracing)
    trace: object


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
