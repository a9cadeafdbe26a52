"""`SqliteStore`: checkpoints in one SQLite file (standard library), shared by the worker
processes of one machine.

WAL journaling lets readers run beside the one writer; every call is one transaction, so a part,
a commit marker or a counter is stored whole or not at all. Any sqlite error (a locked file past
the busy timeout, a full disk, a corrupt file) surfaces as `StoreUnavailable`: the checkpoint
that needed it is abandoned and the next one tries again.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from tuplemesh.state.base import PartKey, StoreUnavailable

__all__ = ["SQLITE_PATH_KEY", "SqliteStore", "default_sqlite_path"]

SQLITE_PATH_KEY = "topology.state.sqlite.path"


def default_sqlite_path() -> Path:
    """The sqlite file of a worker whose configuration names none: a stable place, so a restarted
    worker resumes its topology, whatever its working directory:
    ``$XDG_STATE_HOME/tuplemesh/state.sqlite`` (``~/.local/state/...`` without XDG_STATE_HOME)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "tuplemesh" / "state.sqlite"


_SCHEMA = """
CREATE TABLE IF NOT EXISTS parts (
    topology TEXT NOT NULL, component TEXT NOT NULL, task INTEGER NOT NULL,
    checkpoint INTEGER NOT NULL, blob BLOB NOT NULL,
    PRIMARY KEY (topology, checkpoint, component, task)
);
CREATE TABLE IF NOT EXISTS committed (topology TEXT PRIMARY KEY, checkpoint INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS counters (
    topology TEXT NOT NULL, name TEXT NOT NULL, value INTEGER NOT NULL,
    PRIMARY KEY (topology, name)
);
"""

T = TypeVar("T")


class SqliteStore:
    """`StateStore` in a SQLite file. One connection per instance, guarded by a lock."""

    def __init__(self, path: str | os.PathLike[str], busy_timeout: float = 10.0) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # autocommit mode (isolation_level=None): each call below opens its own transaction
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            self._use_wal(busy_timeout)
            # NORMAL in WAL mode: a commit survives the process being killed (what checkpoints are
            # for); a power loss may take the last commits back: the mesh then resumes from an
            # older checkpoint, still a consistent one
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"sqlite state store {str(self.path)!r}: {exc}") from exc

    def _use_wal(self, busy_timeout: float) -> None:
        """Switch the file to WAL. Switching needs the file to itself, and SQLite answers "database
        is locked" at once (no busy wait) while another process opens it too, as the workers of
        one machine do when they start together: retry until the busy timeout."""
        deadline = time.monotonic() + busy_timeout
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> SqliteStore:
        """The store at ``topology.state.sqlite.path``; when it is empty, the stable file of
        `default_sqlite_path` (a one-off run sets a fresh path)."""
        return cls(conf.get(SQLITE_PATH_KEY) or default_sqlite_path())

    def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    result = fn(self._db)
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
                return result
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"sqlite state store {str(self.path)!r}: {exc}") from exc

    def put_part(self, key: PartKey, checkpoint: int, blob: bytes) -> None:
        self._run(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO parts VALUES (?, ?, ?, ?, ?)",
                (key.topology, key.component, key.task, checkpoint, bytes(blob)),
            )
        )

    def get_part(self, key: PartKey, checkpoint: int) -> bytes | None:
        row = self._run(
            lambda db: db.execute(
                "SELECT blob FROM parts WHERE topology=? AND checkpoint=? AND component=? AND task=?",
                (key.topology, checkpoint, key.component, key.task),
            ).fetchone()
        )
        return None if row is None else bytes(row[0])

    def commit(self, topology: str, checkpoint: int) -> None:
        self._run(
            lambda db: db.execute(
                "INSERT INTO committed VALUES (?, ?) ON CONFLICT(topology) DO UPDATE "
                "SET checkpoint = max(checkpoint, excluded.checkpoint)",
                (topology, checkpoint),
            )
        )

    def last_committed(self, topology: str) -> int | None:
        row = self._run(
            lambda db: db.execute("SELECT checkpoint FROM committed WHERE topology=?", (topology,)).fetchone()
        )
        return None if row is None else int(row[0])

    def prune(self, topology: str, below: int) -> None:
        self._run(
            lambda db: db.execute("DELETE FROM parts WHERE topology=? AND checkpoint<?", (topology, below))
        )

    def increment(self, topology: str, counter: str) -> int:
        def bump(db: sqlite3.Connection) -> int:
            db.execute(
                "INSERT INTO counters VALUES (?, ?, 1) "
                "ON CONFLICT(topology, name) DO UPDATE SET value = value + 1",
                (topology, counter),
            )
            row = db.execute(
                "SELECT value FROM counters WHERE topology=? AND name=?", (topology, counter)
            ).fetchone()
            return int(row[0])

        return self._run(bump)

    def counter(self, topology: str, counter: str) -> int:
        row = self._run(
            lambda db: db.execute(
                "SELECT value FROM counters WHERE topology=? AND name=?", (topology, counter)
            ).fetchone()
        )
        return 0 if row is None else int(row[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
