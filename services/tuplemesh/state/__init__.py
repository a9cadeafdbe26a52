"""Task state that survives failures: the state a stateful bolt sees and where checkpoints live."""

from tuplemesh.state.base import KeyValueState, PartKey, StateRestoreError, StateStore, StoreUnavailable
from tuplemesh.state.components import ReplayableSpout, StatefulBolt
from tuplemesh.state.kv import DictState
from tuplemesh.state.memory import MemoryStore
from tuplemesh.state.sqlite import SqliteStore
from tuplemesh.state.stores import STORES, open_store

__all__ = [
    "STORES",
    "DictState",
    "KeyValueState",
    "MemoryStore",
    "PartKey",
    "ReplayableSpout",
    "SqliteStore",
    "StateRestoreError",
    "StateStore",
    "StatefulBolt",
    "StoreUnavailable",
    "open_store",
]
