"""A sender proves each new stream (grpc) or connection (zmq) with a new proof of the mesh secret,
made for the worker it connects to: a receiver that took the old proof takes the reconnect, and
one proof is never good at another worker. Both sides in this process, over loopback."""

from __future__ import annotations

import time

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


def test_a_zmq_connection_takes_its_proof_only_while_it_is_within_the_window(port: int):
    """A sender makes a new proof every half window; a frame still carrying one past the window is
    refused as stale, even on the connection that proved it (whose identity a peer could claim)."""
    import msgpack
    import zmq

    from tuplemesh.security import mesh_auth
    from tuplemesh.transport.framing import pack_within

    receiving = Harness("zmq", conf("zmq", 1))
    context = zmq.Context()
    dealer = context.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    try:
        received = Receiver()
        binding = receiving.server().bind("topo-1", port, received)
        dealer.connect(f"tcp://127.0.0.1:{port + 100}")  # zmq.port.offset's default
        # made 297 s ago: within the 300 s window for a few seconds more
        old = mesh_auth(SECRET.encode(), "topo-1", 0, 1, clock=lambda: time.time() - 297)
        sent = [0]

        def send(auth: str, session: int, sequence: int) -> None:
            [(packed, _)] = pack_within([(1, f"{session}-{sequence}".encode())], 1 << 20)
            dealer.send_multipart(
                [msgpack.packb(["topo-1", 0, session, sequence, True, 1, "", auth]), packed]
            )

        def refused_as_stale() -> bool:
            sent[0] += 1
            send(old, 1, sent[0])
            return binding.stats().refused.get("stale_proof", 0) >= 1

        eventually(refused_as_stale, timeout=30, interval=0.2)
        assert set(binding.stats().refused) == {"stale_proof"}
        taken = len(received.messages)
        assert received.messages == [(1, f"1-{n}".encode()) for n in range(1, taken + 1)]
        send(mesh_auth(SECRET.encode(), "topo-1", 0, 1), 2, 1)  # its sender's next proof: taken
        received.wait_for(taken + 1)
        assert received.messages[-1] == (1, b"2-1")
    finally:
        dealer.close()
        context.term()
        receiving.close()
