"""Which grpc sender a worker runs (``messaging.grpc.sender``), and the event-loop sender against
a real grpc receiver: every peer's stream on one thread, nothing per peer."""

from __future__ import annotations

import threading

import pytest

from tests.helpers import eventually
from tests.transport.conftest import Receiver
from tuplemesh.config import Config, ConfigError
from tuplemesh.netutil import free_ports
from tuplemesh.transport import make_context
from tuplemesh.transport.grpc_impl import GrpcConnection
from tuplemesh.transport.grpc_links import LoopConnection
from tuplemesh.transport.settings import THREADS_UP_TO_WORKERS, TransportSettings


def _settings(**conf: object) -> TransportSettings:
    return TransportSettings.from_config(Config({"messaging.transport": "grpc", **conf}))


def test_auto_runs_links_on_threads_up_to_16_workers_and_on_the_event_loop_above():
    assert THREADS_UP_TO_WORKERS == 16
    assert _settings(**{"topology.workers": 1}).grpc_sender == "threads"
    assert _settings(**{"topology.workers": 16}).grpc_sender == "threads"
    assert _settings(**{"topology.workers": 17}).grpc_sender == "event-loop"
    assert _settings(**{"topology.workers": 64}).grpc_sender == "event-loop"
    # a setting other than auto is taken as given, whatever the mesh's size
    assert _settings(**{"topology.workers": 64, "messaging.grpc.sender": "threads"}).grpc_sender == "threads"
    assert (
        _settings(**{"topology.workers": 2, "messaging.grpc.sender": "event-loop"}).grpc_sender
        == "event-loop"
    )


def test_an_unknown_sender_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match=r"messaging\.grpc\.sender.*fibers"):
        Config({"messaging.grpc.sender": "fibers"})


def test_every_link_of_a_worker_runs_on_one_thread_and_delivers_each_batch_once_in_order():
    """Three receivers, one sender context: three LoopConnections, one ``grpc-links`` thread and no
    thread per peer; each receiver gets its 300 batches once, in order."""
    ports = free_ports(3)
    receivers = [Receiver() for _ in ports]
    rx_contexts = []
    for port, receiver in zip(ports, receivers, strict=True):
        ctx = make_context("grpc")
        ctx.prepare(Config({"messaging.transport": "grpc", "topology.workers": 4}))
        ctx.bind("topo", port, receiver)
        rx_contexts.append(ctx)
    before = {t.name for t in threading.enumerate()}
    tx = make_context("grpc")
    tx.prepare(Config({"messaging.transport": "grpc", "topology.workers": 20, "worker.index": 3}))
    try:
        conns = [tx.connect("topo", "127.0.0.1", port, receiver=i) for i, port in enumerate(ports)]
        assert all(isinstance(c, LoopConnection) and not isinstance(c, GrpcConnection) for c in conns)
        for n in range(300):
            for conn in conns:
                conn.send([(7, f"{n}".encode())])
        for receiver in receivers:
            receiver.wait_for(300, 30)
        new_threads = sorted({t.name for t in threading.enumerate()} - before)
        assert new_threads.count("grpc-links") == 1
        assert not [name for name in new_threads if name.startswith("grpc-send-")]
        for receiver in receivers:
            assert receiver.messages == [(7, f"{n}".encode()) for n in range(300)]
        eventually(lambda: all(c.stats().unacked_batches == 0 for c in conns), timeout=15, message="acked")
        assert all(c.link_state() == "READY" for c in conns)
    finally:
        tx.term()
        for ctx in rx_contexts:
            ctx.term()
    assert "grpc-links" not in {t.name for t in threading.enumerate()}  # term stops the loop
