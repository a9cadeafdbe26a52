"""Reading a task's part of a committed checkpoint, with the error a user can act on."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tuplemesh.errors import SerializationError
from tuplemesh.state.base import PartKey, StateRestoreError, StateStore

__all__ = ["load_part"]

T = TypeVar("T")


def load_part(store: StateStore, key: PartKey, checkpoint: int, decode: Callable[[bytes], T]) -> T:
    """``key``'s part of committed ``checkpoint``, decoded.

    StateRestoreError (naming topology, component, task and checkpoint) when the part is missing
    or cannot be decoded; StoreUnavailable passes through (retrying may succeed).
    """
    blob = store.get_part(key, checkpoint)
    if blob is None:
        raise StateRestoreError(
            f"{key}: committed checkpoint {checkpoint} holds no state for this task (deleted from "
            "the store, or the topology's components or task counts changed since it was taken); "
            "restore the store or remove the topology's checkpoints to start from empty state"
        )
    try:
        return decode(blob)
    except SerializationError as exc:
        raise StateRestoreError(
            f"{key}: the state of committed checkpoint {checkpoint} is corrupt ({exc}); "
            "restore the store or remove the topology's checkpoints to start from empty state"
        ) from exc
