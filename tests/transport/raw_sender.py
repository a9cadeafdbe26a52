"""Hand-framed senders for the network plugins: they send exactly the sequence numbers a test
names (skipped, repeated), which a real Connection never does, and record every ack."""

from __future__ import annotations

import queue
import threading
from typing import Any

import grpc
import msgpack
import zmq

from tuplemesh.config import Config
from tuplemesh.transport.base import TaskMessage
from tuplemesh.transport.grpc_impl import EPOCH_METADATA
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc, messages_pb2, transfer_pb2_grpc

SENDER = 1  # a member of any mesh of two workers or more (receivers take only members' batches)
SESSION = 77


def worker_epoch(port: int) -> str:
    """The assignment epoch the worker on ``port`` routes by, from its Admin; "" when the port
    serves no Admin (a bare transport receiver routes by none)."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            status = admin_pb2_grpc.AdminStub(channel).GetStatus(admin_pb2.GetStatusRequest(), timeout=10.0)
        except grpc.RpcError:
            return ""
    return str(status.epoch)


def epoch_metadata(port: int) -> tuple[tuple[str, str], ...]:
    """Stream metadata naming the epoch the worker on ``port`` routes by, as a member's stream
    does (none for a receiver that routes by none)."""
    epoch = worker_epoch(port)
    return ((EPOCH_METADATA, epoch),) if epoch else ()


class GrpcRawSender:
    """One Transfer.Stream; ``acks`` holds (sequence, gap) and ``error`` the status that ended it."""

    def __init__(self, port: int, topology: str, sender: int = SENDER, epoch: str | None = None) -> None:
        self.topology = topology
        self.sender = sender  # a receiver takes batches only from a worker id of its mesh
        self.acks: list[tuple[int, bool]] = []
        self.error: grpc.StatusCode | None = None
        self.ended = threading.Event()
        self._requests: queue.Queue[messages_pb2.TransferBatch | None] = queue.Queue()
        self._channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        # a worker routing by an assignment epoch takes batches only from streams that name it
        epoch = worker_epoch(port) if epoch is None else epoch
        metadata = ((EPOCH_METADATA, epoch),) if epoch else None
        call = transfer_pb2_grpc.TransferStub(self._channel).Stream(
            iter(self._requests.get, None), wait_for_ready=True, metadata=metadata
        )
        threading.Thread(target=self._read, args=(call,), daemon=True).start()

    def _read(self, call: Any) -> None:
        try:
            for ack in call:
                self.acks.append((ack.sequence, False))
        except grpc.RpcError as exc:
            self.error = exc.code()
        finally:
            self.ended.set()

    def read_acks(self) -> list[tuple[int, bool]]:
        return self.acks

    def send(self, sequence: int, messages: list[TaskMessage], ack_requested: bool = True) -> None:
        self._requests.put(
            messages_pb2.TransferBatch(
                topology_id=self.topology,
                sender=self.sender,
                session=SESSION,
                sequence=sequence,
                packed=msgpack.packb(messages),
                ack_requested=ack_requested,
            )
        )

    def probe(self) -> None:
        """An ack probe: an empty batch with sequence 0 that asks for an ack."""
        self._requests.put(
            messages_pb2.TransferBatch(
                topology_id=self.topology, sender=self.sender, session=SESSION, ack_requested=True
            )
        )

    def close(self) -> None:
        self._requests.put(None)
        self._channel.close()


class ZmqRawSender:
    """One DEALER socket; ``acks`` holds (sequence, gap) as the receiver answered."""

    def __init__(self, port: int, topology: str, sender: int = SENDER, epoch: str | None = None) -> None:
        self.topology = topology
        self.sender = sender
        self.epoch = worker_epoch(port) if epoch is None else epoch  # named in every header
        self.acks: list[tuple[int, bool]] = []
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.connect(f"tcp://127.0.0.1:{port + Config({})['zmq.port.offset']}")

    def send(
        self, sequence: int, messages: list[TaskMessage], first_unacked: int = 0, ack_requested: bool = True
    ) -> None:
        fields = [self.topology, self.sender, SESSION, sequence, ack_requested, first_unacked]
        header = msgpack.packb([*fields, self.epoch] if self.epoch else fields)
        self._socket.send_multipart([header, msgpack.packb(messages)])

    def read_acks(self) -> list[tuple[int, bool]]:
        """Every ack received so far (reads what arrived since the last call)."""
        while self._socket.poll(0):
            sequence, _credit, _unknown, _duplicates, _congested, gap, _granted = msgpack.unpackb(
                self._socket.recv()
            )
            self.acks.append((sequence, gap))
        return self.acks

    def close(self) -> None:
        self._socket.close(0)
        self._context.term()
