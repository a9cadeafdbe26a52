"""The interfaces of a user's plugins: a tuple serializer and a custom stream grouping.

Protocols, so a plugin needs no base class; kept out of the compiled modules because interpreted
classes cannot subclass a compiled one, and a plugin may subclass these.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["CustomStreamGrouping", "Decoded", "Serializer"]

#: What ``deserialize`` returns: (source task, stream id, values, anchors or None).
Decoded = tuple[int, int, list[Any], dict[int, int] | None]


class Serializer(Protocol):
    """Encodes one tuple's (source task, stream id, values, anchors). One instance per thread."""

    def serialize(
        self, source_task: int, stream_id: int, values: Sequence[Any], anchors: dict[int, int] | None = None
    ) -> bytes: ...

    def deserialize(self, payload: bytes) -> Decoded: ...


class CustomStreamGrouping(Protocol):
    """User grouping: ``prepare`` once per emitting executor, ``choose_tasks`` per emit."""

    def prepare(self, target_tasks: Sequence[int]) -> None: ...

    def choose_tasks(self, values: Sequence[Any]) -> Sequence[int]: ...
