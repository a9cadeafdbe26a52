"""How the data source reaches one worker's Gateway: the only place it opens a gRPC channel."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import grpc

from tuplemesh.v1 import gateway_pb2_grpc

__all__ = ["gateway", "open_channel"]

#: Fetch answers carry up to batchSize * 10 records: far above gRPC's 4 MB default.
MAX_RECEIVE_BYTES = 64 * 1024 * 1024


def open_channel(target: str) -> grpc.Channel:
    """A channel to the worker at ``target`` (HOST:PORT)."""
    return grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)])


@contextmanager
def gateway(target: str) -> Iterator[gateway_pb2_grpc.GatewayStub]:
    """A Gateway stub for the worker at ``target``; its channel closes on leaving the block."""
    channel = open_channel(target)
    try:
        yield gateway_pb2_grpc.GatewayStub(channel)
    finally:
        channel.close()
