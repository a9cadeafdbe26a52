"""Task state that survives failures: the state a stateful bolt sees and where checkpoints live."""

from tuplemesh.state.base import KeyValueState, PartKey, StateStore, StoreUnavailable
from tuplemesh.state.memory import MemoryStore

__all__ = ["KeyValueState", "MemoryStore", "PartKey", "StateStore", "StoreUnavailable"]
