"""The grpc sender's wire is the Transfer proto: a plain protobuf servicer (generated code, none of
tuplemesh's receive path) reads what `GrpcConnection` writes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc

from tests.helpers import eventually
from tuplemesh.config import Config
from tuplemesh.transport import make_context
from tuplemesh.transport.framing import unpack_batch
from tuplemesh.v1 import messages_pb2, transfer_pb2_grpc


class ProtobufReceiver(transfer_pb2_grpc.TransferServicer):
    """Acks every batch; holds the first one until ``release`` so the sender's queue builds up."""

    def __init__(self) -> None:
        self.batches: list[messages_pb2.TransferBatch] = []
        self.release = threading.Event()

    def Stream(
        self, request_iterator: Iterator[messages_pb2.TransferBatch], context: grpc.ServicerContext
    ) -> Iterator[messages_pb2.TransferAck]:
        for batch in request_iterator:
            self.batches.append(batch)
            self.release.wait(10)
            yield messages_pb2.TransferAck(sequence=batch.sequence, credit=64)


def serve_and_connect(receiver: Any, port: int, **conf: Any) -> tuple[grpc.Server, Any, Any]:
    """A plain protobuf Transfer server with ``receiver``, and a tuplemesh grpc context and
    connection to it (a message per batch unless ``conf`` sets messaging.coalesce.ms)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    transfer_pb2_grpc.add_TransferServicer_to_server(receiver, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    context = make_context("grpc")
    conf = {"messaging.coalesce.ms": 0, **conf}
    context.prepare(Config({"messaging.transport": "grpc", "worker.index": 3, **conf}))
    return server, context, context.connect("wire", "127.0.0.1", port)


def test_a_protobuf_server_reads_every_batch_in_order(port: int):
    receiver = ProtobufReceiver()
    server, context, conn = serve_and_connect(receiver, port)
    try:
        conn.send([(1, b"first")])
        eventually(lambda: len(receiver.batches) == 1, message="the first batch arrived")
        for i in range(10):  # queued while the receiver holds the first
            conn.send([(2, f"{i}".encode()), (None, b"all")])
        receiver.release.set()
        eventually(lambda: conn.stats().unacked_batches == 0, message="every batch acknowledged")
        # ack probes (empty, sequence 0) may come between batches while the stream idles
        batches = [b for b in receiver.batches if b.sequence]
        assert all(not p.packed and p.ack_requested for p in receiver.batches if not p.sequence)
        assert [b.sequence for b in batches] == list(range(1, 12))
        assert {(b.topology_id, b.sender, b.session) for b in receiver.batches} == {("wire", 3, conn.session)}
        pairs = [tuple(pair) for b in batches for pair in unpack_batch(b.packed)[0]]
        expected = [(2, f"{i}".encode()) for i in range(10)]
        assert pairs == [(1, b"first")] + [p for e in expected for p in (e, (None, b"all"))]
        assert conn.stats().sent_tuples == 21
    finally:
        context.term()
        server.stop(0)


class AskedOnlyReceiver(transfer_pb2_grpc.TransferServicer):
    """Acknowledges only when a batch asks, with the highest sequence it has read."""

    def __init__(self) -> None:
        self.batches: list[messages_pb2.TransferBatch] = []

    def Stream(
        self, request_iterator: Iterator[messages_pb2.TransferBatch], context: grpc.ServicerContext
    ) -> Iterator[messages_pb2.TransferAck]:
        highest = 0
        for batch in request_iterator:
            self.batches.append(batch)
            highest = max(highest, batch.sequence)
            if batch.ack_requested:
                yield messages_pb2.TransferAck(sequence=highest, credit=64)


def test_batches_sent_without_asking_are_acknowledged_after_an_ack_probe(port: int):
    """A window far from full asks for no ack per batch; once the stream idles it sends one ack
    probe (an empty batch with sequence 0), and its answer releases the window."""
    receiver = AskedOnlyReceiver()
    server, context, conn = serve_and_connect(receiver, port)
    try:
        for i in range(3):
            conn.send([(1, f"{i}".encode())])
        eventually(lambda: conn.stats().unacked_batches == 0, message="every batch acknowledged")
        batches = [b for b in receiver.batches if b.sequence]
        probes = [b for b in receiver.batches if not b.sequence]
        assert [b.sequence for b in batches] == [1, 2, 3]
        assert not any(b.ack_requested for b in batches)
        assert probes and receiver.batches[-1] is probes[-1]
        assert all(p.ack_requested and not p.packed and not p.messages for p in probes)
        assert {(p.topology_id, p.sender, p.session) for p in probes} == {("wire", 3, conn.session)}
    finally:
        context.term()
        server.stop(0)


#: messaging.coalesce.ms for the coalescing tests: longer than any test runs, so a batch is held
#: until something closes it (a batch behind it, its size, or the connection closing)
HOLD_MS = 600_000


def _pairs(batch: messages_pb2.TransferBatch) -> list[tuple[Any, bytes]]:
    return [tuple(pair) for pair in unpack_batch(batch.packed)[0]]


def test_batches_that_come_while_the_link_is_busy_go_in_one_message_read_by_protobuf(port: int):
    """After a message, the link is busy for messaging.coalesce.ms: the next batch waits as the
    open one and every batch that comes meanwhile joins it; closing the connection sends it at
    once. The joined message is an ordinary TransferBatch: one sequence, every pair in order."""
    receiver = ProtobufReceiver()
    receiver.release.set()
    server, context, conn = serve_and_connect(receiver, port, **{"messaging.coalesce.ms": HOLD_MS})
    try:
        conn.send([(1, b"first")])
        eventually(lambda: len(receiver.batches) == 1, message="the first batch went at once")
        later = [[(2, b"%d" % i)] if i % 3 else [(2, b"%d" % i), (None, b"all")] for i in range(30)]
        for batch in later:
            conn.send(batch)
        stats = conn.stats()
        assert (stats.sent_batches, stats.coalesced_batches, stats.unacked_batches) == (1, 29, 1)
        assert stats.unacked_tuples == sum(len(b) for b in later) == stats.sent_tuples - 1
        conn.close()  # nothing more will join: the open batch goes now, and is acknowledged
        batches = [b for b in receiver.batches if b.sequence]
        assert [b.sequence for b in batches] == [1, 2]
        assert _pairs(batches[0]) == [(1, b"first")]
        assert _pairs(batches[1]) == [pair for batch in later for pair in batch]
        assert (conn.stats().sent_batches, conn.stats().unacked_batches) == (2, 0)
    finally:
        context.term()
        server.stop(0)


def test_a_held_batch_goes_as_soon_as_it_is_full_and_a_message_never_passes_the_limit(port: int):
    """A batch stops taking more once another would pass messaging.max.message.bytes; it goes
    at once (only the newest batch is held), so coalescing never delays a full message."""
    receiver = ProtobufReceiver()
    receiver.release.set()
    limit = 64 * 1024
    payload = b"p" * 6500  # one packed pair: 6,506 bytes; ten fit the limit, eleven do not
    server, context, conn = serve_and_connect(
        receiver, port, **{"messaging.coalesce.ms": HOLD_MS, "messaging.max.message.bytes": limit}
    )
    try:
        conn.send([(1, b"first")])
        eventually(lambda: len(receiver.batches) == 1, message="the first batch went at once")
        for i in range(30):
            conn.send([(7, payload + f"{i:02d}".encode())])
        # the first two full batches go without waiting for the pace; the third is the open one
        eventually(
            lambda: [b.sequence for b in receiver.batches if b.sequence] == [1, 2, 3],
            message="the full batches went at once",
        )
        assert conn.stats().coalesced_batches == 27
        conn.close()
        batches = [b for b in receiver.batches if b.sequence]
        assert [b.sequence for b in batches] == [1, 2, 3, 4]
        assert [len(_pairs(b)) for b in batches] == [1, 10, 10, 10]
        assert all(len(b.packed) <= limit for b in batches)
        sent = [pair for b in batches[1:] for pair in _pairs(b)]
        assert sent == [(7, payload + f"{i:02d}".encode()) for i in range(30)]
    finally:
        context.term()
        server.stop(0)
