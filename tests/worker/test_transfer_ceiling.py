"""The worker's ceiling on outgoing bytes (``topology.transfer.max.bytes``) covers every batch not
yet acknowledged by its peer: the transfer ring, the transfer thread's merge buffers and the send
windows together. Real connections (grpc and zmq) to a peer that is not there yet, then is."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.helpers import eventually
from tests.transport.conftest import Receiver
from tuplemesh.config import Config
from tuplemesh.core.budget import ByteBudget
from tuplemesh.disruptor import RingBuffer
from tuplemesh.netutil import free_ports
from tuplemesh.transport import make_context
from tuplemesh.worker.transfer import TransferPath

MIB = 1024 * 1024
CEILING = 4 * MIB
BATCHES = 24  # of 1 MiB: six times the ceiling, and well inside one peer's send window (64 MiB)


@pytest.mark.parametrize("transport", ["grpc", "zmq"])
def test_a_peer_that_acknowledges_nothing_holds_executors_at_the_worker_ceiling(transport: str):
    """Nothing listens at the peer's address, so nothing is acknowledged. Executors (here one
    thread doing what an executor does: take room, then publish) are held once the ceiling is
    reached, by the bytes in the send window, not at the window's own 64 MiB. Once the peer
    starts, every batch arrives exactly once and the ceiling is given back in full."""
    conf = Config({"messaging.transport": transport, "topology.workers": 2, "worker.index": 0})
    [port] = free_ports(1)
    sender = make_context(transport)
    sender.prepare(conf)
    budget = ByteBudget(CEILING)
    ring: RingBuffer[Any] = RingBuffer.multi_producer(64)
    transfer = TransferPath(ring, sender, "t", {1: ("127.0.0.1", port)}, {1}, 1000, 0, False, budget)
    transfer.start()
    published: list[int] = []

    def executor() -> None:
        for n in range(BATCHES):
            budget.acquire(MIB)
            ring.put((1, [(5, n.to_bytes(4, "big") + bytes(MIB - 4))], MIB))
            published.append(n)

    producing = threading.Thread(target=executor, daemon=True)
    producing.start()
    receiver_context = make_context(transport)
    try:
        eventually(lambda: len(published) >= 2, timeout=30, message="the first batches published")
        time.sleep(0.5)  # room for more, were the ceiling not holding them
        window = transfer.connections[1].stats()
        assert producing.is_alive(), "the executor was never held back"
        # the window holds what was handed over; the ceiling holds the window: at most the
        # ceiling plus the batch being handed over, and about 2 of the 24 batches in flight
        assert window.unacked_bytes <= budget.used <= CEILING + MIB + 64
        assert len(published) <= CEILING // MIB
        assert window.unacked_bytes >= MIB
        receiver = Receiver()
        receiver_context.prepare(Config({"messaging.transport": transport, "topology.workers": 2}))
        receiver_context.bind("t", port, receiver)
        receiver.wait_for(BATCHES, timeout=120)
        producing.join(30)
        assert not producing.is_alive() and budget.waits > 0
        assert [int.from_bytes(m[1][:4], "big") for m in receiver.messages] == list(range(BATCHES))
        eventually(lambda: budget.used == 0, timeout=30, message="every byte given back once acknowledged")
    finally:
        transfer.halt()
        transfer.join(10)
        sender.term()
        receiver_context.term()
