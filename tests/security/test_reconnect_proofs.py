"""A sender proves each new stream (grpc) or connection (zmq) with a new proof of the mesh secret,
made for the worker it connects to: a receiver that took the old proof takes the reconnect, and
one proof is never good at another worker. Both sides in this process, over loopback."""

from __future__ import annotations

import pytest

from tests.helpers import eventually
from tests.transport.conftest import Harness, Receiver
from tuplemesh.config import Config
from tuplemesh.netutil import free_ports

SECRET = "the mesh secret"
NETWORK = ["grpc", "zmq"]


@pytest.fixture
def port() -> int:
    return free_ports(1)[0]


def conf(plugin: str, index: int) -> Config:
    return Config(
        {
            "messaging.transport": plugin,
            "mesh.secret": SECRET,
            "worker.index": index,
            "topology.workers": 2,
            "storm.messaging.netty.min_wait_ms": 20,
            "storm.messaging.netty.max_wait_ms": 200,
            # the connection refused for another worker never drains: close gives up after 1 s
            "messaging.close.timeout.secs": 1,
        }
    )


@pytest.mark.parametrize("plugin", NETWORK)
def test_every_reconnect_to_the_same_receiver_is_proven_afresh(plugin: str, port: int):
    receiving, sending = Harness(plugin, conf(plugin, 1)), Harness(plugin, conf(plugin, 0))
    try:
        received = Receiver()
        binding = receiving.server().bind("topo-1", port, received)
        conn = sending.client().connect("topo-1", "127.0.0.1", port, receiver=1)
        for round_ in range(4):
            conn.send([(1, f"{round_}-{i}".encode()) for i in range(10)])
            received.wait_for(10 * (round_ + 1))
            conn.retarget("127.0.0.1", port)  # the same worker: a new stream or connection
        conn.send([(1, b"last")])
        received.wait_for(41)
        conn.close()
        assert sorted(m for _, m in received.messages) == sorted(
            [f"{r}-{i}".encode() for r in range(4) for i in range(10)] + [b"last"]
        )
        assert binding.stats().refused == {}  # no proof refused, as replayed or otherwise
        assert conn.stats().retargets == 4
    finally:
        sending.close()
        receiving.close()


@pytest.mark.parametrize("plugin", NETWORK)
def test_a_connection_proven_for_another_worker_delivers_nothing(plugin: str, port: int):
    receiving, sending = Harness(plugin, conf(plugin, 1)), Harness(plugin, conf(plugin, 0))
    try:
        received = Receiver()
        binding = receiving.server().bind("topo-1", port, received)
        wrong = sending.client().connect("topo-1", "127.0.0.1", port, receiver=0)
        wrong.send([(1, b"to worker 0")])
        eventually(lambda: binding.stats().refused.get("wrong_receiver", 0) >= 1, timeout=10)
        assert set(binding.stats().refused) == {"wrong_receiver"}
        right = sending.client().connect("topo-1", "127.0.0.1", port, receiver=1)
        right.send([(1, b"to worker 1")])
        received.wait_for(1)
        right.close()
        assert received.messages == [(1, b"to worker 1")]
        assert set(binding.stats().refused) == {"wrong_receiver"}
    finally:
        sending.close()
        receiving.close()
