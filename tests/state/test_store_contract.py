"""Every state store backend keeps the `StateStore` contract; the redis backend against a real server.

A backend joins the contract with one line in ``BACKENDS``: how a test opens it, and (for stores
several processes share) the 'module:attr' and conf another process opens it from.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import child_pythonpath
from tests.state.directory_store import DirectoryStore
from tests.state.redis_server import RedisServer
from tuplemesh.config import Config
from tuplemesh.plugins import import_from_string
from tuplemesh.state import MemoryStore, PartKey, StateStore, StoreUnavailable


@dataclass(frozen=True)
class Backend:
    open: Callable[[], StateStore]
    #: 'module:attr' of the store class and the conf its ``from_conf`` reads, for a store that
    #: several processes share; None for a store that lives in one process
    shared: tuple[str, dict[str, Any]] | None = None


def by_conf(store_class: str, conf: dict[str, Any]) -> Backend:
    """A backend opened the way a worker opens it: the class's ``from_conf`` on the topology conf."""
    return Backend(lambda: import_from_string(store_class).from_conf(conf), (store_class, conf))


BACKENDS: dict[str, Callable[[pytest.FixtureRequest], Backend]] = {
    "memory": lambda request: Backend(MemoryStore),
    # a generous timeout: the contract is not about timing, and the machine may be loaded
    "redis": lambda request: by_conf(
        "tuplemesh.state.redis:RedisStore", request.getfixturevalue("redis_server").conf(timeout_ms=10_000)
    ),
    "sqlite": lambda request: by_conf(
        "tuplemesh.state.sqlite:SqliteStore",
        {"topology.state.sqlite.path": str(request.getfixturevalue("tmp_path") / "state.sqlite")},
    ),
    "plugin": lambda request: by_conf(
        "tests.state.directory_store:DirectoryStore",
        {"tests.state.directory": str(request.getfixturevalue("tmp_path"))},
    ),
}
IN_ONE_PROCESS = {"memory"}
SHARED = [name for name in BACKENDS if name not in IN_ONE_PROCESS]


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest) -> Backend:
    return BACKENDS[request.param](request)


@pytest.fixture(params=SHARED)
def shared_backend(request: pytest.FixtureRequest) -> Backend:
    return BACKENDS[request.param](request)


@pytest.fixture
def store(backend: Backend) -> Iterator[StateStore]:
    opened = backend.open()
    yield opened
    opened.close()


@pytest.fixture
def topology() -> str:
    """A topology name of this test alone: tests sharing a server never see each other's keys."""
    return f"wordcount-{uuid.uuid4().hex[:8]}"


# -- parts -------------------------------------------------------------------------------------


def test_a_part_reads_back_as_stored_and_a_second_put_replaces_it(store: StateStore, topology: str) -> None:
    key = PartKey(topology, "count", 3)
    store.put_part(key, 1, b"first")
    assert store.get_part(key, 1) == b"first"
    store.put_part(key, 1, b"second")
    assert store.get_part(key, 1) == b"second"


def test_parts_are_kept_apart_by_topology_component_task_and_checkpoint(
    store: StateStore, topology: str
) -> None:
    other = f"{topology}-other"
    keys = {
        (PartKey(topology, "count", 0), 1): b"a",
        (PartKey(topology, "count", 1), 1): b"b",
        (PartKey(topology, "split", 0), 1): b"c",
        (PartKey(topology, "count", 0), 2): b"d",
        (PartKey(other, "count", 0), 1): b"e",
        # names that a naive key layout ("topology:component:task") would confuse
        (PartKey(topology, "1:count", 2), 1): b"f",
        (PartKey(topology, "count", 12), 1): b"g",
        (PartKey(f"{topology}}}:parts:1", "count", 0), 1): b"h",
    }
    for (key, checkpoint), blob in keys.items():
        store.put_part(key, checkpoint, blob)
    for (key, checkpoint), blob in keys.items():
        assert store.get_part(key, checkpoint) == blob, (key, checkpoint)


