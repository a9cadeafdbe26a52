"""The interfaces of a user's plugins: a tuple serializer and a custom stream grouping.

Protocols, so a plugin needs no base class; kept out of the compiled modules because interpreted
classes cannot subclass a compiled one, and a plugin may subclass these.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["CustomStreamGrouping", "Decoded", "DecodedRows", "RowsSerializer", "Serializer"]

#: What ``deserialize`` returns: (source task, stream id, values, anchors or None).
Decoded = tuple[int, int, list[Any], dict[int, int] | None]


class Serializer(Protocol):
    """Encodes one tuple's (source task, stream id, values, anchors). One instance per thread."""

    def serialize(
        self, source_task: int, stream_id: int, values: Sequence[Any], anchors: dict[int, int] | None = None
    ) -> bytes:
        """One tuple as bytes (``anchors`` only for a tuple in a tracked tuple tree)."""
        ...

    def deserialize(self, payload: bytes) -> Decoded:
        """The tuple ``serialize`` encoded, as ``Decoded``."""
        ...


#: What ``deserialize_rows`` returns: (source task, stream id, the values of each tuple).
DecodedRows = tuple[int, int, list[list[Any]]]


@runtime_checkable
class RowsSerializer(Serializer, Protocol):
    """A serializer that also encodes many untracked tuples of one source and stream in one call.

    The runtime frames the rows body behind a header starting with the byte 0xc1
    (``tuplemesh.serialization.ROWS_MARKER``), and uses the same two methods for columnar emits
    (one list of values per field instead of one per row) behind 0xc2 (``COLUMNS_MARKER``): a
    serializer with these methods must never start a ``serialize`` payload with either byte.
    Without them, each tuple is sent as its own payload.
    """

    def serialize_rows(self, source_task: int, stream_id: int, rows: Sequence[Sequence[Any]]) -> bytes:
        """The values of many tuples of one source task and stream as one body."""
        ...

    def deserialize_rows(self, body: bytes) -> DecodedRows:
        """The rows ``serialize_rows`` encoded, as ``DecodedRows``."""
        ...


class CustomStreamGrouping(Protocol):
    """User grouping: ``prepare`` once per emitting executor, ``choose_tasks`` per emit."""

    def prepare(self, target_tasks: Sequence[int]) -> None:
        """``target_tasks``: the task ids of the subscribing bolt, the only ones to choose from."""
        ...

    def choose_tasks(self, values: Sequence[Any]) -> Sequence[int]:
        """The tasks that get the tuple with these ``values``: any of ``target_tasks`` (another
        task raises ``ValueError`` naming it)."""
        ...
