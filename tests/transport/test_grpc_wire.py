"""The grpc sender's wire is the Transfer proto: a plain protobuf servicer (generated code, none of
tuplemesh's receive path) reads what `GrpcConnection` writes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures

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


def test_a_protobuf_server_reads_every_batch_in_order(port: int):
    receiver = ProtobufReceiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    transfer_pb2_grpc.add_TransferServicer_to_server(receiver, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    context = make_context("grpc")
    context.prepare(Config({"messaging.transport": "grpc", "worker.index": 3}))
    conn = context.connect("wire", "127.0.0.1", port)
    try:
        conn.send([(1, b"first")])
        eventually(lambda: len(receiver.batches) == 1, message="the first batch arrived")
        for i in range(10):  # queued while the receiver holds the first
            conn.send([(2, f"{i}".encode()), (None, b"all")])
        receiver.release.set()
        eventually(lambda: conn.stats().unacked_batches == 0, message="every batch acknowledged")
        batches = receiver.batches
        assert [b.sequence for b in batches] == list(range(1, len(batches) + 1))
        assert {(b.topology_id, b.sender, b.session) for b in batches} == {("wire", 3, conn.session)}
        assert len(batches) == 11 and batches[-1].ack_requested
        pairs = [tuple(pair) for b in batches for pair in unpack_batch(b.packed)[0]]
        expected = [(2, f"{i}".encode()) for i in range(10)]
        assert pairs == [(1, b"first")] + [p for e in expected for p in (e, (None, b"all"))]
        assert conn.stats().sent_tuples == 21
    finally:
        context.term()
        server.stop(0)
