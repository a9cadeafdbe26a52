"""Transport conformance harness: the same tests run against every transport plugin.

A plugin entry supplies ``server()`` and ``client()`` contexts. For ``local`` both sides share
one context (as workers of one LocalCluster do); network plugins get one context per side.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers import eventually
from tuplemesh.config import Config
from tuplemesh.netutil import free_ports
from tuplemesh.transport import make_context
from tuplemesh.transport.base import Context, TaskMessage


class Receiver:
    """on_batch callback that records everything and can be slowed down."""

    def __init__(self, delay: float = 0.0) -> None:
        self.messages: list[TaskMessage] = []
        self.batches = 0
        self.delay = delay
        self._lock = threading.Lock()

    def __call__(self, batch: list[TaskMessage]) -> list[int]:
        if self.delay:
            # A slow consumer on purpose: the transport's receive thread is held here, so the
            # receiver's credit runs out and the sender has to block (the backpressure tests).
            time.sleep(self.delay)
        with self._lock:
            self.messages.extend(batch)
            self.batches += 1
        return []

    def wait_for(self, count: int, timeout: float = 30.0) -> None:
        """Wait until ``count`` messages arrived (AssertionError after ``timeout`` seconds)."""
        eventually(
            lambda: len(self.messages) >= count,
            timeout,
            message=lambda: f"{count} messages received (got {len(self.messages)})",
        )


class Harness:
    def __init__(self, name: str, conf: Config) -> None:
        self.name = name
        self.conf = conf
        self._contexts: list[Context] = []
        self._shared: Context | None = None

    def _new(self) -> Context:
        ctx = make_context(self.name)
        ctx.prepare(self.conf)
        self._contexts.append(ctx)
        return ctx

    def server(self) -> Context:
        return self._side()

    def client(self) -> Context:
        return self._side()

    def _side(self) -> Context:
        if self.name == "local":
            if self._shared is None:
                self._shared = self._new()
            return self._shared
        return self._new()

    def close(self) -> None:
        for ctx in self._contexts:
            ctx.term()


TRANSPORTS = ["local", "grpc", "zmq"]


@pytest.fixture(params=TRANSPORTS)
def harness(request: Any) -> Iterator[Harness]:
    conf = Config(
        {
            "messaging.transport": request.param,
            # the same small window for every plugin, so backpressure tests mean the same thing
            "topology.receiver.buffer.size": 4,
            "messaging.window.batches": 4,
            # a message per batch: these tests count batches through windows and credit
            # (coalescing has its own tests: test_grpc_wire.py, test_process_restart.py)
            "messaging.coalesce.ms": 0,
            "storm.messaging.netty.min_wait_ms": 20,
            "storm.messaging.netty.max_wait_ms": 200,
        }
    )
    h = Harness(request.param, conf)
    yield h
    h.close()


@pytest.fixture
def port() -> int:
    return free_ports(1)[0]
