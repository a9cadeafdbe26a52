"""`Tuple` (the values a bolt executes), `AnchoredTuple` (one in a tracked tuple tree) and `Fields`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

__all__ = [
    "DEFAULT_STREAM",
    "SYSTEM_COMPONENT",
    "TICK_STREAM",
    "WATERMARK_STREAM",
    "AnchoredTuple",
    "Fields",
    "Tuple",
    "tick_tuple",
]

DEFAULT_STREAM = "default"
#: Where the runtime's own tuples come from (Storm's ``__system``).
SYSTEM_COMPONENT = "__system"
#: Tick tuples (``topology.tick.tuple.freq.secs``): a bolt task's clock, never user data.
TICK_STREAM = "__tick"
#: Event-time watermarks a windowed bolt sends every task downstream of it: ``[timestamp]``.
WATERMARK_STREAM = "__watermark"


class Fields:
    """Ordered field names of one stream with O(1) name -> index lookup. Immutable."""

    __slots__ = ("_index", "names")

    def __init__(self, names: Sequence[str]) -> None:
        names = tuple(names)
        for name in names:
            if not isinstance(name, str) or not name:
                raise ValueError(f"field names must be non-empty strings, got {name!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate field name in {list(names)}")
        self.names = names
        self._index = {name: i for i, name in enumerate(names)}

    def index(self, name: str) -> int:
        """Position of ``name``; KeyError naming the field and the declared ones otherwise."""
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"no field {name!r}; declared fields are {list(self.names)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Fields) and other.names == self.names

    def __hash__(self) -> int:
        return hash(self.names)

    def __repr__(self) -> str:
        return f"Fields({list(self.names)!r})"


class Tuple:
    """One tuple as a bolt sees it: values plus where they came from. Treat as immutable.

    A tuple delivered inside its worker is shared by every local receiver, unserialized; one
    that crossed workers went through the topology's serializer (msgpack turns tuples into lists).

    ``values`` are the emitted values, in the order of ``fields`` (the stream's declared
    ``Fields``); ``source_component``, ``source_task`` and ``source_stream`` say who emitted it
    on which stream. ``tup[i]``, ``len(tup)`` and iteration work on ``values``; ``tup.get(name)``
    looks a value up by field name.
    """

    __slots__ = ("fields", "source_component", "source_stream", "source_task", "values")

    def __init__(
        self,
        values: Sequence[Any],
        source_task: int,
        source_component: str,
        source_stream: str,
        fields: Fields,
    ) -> None:
        self.values = values
        self.source_task = source_task
        self.source_component = source_component
        self.source_stream = source_stream
        self.fields = fields

    def get(self, field: str) -> Any:
        """Value of the named field."""
        return self.values[self.fields.index(field)]

    def __getitem__(self, index: int) -> Any:
        return self.values[index]

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def is_tick(self) -> bool:
        """Whether this is a tick tuple (the runtime's clock, not data: never ack or anchor it)."""
        return self.source_stream == TICK_STREAM and self.source_component == SYSTEM_COMPONENT

    def __repr__(self) -> str:
        return (
            f"Tuple({list(self.values)!r}, from={self.source_component}:{self.source_task}, "
            f"stream={self.source_stream!r})"
        )


class AnchoredTuple(Tuple):
    """A tuple in at least one tracked tuple tree (guaranteed processing is on).

    ``anchors`` maps each spout tuple's root id to this tuple's edge id in that tree.
    ``ack_val`` is the XOR of the edge ids of the tuples emitted anchored to this one; acking this
    tuple sends ``edge ^ ack_val`` per root to its acker (Storm's scheme). A separate class so that
    tuples outside any tree, the only kind when acking is off, carry nothing extra.
    """

    __slots__ = ("ack_val", "anchors")

    def __init__(
        self,
        values: Sequence[Any],
        source_task: int,
        source_component: str,
        source_stream: str,
        fields: Fields,
        anchors: dict[int, int],
    ) -> None:
        # the base class's assignments, inlined: one Python call less per tracked tuple
        self.values = values
        self.source_task = source_task
        self.source_component = source_component
        self.source_stream = source_stream
        self.fields = fields
        self.anchors = anchors
        self.ack_val = 0


_NO_FIELDS = Fields([])


def tick_tuple() -> Tuple:
    """A tick tuple as a bolt task receives it (Storm's ``__system``/``__tick``)."""
    return Tuple([], -1, SYSTEM_COMPONENT, TICK_STREAM, _NO_FIELDS)
