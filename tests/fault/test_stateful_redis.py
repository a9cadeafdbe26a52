"""Exactly-once state through worker deaths and a redis outage, checkpoints on a real redis-server.

The same stateful word count on three worker processes as ``test_stateful_recovery`` (which runs
it on sqlite), with every checkpoint in redis: workers SIGKILLed one after the other, the whole
mesh killed and started again, and the redis server itself stopped for 5 s mid-run. The final
counts must be EXACTLY those of a run without failures each time.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fault.harness import reports, wait_settled, write_config
from tests.fault.test_stateful_recovery import (
    RATE,
    REPEAT,
    TARGET,
    TOPOLOGY,
    assert_exact,
    coordinator,
    spout_emitted,
    wait_attempt,
)
from tests.helpers import eventually
from tests.state.redis_server import RedisServer
from tests.worker.conftest import Mesh, start_mesh
from tuplemesh.state import PartKey
from tuplemesh.state.redis import RedisStore


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A durable redis-server of this test alone (one test stops it; the others share nothing)."""
    server = RedisServer(tmp_path, password=secrets.token_hex(16), durable=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def config(tmp_path: Path, server: RedisServer) -> Path:
    return write_config(
        tmp_path / "tuplemesh.yaml",
        **{
            "wordcount.repeat": REPEAT,
            "wordcount.rate": RATE,
            "topology.state.backend": "redis",
            **server.conf(timeout_ms=500.0),
            "topology.state.checkpoint.interval.ms": 200,
            "storm.messaging.netty.min_wait_ms": 20,
            "storm.messaging.netty.max_wait_ms": 200,
        },
    )


def last_committed(server: RedisServer) -> int:
    store = RedisStore(server.url, password=server.password)
    try:
        return store.last_committed(TOPOLOGY) or 0
    finally:
        store.close()


def wait_commits(server: RedisServer, beyond: int, timeout: float = 30.0) -> int:
    """Wait until a checkpoint numbered above ``beyond`` is committed in redis; its number."""

    def committed() -> int:
        last = last_committed(server)
        return last if last > beyond else 0

    return eventually(committed, timeout, 0.05, f"a checkpoint above {beyond} committed in redis")


def assert_committed_checkpoint_is_whole(server: RedisServer) -> None:
    """Every part of the last committed checkpoint is in redis: one per spout and count task."""
    store = RedisStore(server.url, password=server.password)
    try:
        last = store.last_committed(TOPOLOGY)
        assert last is not None
        # tasks: __checkpoint 1, count 2-4, sentences 5-6, split 7-9 (sorted component names)
        parts = [PartKey(TOPOLOGY, "count", t) for t in (2, 3, 4)] + [
            PartKey(TOPOLOGY, "sentences", t) for t in (5, 6)
        ]
        assert [key for key in parts if store.get_part(key, last) is None] == []
    finally:
        store.close()


def finish(mesh: Mesh) -> dict[str, Any]:
    """Wait for the run to end, check the counts, and return the coordinator's report."""
    wait_settled(mesh, timeout=90.0)
    assert_exact(mesh)
    return coordinator(mesh)


def test_two_workers_killed_one_after_the_other_counts_stay_exact(tmp_path: Path, redis_server: RedisServer):
    mesh = start_mesh(TARGET, 3, config(tmp_path, redis_server))
    try:
        wait_attempt(mesh, 3)
        committed = wait_commits(redis_server, 2)
        mesh.kill(2)
        mesh.restart(2)
        wait_attempt(mesh, 4)
        assert coordinator(mesh)["restored_from"] >= committed
        committed = wait_commits(redis_server, committed + 2)
        assert spout_emitted(mesh) < REPEAT * 12  # still mid-run when the second kill comes
        mesh.kill(0)  # the coordinator's worker: its successor reads attempt and commits from redis
        mesh.restart(0)
        wait_attempt(mesh, 5)
        assert coordinator(mesh)["restored_from"] >= committed
        assert finish(mesh)["abandoned"] == 0
    finally:
        codes = mesh.stop()
    assert codes == [0, 0, 0]
    assert_committed_checkpoint_is_whole(redis_server)


def test_the_whole_mesh_killed_and_started_again_resumes_from_redis(
    tmp_path: Path, redis_server: RedisServer
):
    conf = config(tmp_path, redis_server)
    mesh = start_mesh(TARGET, 3, conf)
    try:
        wait_attempt(mesh, 3)
        wait_commits(redis_server, 3)
        for index in range(3):
            mesh.kill(index)
    finally:
        mesh.stop()
    resumed_from = last_committed(redis_server)
    mesh = start_mesh(TARGET, 3, conf)
    try:
        wait_attempt(mesh, 6)
        assert coordinator(mesh)["restored_from"] >= resumed_from
        finish(mesh)
        # the spouts went on from their checkpointed positions, not from the beginning
        assert sum(r["emitted"] for r in reports(mesh)["sentences"]) < REPEAT * 12
    finally:
        codes = mesh.stop()
    assert codes == [0, 0, 0]


def test_redis_stopped_for_5_s_pauses_checkpoints_and_counts_stay_exact(
    tmp_path: Path, redis_server: RedisServer
):
    mesh = start_mesh(TARGET, 3, config(tmp_path, redis_server))
    try:
        wait_attempt(mesh, 3)
        committed = wait_commits(redis_server, 2)
        errors_before = coordinator(mesh)["store_errors"]
        emitted_before = spout_emitted(mesh)
        redis_server.stop()
        stopped_at = time.monotonic()
        noticed = eventually(
            lambda: coordinator(mesh)["store_errors"] > errors_before and coordinator(mesh),
            timeout=10.0,
            interval=0.05,
            message="the coordinator counts store errors while redis is down",
        )
        # down for 5 s in all: no checkpoint commits, and the spouts go on emitting meanwhile
        eventually(lambda: time.monotonic() - stopped_at >= 5.0, timeout=10.0, interval=0.1)
        paused = coordinator(mesh)
        assert paused["committed"] == noticed["committed"]
        assert paused["store_errors"] > noticed["store_errors"]  # each tick tries again
        assert spout_emitted(mesh) > emitted_before
        redis_server.start()
        # checkpoints resume: a newer one is committed, and the work done before the outage is there
        resumed = wait_commits(redis_server, committed)
        assert resumed > committed
        # a death after the outage rolls back to a checkpoint taken after it
        mesh.kill(1)
        mesh.restart(1)
        wait_attempt(mesh, 4)
        assert coordinator(mesh)["restored_from"] >= resumed
        report = finish(mesh)
        assert report["store_errors"] >= paused["store_errors"]
    finally:
        codes = mesh.stop()
    assert codes == [0, 0, 0]
    assert_committed_checkpoint_is_whole(redis_server)
