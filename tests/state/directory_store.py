"""A state store plugin as a user would write one: a class with ``from_conf``, loaded by 'module:attr'.

It keeps everything in files under one directory (``tests.state.directory`` in the topology conf);
one file lock makes it safe for several processes, and parts are written whole by rename.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote

from tuplemesh.state import PartKey


class DirectoryStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> Self:
        return cls(Path(conf["tests.state.directory"]))

    def put_part(self, key: PartKey, checkpoint: int, blob: bytes) -> None:
        path = self._part(key, checkpoint)
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.with_name(f".{path.name}.{os.getpid()}")
        staged.write_bytes(blob)
        os.replace(staged, path)

    def get_part(self, key: PartKey, checkpoint: int) -> bytes | None:
        path = self._part(key, checkpoint)
        return path.read_bytes() if path.exists() else None

    def commit(self, topology: str, checkpoint: int) -> None:
        with self._locked():
            current = self.last_committed(topology)
            if current is None or checkpoint > current:
                self._topology(topology).mkdir(parents=True, exist_ok=True)
                (self._topology(topology) / "committed").write_text(str(checkpoint))

    def last_committed(self, topology: str) -> int | None:
        marker = self._topology(topology) / "committed"
        return int(marker.read_text()) if marker.exists() else None

    def prune(self, topology: str, below: int) -> None:
        parts = self._topology(topology) / "parts"
        with self._locked():
            for directory in parts.iterdir() if parts.exists() else ():
                if int(directory.name) < below:
                    shutil.rmtree(directory)

    def increment(self, topology: str, counter: str) -> int:
        with self._locked():
            value = self.counter(topology, counter) + 1
            path = self._counter(topology, counter)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(str(value))
            return value

    def counter(self, topology: str, counter: str) -> int:
        path = self._counter(topology, counter)
        return int(path.read_text()) if path.exists() else 0

    def close(self) -> None:
        pass

    def _topology(self, topology: str) -> Path:
        return self.root / quote(topology, safe="")

    def _part(self, key: PartKey, checkpoint: int) -> Path:
        return (
            self._topology(key.topology)
            / "parts"
            / str(checkpoint)
            / f"{key.task}-{quote(key.component, safe='')}"
        )

    def _counter(self, topology: str, counter: str) -> Path:
        return self._topology(topology) / "counters" / quote(counter, safe="")

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.root / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield
