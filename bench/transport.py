"""Transport benchmark: 100-byte tuples between two processes on loopback.

Every kind packs batches of 1000 ``(task, payload)`` pairs with msgpack and the receiver unpacks
them all, so the figures compare the transports, not the framing. Baselines in the same run: a
raw TCP socket with length-prefixed frames, and pyzmq PUSH/PULL with one frame per batch.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import msgpack

from bench.records import Record
from tuplemesh.config import Config
from tuplemesh.netutil import free_ports
from tuplemesh.transport import make_context
from tuplemesh.transport.base import TaskMessage

ROOT = Path(__file__).resolve().parents[1]
PAYLOAD = b"x" * 100
BATCH = 1000


def _peer(kind: str, port: int, expected: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.transport_peer", kind, str(port), str(expected)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _finish(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None and proc.stdout.readline().strip() == "done"
    proc.wait(30)


def _batch() -> list[TaskMessage]:
    return [(i % 8 + 1, PAYLOAD) for i in range(BATCH)]


def run_plugin(name: str, total: int) -> float:
    """A tuplemesh transport plugin: send() batches, then wait until every one is acknowledged."""
    port = free_ports(1)[0]
    proc = _peer(name, port, total)
    context = make_context(name)
    context.prepare(Config({}))
    conn = context.connect("bench", "127.0.0.1", port)
    start = time.perf_counter()
    for _ in range(total // BATCH):
        conn.send(_batch())
    conn.close()  # returns once every batch is acknowledged: delivered to on_batch
    elapsed = time.perf_counter() - start
    _finish(proc)
    context.term()
    return total / elapsed


def run_socket(total: int) -> float:
    port = free_ports(1)[0]
    proc = _peer("socket", port, total)
    sock = socket.create_connection(("127.0.0.1", port))
    pack = msgpack.Packer(use_bin_type=True).pack
    start = time.perf_counter()
    for _ in range(total // BATCH):
        frame = pack(_batch())
        sock.sendall(struct.pack("!I", len(frame)) + frame)
    assert sock.recv(1) == b"k"
    elapsed = time.perf_counter() - start
    sock.close()
    _finish(proc)
    return total / elapsed


def run_zmq(total: int) -> float:
    import zmq

    port = free_ports(1)[0]
    proc = _peer("pyzmq", port, total)
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.SNDHWM, 16)
    push.connect(f"tcp://127.0.0.1:{port}")
    pack = msgpack.Packer(use_bin_type=True).pack
    start = time.perf_counter()
    for _ in range(total // BATCH):
        push.send(pack(_batch()), copy=False)
    _finish(proc)  # the receiver says done once it unpacked everything
    elapsed = time.perf_counter() - start
    push.close(0)
    ctx.term()
    return total / elapsed


def run(quick: bool = False) -> list[Record]:
    total = 300_000 if quick else 2_000_000
    repeats = 1 if quick else 3

    def median(fn: object, *args: object) -> float:
        rates = sorted(fn(*args, total) for _ in range(repeats))  # type: ignore[operator]
        return rates[len(rates) // 2]

    baselines = {
        "raw socket, 1000 packed per frame": median(run_socket),
        "pyzmq PUSH/PULL, 1000 packed per frame": median(run_zmq),
    }
    records = []
    for name, target in (
        ("grpc", ">= 2.0M tuples/s and >= 0.9x the raw-socket baseline"),
        ("zmq", ">= 0.9x the raw-socket baseline"),
    ):
        records.append(
            Record(
                "transport",
                f"{name}: 100-byte tuples, 2 processes, batches of 1000, acknowledged",
                "tuples",
                median(run_plugin, name),
                baselines,
                target,
            )
        )
    return records