def test_what_was_never_stored_is_none_zero_or_a_no_op(store: StateStore, topology: str) -> None:
    store.put_part(PartKey(topology, "count", 0), 1, b"x")
    assert store.get_part(PartKey(topology, "count", 1), 1) is None
    assert store.get_part(PartKey(topology, "count", 0), 2) is None
    assert store.get_part(PartKey("no-such-topology", "count", 0), 1) is None
    assert store.last_committed(topology) is None
    assert store.counter(topology, "epoch") == 0
    store.prune("no-such-topology", 10)


def test_an_empty_part_is_stored_and_is_not_a_missing_one(store: StateStore, topology: str) -> None:
    key = PartKey(topology, "count", 0)
    store.put_part(key, 1, b"")
    assert store.get_part(key, 1) == b""


def test_large_parts_read_back_byte_for_byte(store: StateStore, topology: str) -> None:
    blob = random.Random(7).randbytes(24 * 1024 * 1024)
    key = PartKey(topology, "count", 0)
    store.put_part(key, 1, blob)
    store.put_part(PartKey(topology, "count", 1), 1, blob[::-1])
    assert store.get_part(key, 1) == blob
    assert store.get_part(PartKey(topology, "count", 1), 1) == blob[::-1]


def test_concurrent_puts_of_different_parts_all_land(store: StateStore, topology: str) -> None:
    def put(task: int) -> None:
        for checkpoint in range(1, 6):
            store.put_part(PartKey(topology, "count", task), checkpoint, f"{task}/{checkpoint}".encode())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, range(16)))
    for task in range(16):
        for checkpoint in range(1, 6):
            assert (
                store.get_part(PartKey(topology, "count", task), checkpoint)
                == f"{task}/{checkpoint}".encode()
            )


# -- commit marker -----------------------------------------------------------------------------


def test_the_commit_marker_never_moves_backwards(store: StateStore, topology: str) -> None:
    store.commit(topology, 0)
    assert store.last_committed(topology) == 0
    store.commit(topology, 5)
    store.commit(topology, 3)
    assert store.last_committed(topology) == 5
    store.commit(topology, 5)
    store.commit(topology, 6)
    assert store.last_committed(topology) == 6


def test_each_topology_has_its_own_commit_marker(store: StateStore, topology: str) -> None:
    store.commit(topology, 9)
    store.commit(f"{topology}-other", 2)
    assert store.last_committed(topology) == 9
    assert store.last_committed(f"{topology}-other") == 2


def test_racing_committers_leave_the_newest_checkpoint(store: StateStore, topology: str) -> None:
    checkpoints = list(range(200))
    random.Random(3).shuffle(checkpoints)

    def commit(chunk: list[int]) -> None:
        for checkpoint in chunk:
            store.commit(topology, checkpoint)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(commit, [checkpoints[i::8] for i in range(8)]))
    assert store.last_committed(topology) == 199


# -- prune -------------------------------------------------------------------------------------


def test_prune_forgets_older_checkpoints_of_that_topology_only(store: StateStore, topology: str) -> None:
    other = f"{topology}-other"
    for checkpoint in (1, 2, 3, 4):
        for task in (0, 1):
            store.put_part(PartKey(topology, "count", task), checkpoint, f"{checkpoint}".encode())
        store.put_part(PartKey(other, "count", 0), checkpoint, b"kept")
    store.commit(topology, 3)
    store.prune(topology, 3)
    for task in (0, 1):
        assert store.get_part(PartKey(topology, "count", task), 1) is None
        assert store.get_part(PartKey(topology, "count", task), 2) is None
        assert store.get_part(PartKey(topology, "count", task), 3) == b"3"
        assert store.get_part(PartKey(topology, "count", task), 4) == b"4"
    assert [store.get_part(PartKey(other, "count", 0), n) for n in (1, 2, 3, 4)] == [b"kept"] * 4
    assert store.last_committed(topology) == 3
    store.prune(topology, 3)  # nothing older left: a no-op
    store.put_part(PartKey(topology, "count", 0), 5, b"5")
    assert store.get_part(PartKey(topology, "count", 0), 5) == b"5"
    store.prune(topology, 100)
    assert [store.get_part(PartKey(topology, "count", 0), n) for n in (3, 4, 5)] == [None, None, None]
    assert store.last_committed(topology) == 3


