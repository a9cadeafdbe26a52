"""How the data source reaches one worker's Gateway: the only place it opens a gRPC channel,
through ``tuplemesh.client.open_channel`` with the options' TLS settings and token."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import grpc

from tuplemesh.client import open_channel
from tuplemesh.spark.options import Options
from tuplemesh.v1 import gateway_pb2_grpc

__all__ = ["call_failed", "gateway"]

#: Fetch answers carry up to batchSize * 10 records: far above gRPC's 4 MB default.
MAX_RECEIVE_BYTES = 64 * 1024 * 1024


#: what to check when a worker refuses who is calling
_HINTS = {grpc.StatusCode.UNAUTHENTICATED: " (option 'token' must be the worker's admin.token)"}


def call_failed(action: str, target: str, exc: grpc.RpcError) -> RuntimeError:
    """The error a failed Gateway call becomes: it names the worker and the status code."""
    code = exc.code()
    return RuntimeError(
        f"tuplemesh: {action} {target} failed: {code.name}: {exc.details()}{_HINTS.get(code, '')}"
    )


@contextmanager
def gateway(opts: Options, target: str) -> Iterator[gateway_pb2_grpc.GatewayStub]:
    """A Gateway stub for the worker at ``target``, secured as ``opts`` say; its channel closes
    on leaving the block."""
    channel = open_channel(
        target, opts.tls, opts.token, options=[("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)]
    )
    try:
        yield gateway_pb2_grpc.GatewayStub(channel)
    finally:
        channel.close()
