"""The sqlite backend's specifics and how a backend is chosen (the contract is test_store_contract)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tuplemesh.config import Config
from tuplemesh.errors import ConfigError, PluginError
from tuplemesh.state import MemoryStore, PartKey, SqliteStore, StoreUnavailable, open_store
from tuplemesh.state.stores import backend_name, store_class

KEY = PartKey("topo", "count", 3)
OTHER = PartKey("topo", "count", 4)


def test_sqlite_keeps_its_file_in_write_ahead_log_mode(tmp_path: Path):
    """WAL: the workers of one machine read while one writes (the contract covers the sharing)."""
    path = tmp_path / "s.sqlite"
    SqliteStore(path).close()
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_sqlite_errors_surface_as_store_unavailable(tmp_path: Path):
    (tmp_path / "file").write_text("")
    with pytest.raises(StoreUnavailable, match="not-a-dir"):
        SqliteStore(tmp_path / "file" / "not-a-dir" / "s.sqlite")  # a file where a directory must be
    store = SqliteStore(tmp_path / "s.sqlite")
    store.close()  # a closed connection: every call fails the way an unreachable store does
    with pytest.raises(StoreUnavailable, match=r"s\.sqlite"):
        store.put_part(KEY, 1, b"x")


def test_a_locked_database_is_unavailable_after_the_busy_timeout(tmp_path: Path):
    path = tmp_path / "s.sqlite"
    store = SqliteStore(path, busy_timeout=0.05)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreUnavailable, match="locked"):
            store.increment("topo", "attempt")
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert store.increment("topo", "attempt") == 1  # usable again once the lock is gone
    store.close()


def test_backend_auto_is_memory_for_the_local_transport_and_sqlite_otherwise(tmp_path: Path, monkeypatch):
    assert backend_name(Config({"messaging.transport": "local"})) == "memory"
    assert backend_name(Config({"messaging.transport": "grpc"})) == "sqlite"
    assert isinstance(open_store(Config({"messaging.transport": "local"})), MemoryStore)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    store = open_store(Config({"messaging.transport": "grpc"}))
    default = tmp_path / "xdg" / "tuplemesh" / "state.sqlite"
    assert isinstance(store, SqliteStore) and store.path == default
    store.close()
    assert default.exists() and list(tmp_path.glob("*.sqlite")) == []  # not the working directory
    path = tmp_path / "elsewhere" / "x.sqlite"
    open_store(Config({"topology.state.backend": "sqlite", "topology.state.sqlite.path": str(path)})).close()
    assert path.exists()


def test_the_memory_store_is_one_per_process_so_in_process_workers_share_it():
    assert MemoryStore.from_conf({}) is MemoryStore.from_conf({"anything": 1})


def test_a_backend_may_be_any_class_with_from_conf_named_module_attr():
    assert store_class("tuplemesh.state.memory:MemoryStore") is MemoryStore
    with pytest.raises(PluginError, match="no from_conf"):
        store_class("tuplemesh.state.kv:DictState")
    with pytest.raises(ConfigError, match=r"topology\.state\.backend.*unknown value 'mongo'"):
        Config({"topology.state.backend": "mongo"})
