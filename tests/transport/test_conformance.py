"""Transport conformance suite, after Storm's own messaging tests (TransportTest / NettyTest)."""

from __future__ import annotations

import threading

import pytest

from tests.transport.conftest import Harness, Receiver
from tuplemesh.errors import PluginError, TransportError
from tuplemesh.netutil import free_ports
from tuplemesh.transport import make_context

TOPO = "topo-1"


def test_basic_round_trip(harness: Harness, port: int):
    rx = Receiver()
    binding = harness.server().bind(TOPO, port, rx)
    conn = harness.client().connect(TOPO, "127.0.0.1", port)
    conn.send([(7, b"hello"), (9, b"")])
    rx.wait_for(2)
    assert rx.messages == [(7, b"hello"), (9, b"")]
    conn.close()
    binding.close()


def test_two_megabyte_payload_is_byte_exact(harness: Harness, port: int):
    payload = bytes(range(256)) * (2 * 1024 * 1024 // 256)
    rx = Receiver()
    harness.server().bind(TOPO, port, rx)
    harness.client().connect(TOPO, "127.0.0.1", port).send([(1, payload)])
    rx.wait_for(1)
    assert rx.messages[0][0] == 1 and rx.messages[0][1] == payload


def test_server_starting_after_first_send(harness: Harness, port: int):
    rx = Receiver()
    conn = harness.client().connect(TOPO, "127.0.0.1", port)
    sent = threading.Event()

    def send() -> None:
        conn.send([(1, b"early")])
        conn.send([(2, b"later")])
        sent.set()

    threading.Thread(target=send, daemon=True).start()
    # Two batches fit the window: both are taken while nobody is bound yet, and wait for the server.
    assert sent.wait(10), "send blocked with room in the window and no server bound"
    assert conn.stats().sent_tuples == 2
    harness.server().bind(TOPO, port, rx)
    rx.wait_for(2)
    assert rx.messages == [(1, b"early"), (2, b"later")]


def test_hundred_thousand_sends_complete_and_in_order(harness: Harness, port: int):
    rx = Receiver()
    harness.server().bind(TOPO, port, rx)
    conn = harness.client().connect(TOPO, "127.0.0.1", port)
    total, per_batch = 100_000, 1000
    for start in range(0, total, per_batch):
        conn.send([(5, str(i).encode()) for i in range(start, start + per_batch)])
    rx.wait_for(total, 60)
    assert [int(p) for _, p in rx.messages] == list(range(total))


def test_bind_same_port_ten_times_in_a_row(harness: Harness, port: int):
    for i in range(10):
        rx = Receiver()
        binding = harness.server().bind(TOPO, port, rx)
        conn = harness.client().connect(TOPO, "127.0.0.1", port)
        conn.send([(1, str(i).encode())])
        rx.wait_for(1, 10)
        assert rx.messages == [(1, str(i).encode())]
        conn.close()
        binding.close()


def test_double_bind_is_refused(harness: Harness, port: int):
    server = harness.server()
    binding = server.bind(TOPO, port, Receiver())
    with pytest.raises(TransportError, match=str(port)):
        server.bind(TOPO, port, Receiver())
    binding.close()


def test_slow_consumer_blocks_sender_and_drops_nothing(harness: Harness, port: int):
    rx = Receiver(delay=0.02)
    harness.server().bind(TOPO, port, rx)
    conn = harness.client().connect(TOPO, "127.0.0.1", port)
    ahead: list[int] = []  # batches sent but not yet consumed, as each send returns
    for i in range(30):
        conn.send([(1, str(i).encode())])
        ahead.append(i + 1 - rx.batches)
    # The window holds 4 batches and the consumer may have taken one more out of it that it is
    # still working on: however fast the sender, it is never further ahead than that.
    assert max(ahead) <= 4 + 1, f"sender was not held back by the consumer: {ahead}"
    rx.wait_for(30)
    assert [int(p) for _, p in rx.messages] == list(range(30))


def test_ten_threads_sending_concurrently(harness: Harness, port: int):
    rx = Receiver()
    harness.server().bind(TOPO, port, rx)
    client = harness.client()
    per_thread = 2000

    def send(tid: int) -> None:
        conn = client.connect(TOPO, "127.0.0.1", port)
        for start in range(0, per_thread, 100):
            conn.send([(tid, f"{tid}:{i}".encode() * 3) for i in range(start, start + 100)])

    threads = [threading.Thread(target=send, args=(t,)) for t in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    rx.wait_for(10 * per_thread, 60)
    for tid in range(10):
        mine = [p for task, p in rx.messages if task == tid]
        assert mine == [f"{tid}:{i}".encode() * 3 for i in range(per_thread)]


def test_unknown_transport_names_value_and_known_ones():
    with pytest.raises(
        PluginError, match=r"messaging.transport: unknown value 'netty'; known: grpc, local, zmq"
    ):
        make_context("netty")


def test_per_source_order_across_two_workers(harness: Harness):
    """Two senders, two receivers: at every receiver each source's sequence strictly increases."""
    receivers = [Receiver(), Receiver()]
    ports = free_ports(2)
    for rx, p in zip(receivers, ports, strict=True):
        harness.server().bind(TOPO, p, rx)
    per_target = 5000

    def sender(source: int) -> None:
        client = harness.client()
        conns = [client.connect(TOPO, "127.0.0.1", p) for p in ports]
        for start in range(0, per_target, 50):
            for conn in conns:
                conn.send([(source, f"{source}:{i}".encode()) for i in range(start, start + 50)])

    threads = [threading.Thread(target=sender, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for rx in receivers:
        rx.wait_for(2 * per_target, 60)
        for source in (1, 2):
            seq = [int(p.split(b":")[1]) for task, p in rx.messages if task == source]
            assert seq == list(range(per_target))