# -- counters ----------------------------------------------------------------------------------


def test_counters_start_at_zero_and_count_per_topology_and_name(store: StateStore, topology: str) -> None:
    assert [store.increment(topology, "epoch") for _ in range(3)] == [1, 2, 3]
    assert store.increment(topology, "restarts") == 1
    assert store.increment(f"{topology}-other", "epoch") == 1
    assert store.counter(topology, "epoch") == 3
    assert store.counter(topology, "restarts") == 1


def test_increment_is_atomic_across_threads(store: StateStore, topology: str) -> None:
    def count(_: int) -> list[int]:
        return [store.increment(topology, "epoch") for _ in range(250)]

    with ThreadPoolExecutor(8) as pool:
        seen = [value for values in pool.map(count, range(8)) for value in values]
    assert sorted(seen) == list(range(1, 2001))  # every value handed out exactly once
    assert store.counter(topology, "epoch") == 2000


def test_increment_is_atomic_across_processes(shared_backend: Backend, topology: str) -> None:
    assert shared_backend.shared is not None
    store_class, conf = shared_backend.shared
    env = {**os.environ, "PYTHONPATH": child_pythonpath()}
    command = [sys.executable, "-m", "tests.state.increment_process", store_class, json.dumps(conf)]
    children = [
        subprocess.Popen(
            [*command, topology, "epoch", "200"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(4)
    ]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline() == "ready\n"
        for child in children:  # all ready: they count at the same time
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        seen = []
        for child in children:
            out, _ = child.communicate(timeout=60)
            assert child.returncode == 0
            seen.extend(json.loads(out))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert sorted(seen) == list(range(1, 801))
    opened = shared_backend.open()
    assert opened.counter(topology, "epoch") == 800
    opened.close()


def test_a_second_store_on_the_same_settings_sees_the_same_state(
    shared_backend: Backend, topology: str
) -> None:
    first, second = shared_backend.open(), shared_backend.open()
    first.put_part(PartKey(topology, "count", 0), 1, b"state")
    first.commit(topology, 1)
    first.increment(topology, "epoch")
    assert second.get_part(PartKey(topology, "count", 0), 1) == b"state"
    assert second.last_committed(topology) == 1
    assert second.counter(topology, "epoch") == 1
    first.close()
    second.close()


# -- plugins by name ---------------------------------------------------------------------------


def test_open_store_loads_a_module_attr_backend_with_its_from_conf(tmp_path: Path, topology: str) -> None:
    from tuplemesh.state.stores import open_store

    conf = {
        "topology.state.backend": "tests.state.directory_store:DirectoryStore",
        "tests.state.directory": str(tmp_path),
    }
    store = open_store(conf)
    assert isinstance(store, DirectoryStore) and store.root == tmp_path
    store.put_part(PartKey(topology, "count", 0), 1, b"by name")
    assert DirectoryStore(tmp_path).get_part(PartKey(topology, "count", 0), 1) == b"by name"


def test_open_store_opens_redis_by_its_alias(redis_server: RedisServer, topology: str) -> None:
    from tuplemesh.state.redis import RedisStore
    from tuplemesh.state.stores import open_store

    store = open_store({"topology.state.backend": "redis", **redis_server.conf()})
    assert isinstance(store, RedisStore)
    store.commit(topology, 4)
    assert store.last_committed(topology) == 4
    store.close()


# -- redis -------------------------------------------------------------------------------------


def _redis(server: RedisServer, **changes: Any) -> StateStore:
    from tuplemesh.state.redis import RedisStore

    return RedisStore.from_conf({**server.conf(), **changes})


def _full_text(exc: BaseException) -> str:
    """The exception as a log line with its traceback and every chained cause would show it."""
    return "".join(traceback.format_exception(exc))


def test_redis_password_and_url_come_from_the_environment(redis_server: RedisServer, topology: str) -> None:
    from tuplemesh.state.redis import RedisStore

    conf = Config.load(
        env={
            "TUPLEMESH_TOPOLOGY_STATE_REDIS_URL": redis_server.url,
            "TUPLEMESH_TOPOLOGY_STATE_REDIS_PASSWORD": redis_server.password,
            "TUPLEMESH_TOPOLOGY_STATE_REDIS_TIMEOUT_MS": "1500",
        }
    )
    store = RedisStore.from_conf(conf)
    assert store.timeout == 1.5
    store.commit(topology, 2)
    assert store.last_committed(topology) == 2
    assert redis_server.password not in repr(conf) and redis_server.password not in repr(store)
    store.close()


def test_redis_with_a_wrong_password_is_unavailable_and_never_shows_it(
    redis_server: RedisServer, topology: str
) -> None:
    wrong = f"not-{redis_server.password}"
    store = _redis(redis_server, **{"topology.state.redis.password": wrong})
    with pytest.raises(StoreUnavailable) as caught:
        store.commit(topology, 1)
    message = str(caught.value)
    assert f"redis://127.0.0.1:{redis_server.port}/0" in message
    assert "commit" in message and "topology.state.redis.password" in message
    assert wrong not in _full_text(caught.value)
    store.close()


def test_redis_password_in_the_url_is_used_and_never_shown(redis_server: RedisServer, topology: str) -> None:
    from tuplemesh.state.redis import RedisStore

    store = RedisStore(f"redis://:{redis_server.password}@127.0.0.1:{redis_server.port}/0")
    store.increment(topology, "epoch")
    assert store.counter(topology, "epoch") == 1
    assert redis_server.password not in repr(store)
    store.close()
    bad = RedisStore(f"redis://:wrong-{redis_server.password}@127.0.0.1:{redis_server.port}/0")
    with pytest.raises(StoreUnavailable) as caught:
        bad.counter(topology, "epoch")
    assert f"wrong-{redis_server.password}" not in _full_text(caught.value)
    bad.close()


def test_redis_without_a_password_is_unavailable_naming_the_key_to_set(
    redis_server: RedisServer, topology: str
) -> None:
    store = _redis(redis_server, **{"topology.state.redis.password": ""})
    with pytest.raises(StoreUnavailable, match=r"topology\.state\.redis\.password"):
        store.get_part(PartKey(topology, "count", 0), 1)
    store.close()


def test_redis_stopped_is_unavailable_within_the_timeout_and_the_same_store_recovers(
    own_redis_server: RedisServer, topology: str
) -> None:
    store = _redis(own_redis_server, **{"topology.state.redis.timeout.ms": 1000})
    key = PartKey(topology, "count", 0)
    store.put_part(key, 1, b"before")
    store.commit(topology, 1)
    own_redis_server.stop()
    for call in (
        lambda: store.put_part(key, 2, b"during"),
        lambda: store.get_part(key, 1),
        lambda: store.commit(topology, 2),
        lambda: store.last_committed(topology),
        lambda: store.prune(topology, 1),
        lambda: store.increment(topology, "epoch"),
        lambda: store.counter(topology, "epoch"),
    ):
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match=f"redis://127.0.0.1:{own_redis_server.port}/0"):
            call()
        # refused at once, not after a timeout or retries with backoff (generous for a loaded machine)
        assert time.monotonic() - started < 5.0
    own_redis_server.start()
    # the same object, no reopening: its pooled connections to the old server are replaced
    assert store.last_committed(topology) == 1
    assert store.get_part(key, 1) == b"before"
    store.put_part(key, 2, b"after")
    store.commit(topology, 2)
    assert (store.get_part(key, 2), store.last_committed(topology)) == (b"after", 2)
    store.close()


def test_a_redis_restart_between_two_calls_goes_unnoticed(
    own_redis_server: RedisServer, topology: str
) -> None:
    store = _redis(own_redis_server)
    store.commit(topology, 1)  # leaves a pooled connection to the server that is about to go
    own_redis_server.restart()
    store.commit(topology, 2)
    assert store.last_committed(topology) == 2
    store.close()


def test_redis_that_does_not_answer_times_out_within_the_timeout_and_recovers(
    own_redis_server: RedisServer, topology: str
) -> None:
    store = _redis(own_redis_server, **{"topology.state.redis.timeout.ms": 500})
    store.commit(topology, 1)  # a pooled connection is open when the server hangs
    own_redis_server.pause()
    try:
        for call in (lambda: store.commit(topology, 2), lambda: store.last_committed(topology)):
            started = time.monotonic()
            with pytest.raises(StoreUnavailable) as caught:
                call()
            elapsed = time.monotonic() - started
            assert 0.4 < elapsed < 1.4, elapsed  # one timeout, not several retries with backoff
            assert "timeout 0.5 s" in str(caught.value)
            assert f"redis://127.0.0.1:{own_redis_server.port}/0" in str(caught.value)
    finally:
        own_redis_server.resume()
    # the commit of 2 reached the server before it froze, or not at all; either way it runs now
    store.commit(topology, 2)
    assert store.last_committed(topology) == 2
    store.close()


def test_redis_store_calls_from_many_threads_share_its_connections(
    redis_server: RedisServer, topology: str
) -> None:
    store = _redis(redis_server)
    errors: list[BaseException] = []

    def work(task: int) -> None:
        try:
            for checkpoint in range(20):
                store.put_part(PartKey(topology, "count", task), checkpoint, bytes([task]) * 1000)
                store.commit(topology, checkpoint)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(task,)) for task in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert store.last_committed(topology) == 19
    assert store.get_part(PartKey(topology, "count", 5), 19) == bytes([5]) * 1000
    store.close()


