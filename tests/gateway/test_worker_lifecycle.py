"""The Gateway across a worker's life in one process: a run ends cleanly and leaves nothing behind."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import msgpack
import pytest

from tests.helpers import eventually
from tuplemesh.config import Config
from tuplemesh.discovery import StaticDirectory
from tuplemesh.gateway import ExportBolt, IngestSpout
from tuplemesh.netutil import free_ports
from tuplemesh.server import WorkerProcess
from tuplemesh.topology import Topology, TopologyBuilder
from tuplemesh.v1 import gateway_pb2, gateway_pb2_grpc

SHUTDOWN_TIMEOUT = 6.0
CONF = {
    "metrics.port": 0,  # no /metrics server in the test process
    "worker.gc.threshold": 0,  # leave the test process's collector alone
    "topology.shutdown.timeout.secs": SHUTDOWN_TIMEOUT,
}


def relay(retention: int) -> Topology:
    """Rows published to "rows" come out of the export "out" unchanged."""
    builder = TopologyBuilder("relay")
    builder.set_spout("rows", IngestSpout("rows", ["n"]))
    builder.set_bolt("out", ExportBolt("out", retention)).shuffle_grouping("rows")
    return builder.build()


@contextmanager
def serving(topology: Topology) -> Iterator[tuple[WorkerProcess, gateway_pb2_grpc.GatewayStub]]:
    """A one-worker WorkerProcess in this process, and a Gateway stub to it."""
    [port] = free_ports(1)
    process = WorkerProcess(
        topology,
        Config(CONF),
        index=0,
        num_workers=1,
        port=port,
        directory=StaticDirectory({0: ("127.0.0.1", port)}),
    )
    process.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield process, gateway_pb2_grpc.GatewayStub(channel)
    finally:
        channel.close()


def publish(gateway: gateway_pb2_grpc.GatewayStub, rows: list[list[str]], per_request: int) -> int:
    requests = [
        gateway_pb2.PublishRequest(component="rows", packed=msgpack.packb(rows[i : i + per_request]))
        for i in range(0, len(rows), per_request)
    ]
    return sum(ack.accepted for ack in gateway.Publish(iter(requests), timeout=30))


def exported(gateway: gateway_pb2_grpc.GatewayStub) -> list[list[str]]:
    got = gateway.Fetch(
        gateway_pb2.FetchRequest(export="out", partition=0, start_offset=0, max_records=10_000)
    )
    return list(msgpack.unpackb(got.packed))


def publish_and_stop(topology: Topology, tag: str) -> None:
    """One run: every published row comes out exactly once, then the worker stops cleanly."""
    rows = [[f"{tag}-row{i}"] for i in range(40)]
    with serving(topology) as (process, gateway):
        assert publish(gateway, rows, per_request=5) == 40
        eventually(lambda: len(exported(gateway)) >= 40, message=lambda: f"{tag}: {exported(gateway)}")
        assert sorted(exported(gateway)) == sorted(rows)
        assert process.shutdown() is True


def test_a_second_run_in_one_process_emits_every_published_row_exactly_once():
    topology = relay(retention=1_000)
    publish_and_stop(topology, "first")
    publish_and_stop(topology, "second")  # the stopped first run's queue must not take its rows


def test_stop_with_a_full_export_log_ends_in_time_and_counts_what_was_not_exported():
    topology = relay(retention=10)
    with serving(topology) as (process, gateway):
        assert publish(gateway, [[f"row{i}"] for i in range(100)], per_request=20) == 100
        worker = process.worker
        # Every row left the ingest queue; the log holds its retention and nobody fetches.
        eventually(lambda: list(worker.live_reports()["rows"].values()) == [{"emitted": 100, "queued": 0}])
        eventually(lambda: len(exported(gateway)) == 10)
        started = time.monotonic()
        clean = process.shutdown()
        took = time.monotonic() - started
    assert clean is True
    assert took < SHUTDOWN_TIMEOUT, f"shutdown took {took:.1f} s"
    [out_report] = worker.reports()["out"].values()
    assert out_report == {"start": 0, "end": 10, "lost": 90}
    assert worker.snapshot().export_lost == {"out": 90}  # on /metrics and in Admin too


def test_a_draining_worker_sends_publishers_elsewhere():
    with serving(relay(retention=100)) as (process, gateway):
        assert publish(gateway, [["before"]], per_request=1) == 1
        process.drain()
        with pytest.raises(grpc.RpcError) as err:
            publish(gateway, [["after"]], per_request=1)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "publish elsewhere" in (err.value.details() or "")
        assert eventually(lambda: exported(gateway)) == [["before"]]
        assert process.shutdown() is True
