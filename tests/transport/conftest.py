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

from tuplemesh.config import Config
from tuplemesh.transport import make_context
from tuplemesh.transport.base import Context, TaskMessage


class Receiver:
    """on_batch callback that records everything and can be slowed down."""

    def __init__(self, delay: float = 0.0) -> None:
        self.messages: list[TaskMessage] = []
        self.batches = 0
        self.delay = delay
        self._cond = threading.Condition()

    def __call__(self, batch: list[TaskMessage]) -> list[int]:
        if self.delay:
            time.sleep(self.delay)
        with self._cond:
            self.messages.extend(batch)
            self.batches += 1
            self._cond.notify_all()
        return []

    def wait_for(self, count: int, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.messages) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True


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
            "storm.messaging.netty.min_wait_ms": 20,
            "storm.messaging.netty.max_wait_ms": 200,
        }
    )
    h = Harness(request.param, conf)
    yield h
    h.close()


_port = [17000]


@pytest.fixture
def port() -> int:
    _port[0] += 1
    return _port[0]
