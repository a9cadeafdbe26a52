"""Assignment epochs on the wire, for every network plugin: a batch routed by another epoch is
refused and counted, never delivered; its sender keeps it and offers it again, and it is
delivered, once, when the receiver routes by the same epoch (a worker that followed the mesh)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers import eventually
from tests.transport.conftest import Receiver
from tuplemesh.config import Config
from tuplemesh.transport import make_context
from tuplemesh.transport.base import Context

TOPO = "topo-1"
OLD, NEW = "0/2/c0de", "1/3/c0de"


@pytest.fixture
def contexts() -> Iterator[list[Context]]:
    made: list[Context] = []
    yield made
    for ctx in made:
        ctx.term()


def _context(transport: str, made: list[Context]) -> Context:
    plugin, _, sender = transport.partition("-")  # grpc-event-loop: grpc, its event-loop sender
    ctx = make_context(plugin)
    ctx.prepare(
        Config(
            {
                "messaging.transport": plugin,
                "messaging.grpc.sender": sender or "threads",
                "storm.messaging.netty.min_wait_ms": 20,
                "storm.messaging.netty.max_wait_ms": 200,
            }
        )
    )
    made.append(ctx)
    return ctx


@pytest.mark.parametrize("transport", ["grpc", "grpc-event-loop", "zmq"])
def test_a_batch_of_another_epoch_waits_with_its_sender_until_the_epochs_agree(
    transport: str, port: int, contexts: list[Context]
):
    refusing = Receiver()
    receiver = _context(transport, contexts)
    binding = receiver.bind(TOPO, port, refusing, epoch=NEW)
    conn = _context(transport, contexts).connect(TOPO, "127.0.0.1", port, epoch=OLD)
    conn.send([(1, b"a"), (2, b"b")])
    # offered again and again, refused every time, never delivered
    eventually(lambda: binding.stats().epoch_refused_batches >= 2, timeout=15, message="refused twice")
    stats = binding.stats()
    assert refusing.messages == [] and stats.received_batches == 0 and stats.received_tuples == 0
    assert conn.stats().unacked_batches == 1  # the sender keeps it
    # the receiving worker restarts at the sender's epoch: the batch arrives, once
    binding.close()
    receiver.term()
    contexts.remove(receiver)
    taking = Receiver()
    binding = _context(transport, contexts).bind(TOPO, port, taking, epoch=OLD)
    taking.wait_for(2, 15)
    eventually(lambda: conn.stats().unacked_batches == 0, timeout=15, message="acknowledged")
    assert taking.messages == [(1, b"a"), (2, b"b")]
    stats = binding.stats()
    assert (stats.received_batches, stats.received_tuples, stats.epoch_refused_batches) == (1, 2, 0)
