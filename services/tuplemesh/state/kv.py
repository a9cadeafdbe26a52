"""`DictState`: the `KeyValueState` every stateful bolt task gets, a dict snapshotted whole."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tuplemesh.state.codec import decode_items, encode_items

__all__ = ["DictState"]


class DictState:
    """A task's key-value state: a plain dict in the task's own thread (no lock: one writer).

    ``snapshot`` is one blob of every key (the task's part of a checkpoint); ``restore`` builds
    the state a checkpoint held.
    """

    __slots__ = ("_data",)

    def __init__(self, data: dict[Any, Any] | None = None) -> None:
        self._data: dict[Any, Any] = {} if data is None else data

    @classmethod
    def restore(cls, blob: bytes) -> DictState:
        return cls(decode_items(blob))

    def snapshot(self) -> bytes:
        return encode_items(self._data)

    def get(self, key: Any, default: Any = None) -> Any:
        return self._data.get(key, default)

    def put(self, key: Any, value: Any) -> None:
        self._data[key] = value

    def delete(self, key: Any) -> None:
        self._data.pop(key, None)

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter(self._data.items())

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._data[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._data[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"DictState({len(self._data)} keys)"
