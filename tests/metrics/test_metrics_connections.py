"""/metrics serves a bounded number of connections, and a silent one is closed after a timeout."""

from __future__ import annotations

import socket
import urllib.request

from tests.helpers import ListSpout
from tuplemesh.config import Config
from tuplemesh.server import metrics_http
from tuplemesh.server.metrics_http import MetricsEndpoint
from tuplemesh.topology import TopologyBuilder
from tuplemesh.worker.local_cluster import LocalCluster


def test_silent_connections_time_out_and_the_ones_beyond_the_limit_are_closed(monkeypatch):
    monkeypatch.setattr(metrics_http, "MAX_CONNECTIONS", 2)
    monkeypatch.setattr(metrics_http._QuietHandler, "timeout", 0.5)
    builder = TopologyBuilder("scraped")
    builder.set_spout("ids", ListSpout([[1]], ["id"]))
    cluster = LocalCluster(builder.build(), 1, Config({"messaging.transport": "local"}))
    endpoint = MetricsEndpoint(cluster.workers[0], "127.0.0.1", 0)
    try:
        silent = [socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) for _ in range(2)]
        beyond = socket.create_connection(("127.0.0.1", endpoint.port), timeout=10)
        assert beyond.recv(1) == b""  # no slot: closed unanswered, no thread started for it
        for conn in silent:
            assert conn.recv(1) == b""  # closed by the server once silent for the timeout
            conn.close()
        beyond.close()
        page = urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/metrics", timeout=10).read()
        assert b"tuplemesh_build_info" in page  # the slots came back
    finally:
        endpoint.stop()