def test_redis_url_is_checked_when_the_config_is_built() -> None:
    from tuplemesh.errors import ConfigError

    for url, reason in [
        ("http://127.0.0.1:6379/0", "redis://"),
        ("redis://127.0.0.1:6379/zero", "database number"),
        ("redis:///0", "no host"),
        ("redis://127.0.0.1:99999/0", "not a URL"),
    ]:
        with pytest.raises(ConfigError, match=reason):
            Config({"topology.state.redis.url": url})
    with pytest.raises(ConfigError) as caught:
        Config({"topology.state.redis.url": "redis://user:hunter2@127.0.0.1:6379/x"})
    assert "hunter2" not in str(caught.value) and "redis://127.0.0.1:6379/x" in str(caught.value)
    with pytest.raises(ConfigError, match="must be > 0"):
        Config({"topology.state.redis.timeout.ms": 0})
    from tuplemesh.state.redis import RedisStore

    with pytest.raises(ValueError, match=r"'http://127\.0\.0\.1:6379/0' must start with redis://") as built:
        RedisStore("http://user:hunter2@127.0.0.1:6379/0")
    assert "hunter2" not in str(built.value)


def test_importing_the_redis_backend_without_redis_py_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # what `import redis` finds when it is not installed
    monkeypatch.delitem(sys.modules, "tuplemesh.state.redis", raising=False)
    with pytest.raises(ImportError, match=r"pip install tuplemesh\[redis\]"):
        importlib.import_module("tuplemesh.state.redis")
