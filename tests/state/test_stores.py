"""The StateStore contract, run against every backend in this package, and the sqlite specifics."""

from __future__ import annotations

import multiprocessing
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tuplemesh.config import Config
from tuplemesh.errors import ConfigError, PluginError
from tuplemesh.state import MemoryStore, PartKey, SqliteStore, StateStore, StoreUnavailable, open_store
from tuplemesh.state.sqlite import DEFAULT_SQLITE_FILE
from tuplemesh.state.stores import backend_name, store_class

KEY = PartKey("topo", "count", 3)
OTHER = PartKey("topo", "count", 4)


class StoreContract:
    """The StateStore contract. A backend's tests subclass it and define a ``store`` fixture
    that yields an empty, open store of that backend."""

    def test_a_part_is_read_back_whole_and_a_second_put_replaces_it(self, store: StateStore):
        assert store.get_part(KEY, 1) is None
        store.put_part(KEY, 1, b"\x00first")
        store.put_part(OTHER, 1, b"other")
        assert store.get_part(KEY, 1) == b"\x00first"
        store.put_part(KEY, 1, b"second")
        assert store.get_part(KEY, 1) == b"second"
        assert store.get_part(OTHER, 1) == b"other"
        assert store.get_part(KEY, 2) is None

    def test_commit_never_moves_backwards_and_is_per_topology(self, store: StateStore):
        assert store.last_committed("topo") is None
        store.commit("topo", 5)
        store.commit("topo", 3)
        assert store.last_committed("topo") == 5
        assert store.last_committed("elsewhere") is None

    def test_prune_forgets_only_older_checkpoints_of_that_topology(self, store: StateStore):
        foreign = PartKey("elsewhere", "count", 3)
        for checkpoint in (1, 2, 3):
            store.put_part(KEY, checkpoint, b"%d" % checkpoint)
        store.put_part(foreign, 1, b"kept")
        store.prune("topo", 3)
        assert [store.get_part(KEY, c) for c in (1, 2, 3)] == [None, None, b"3"]
        assert store.get_part(foreign, 1) == b"kept"

    def test_counters_start_at_zero_and_count_per_topology_and_name(self, store: StateStore):
        assert store.counter("topo", "attempt") == 0
        assert [store.increment("topo", "attempt") for _ in range(3)] == [1, 2, 3]
        assert store.increment("topo", "checkpoint") == 1
        assert store.increment("elsewhere", "attempt") == 1
        assert store.counter("topo", "attempt") == 3


class TestMemoryAndSqlite(StoreContract):
    @pytest.fixture(params=["memory", "sqlite"])
    def store(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
        made: StateStore = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "s.sqlite")
        yield made
        made.close()


def _bump(path: str, times: int) -> None:
    store = SqliteStore(path)
    for _ in range(times):
        store.increment("topo", "attempt")
    store.close()


def test_sqlite_is_shared_by_processes_and_its_increments_are_atomic(tmp_path: Path):
    path = str(tmp_path / "shared.sqlite")
    SqliteStore(path).close()
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=_bump, args=(path, 100)) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    store = SqliteStore(path)
    assert store.counter("topo", "attempt") == 400
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()


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
    store = open_store(Config({"messaging.transport": "grpc"}))
    assert isinstance(store, SqliteStore) and store.path == Path(DEFAULT_SQLITE_FILE)
    store.close()
    assert (tmp_path / DEFAULT_SQLITE_FILE).exists()
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
