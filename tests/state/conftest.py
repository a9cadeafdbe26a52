"""Real state store servers for the state tests, and the local clusters they start."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.state.redis_server import RedisServer
from tuplemesh.worker.local_cluster import LocalCluster


def _running(directory: Path, durable: bool = False) -> Iterator[RedisServer]:
    server = RedisServer(directory, password=secrets.token_hex(16), durable=durable)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for the whole session; tests keep apart by topology name."""
    yield from _running(tmp_path_factory.mktemp("redis"))


@pytest.fixture
def own_redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A durable redis-server of this test alone, for tests that stop, restart or pause it."""
    yield from _running(tmp_path, durable=True)


@pytest.fixture
def clusters() -> Iterator[list[LocalCluster]]:
    """The clusters a test started, stopped after it (a test that stops one itself removes it)."""
    started: list[LocalCluster] = []
    yield started
    for cluster in started:
        cluster.stop()
