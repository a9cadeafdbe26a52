"""Receiving side of the transport benchmark, in its own process.

Usage: python -m bench.transport_peer KIND PORT EXPECTED
KIND is a transport plugin (grpc, zmq) or a baseline (socket, pyzmq). Prints "ready",
receives until EXPECTED tuples arrived (each batch fully unpacked into (task, payload)
pairs, the same work for every kind), prints "done".
"""

from __future__ import annotations

import socket
import struct
import sys
import threading

import msgpack

from tuplemesh.config import Config
from tuplemesh.transport import make_context


def _plugin(name: str, port: int, expected: int) -> None:
    done = threading.Event()
    count = [0]

    def on_batch(batch: list[tuple[int, bytes]]) -> list[int]:
        count[0] += len(batch)
        if count[0] >= expected:
            done.set()
        return []

    context = make_context(name)
    context.prepare(Config({"messaging.grpc.server.threads": 4}))
    binding = context.bind("bench", port, on_batch)
    print("ready", flush=True)
    done.wait()
    print("done", flush=True)
    binding.close()


def _socket(port: int, expected: int) -> None:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(1)
    print("ready", flush=True)
    conn, _ = server.accept()
    stream = conn.makefile("rb", buffering=1 << 20)
    count = 0
    while count < expected:
        header = stream.read(4)
        (size,) = struct.unpack("!I", header)
        count += len(msgpack.unpackb(stream.read(size), use_list=False))
    conn.sendall(b"k")
    print("done", flush=True)


def _pyzmq(port: int, expected: int) -> None:
    import zmq

    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.RCVHWM, 16)
    pull.bind(f"tcp://127.0.0.1:{port}")
    print("ready", flush=True)
    count = 0
    while count < expected:
        count += len(msgpack.unpackb(pull.recv(copy=False).buffer, use_list=False))
    print("done", flush=True)
    pull.close(0)
    ctx.term()


if __name__ == "__main__":
    kind, port, expected = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if kind in ("socket", "pyzmq"):
        {"socket": _socket, "pyzmq": _pyzmq}[kind](port, expected)
    else:
        _plugin(kind, port, expected)
