"""A worker's gRPC server grants each stream a fixed HTTP/2 window
(``messaging.grpc.receive.window.bytes``), read here from the SETTINGS frame it sends a client on
the wire. gRPC's automatic window growth would let a peer that ignores the worker's grants park
hundreds of MiB in the transport's buffers (the flood tests in ``tests/fault/test_flood.py``
bound the worker's memory under such a peer)."""

from __future__ import annotations

import socket
import struct

import grpc
import pytest

from tuplemesh.config import Config, ConfigError
from tuplemesh.transport.grpc_impl import new_server

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS, ACK = 0x4, 0x1
INITIAL_WINDOW_SIZE = 0x4


def first_settings(port: int) -> dict[int, int]:
    """The parameters of the first (non-ack) SETTINGS frame the server at ``port`` sends after a
    client's preface and empty SETTINGS."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(PREFACE + (0).to_bytes(3, "big") + bytes([SETTINGS, 0]) + struct.pack(">I", 0))
        buffer = b""
        while True:
            while len(buffer) < 9:
                chunk = conn.recv(65536)
                assert chunk, "the server closed the connection before its SETTINGS"
                buffer += chunk
            length, kind, flags = int.from_bytes(buffer[:3], "big"), buffer[3], buffer[4]
            while len(buffer) < 9 + length:
                buffer += conn.recv(65536)
            payload, buffer = buffer[9 : 9 + length], buffer[9 + length :]
            if kind == SETTINGS and not flags & ACK:
                return {
                    int.from_bytes(payload[i : i + 2], "big"): int.from_bytes(payload[i + 2 : i + 6], "big")
                    for i in range(0, length, 6)
                }


@pytest.mark.parametrize(
    ("conf", "window"), [({}, 1024 * 1024), ({"messaging.grpc.receive.window.bytes": 65535}, 65535)]
)
def test_the_server_announces_the_configured_stream_window(conf: dict[str, int], window: int):
    server = new_server(Config(conf))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        assert first_settings(port)[INITIAL_WINDOW_SIZE] == window
    finally:
        server.stop(0)


@pytest.mark.parametrize("value", ["65534", "2147483648"])
def test_a_window_outside_http2s_range_is_refused_naming_the_key(value: str):
    with pytest.raises(ConfigError) as err:
        Config.load(env={"TUPLEMESH_MESSAGING_GRPC_RECEIVE_WINDOW_BYTES": value})
    assert str(err.value) == (
        "config key 'messaging.grpc.receive.window.bytes' "
        "(set by TUPLEMESH_MESSAGING_GRPC_RECEIVE_WINDOW_BYTES): "
        f"must be between 65535 and 2147483647 (got '{value}')"
    )


def test_the_window_does_not_grow_by_itself(monkeypatch: pytest.MonkeyPatch):
    # gRPC's BDP probing would grow the window past the setting (a flood then parks hundreds of
    # MiB in the transport): the server is made with it off (the wire shows only the first window)
    made: list[list[tuple[str, object]]] = []
    real = grpc.server

    def server(*args: object, **kwargs: object) -> grpc.Server:
        made.append(list(kwargs["options"]))  # type: ignore[call-overload]
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(grpc, "server", server)
    new_server(Config({})).stop(0)
    [options] = made
    assert ("grpc.http2.bdp_probe", 0) in options
    assert ("grpc.http2.lookahead_bytes", 1024 * 1024) in options
