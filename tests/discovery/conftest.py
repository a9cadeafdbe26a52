"""The test API server, started for one test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.discovery.apiserver import FakeApiServer
from tuplemesh.netutil import free_ports


@pytest.fixture
def apiserver() -> Iterator[FakeApiServer]:
    server = FakeApiServer(free_ports(1)[0])
    server.up()
    yield server
    server.down()
