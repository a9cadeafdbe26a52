"""zmq transport bad input: counted, logged rate-limited, and the socket keeps serving peers."""

from __future__ import annotations

import socket

import msgpack
import zmq

from tests.transport.conftest import Receiver
from tuplemesh.config import Config
from tuplemesh.transport import make_context


def test_malformed_frames_unknown_topology_and_garbage_are_counted_and_survived(port: int, caplog):
    conf = Config({"tuplemesh.log.rate.limit.secs": 0})
    server = make_context("zmq")
    server.prepare(conf)
    rx = Receiver()
    binding = server.bind("topo-1", port, rx)
    data_port = port + conf["zmq.port.offset"]
    raw = zmq.Context()
    dealer = raw.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(f"tcp://127.0.0.1:{data_port}")
    good_body = msgpack.packb([[1, b"ok"]])
    bad = [
        [b"only-one-frame"],
        [b"\xc1", good_body],  # header is not msgpack
        [msgpack.packb(["topo-1", 1, 2]), good_body],  # header too short
        [msgpack.packb(["other-topology", 1, 2, 1, True, 1]), good_body],
        [msgpack.packb(["topo-1", 0, 2, 1, True, 1]), b"\xc1\xc1"],  # body is not msgpack
        [msgpack.packb(["topo-1", 0, 2, 1, True, 1]), msgpack.packb([[1, 2, 3]])],
    ]
    for frames in bad:
        dealer.send_multipart(frames)
    with socket.create_connection(("127.0.0.1", data_port)) as junk:  # not even ZMTP
        junk.sendall(bytes(range(256)) * 8)
    client = make_context("zmq")
    client.prepare(conf)
    conn = client.connect("topo-1", "127.0.0.1", port)
    conn.send([(5, b"after the garbage")])
    rx.wait_for(1, 10)
    assert rx.messages == [(5, b"after the garbage")]
    stats = binding.stats()
    # three are not even batches (frame count, header); three are batches refused as wrong
    assert (stats.rejected_frames, stats.rejected_batches) == (3, 3)
    assert stats.received_batches == 1 and stats.received_tuples_from == {0: 1}
    assert "for topology 'other-topology'" in caplog.text and "malformed header" in caplog.text
    conn.close()
    dealer.close(0)
    raw.term()
    client.term()
    server.term()
