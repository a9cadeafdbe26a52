"""A restarted worker of a checkpointed topology answers its export's offsets only once its log
is the restored checkpoint's: never from the fresh, empty log it starts with (real processes)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import grpc

from tests.fault.harness import write_config
from tests.helpers import eventually
from tests.worker.conftest import start_mesh, wait_serving
from tuplemesh.client import GatewayClient
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2, gateway_pb2_grpc

TARGET = "tests.spark.exactly_once_topology:topology"
LINES = 300


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def test_a_restarted_worker_answers_offsets_only_from_its_restored_log(tmp_path: Path):
    config = write_config(
        tmp_path / "tuplemesh.yaml",
        **{
            "topology.state.backend": "sqlite",
            "topology.state.sqlite.path": str(tmp_path / "state.sqlite"),
            "topology.state.checkpoint.interval.ms": 200,
        },
    )
    mesh = start_mesh(TARGET, 2, config)
    try:
        addresses = [mesh.address(i) for i in range(2)]
        with GatewayClient(addresses, timeout=10) as client:
            assert client.publish("lines", ([f"line {n}"] for n in range(LINES))).rows == LINES
            eventually(
                lambda: sum(p.end for p in client.offsets("out").partitions.values()) == LINES,
                timeout=30,
                message="every line readable",
            )
        stub = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(mesh.address(1)))
        request = gateway_pb2.OffsetsRequest(export="out")
        before = {(p.partition, p.epoch, p.start, p.end) for p in stub.Offsets(request, timeout=5).partitions}
        assert before and sum(end for _, _, _, end in before) > 0  # worker 1 holds records

        mesh.kill(1)
        mesh.restart(1, wait=False)
        eventually(lambda: port_open(mesh.ports[1]), timeout=60, interval=0.005, message="port open")
        admin = admin_pb2_grpc.AdminStub(grpc.insecure_channel(mesh.address(1)))
        with_reports = admin_pb2.GetStatusRequest(include_reports=True)
        offsets: set[tuple[int, int, int, int]] | None = None
        export_reports: list[Any] | None = None
        refused = 0
        # as fast as the worker answers, from the moment its port opens: every first answer is
        # the restored state, never the empty one a starting worker's tasks begin with
        while offsets is None or export_reports is None:
            try:
                if export_reports is None:
                    status = admin.GetStatus(with_reports, timeout=5)
                    export_reports = list(json.loads(status.reports_json)["out"].values())
                if offsets is None:
                    reply = stub.Offsets(request, timeout=5)
                    offsets = {(p.partition, p.epoch, p.start, p.end) for p in reply.partitions}
            except grpc.RpcError as exc:  # starting, or restoring its state: ask again
                assert exc.code() == grpc.StatusCode.UNAVAILABLE, (exc.code(), exc.details())
                assert mesh.procs[1].poll() is None, "worker 1 exited"
                refused += 1
        # the same epochs and offsets as before the kill
        assert offsets == before, f"after {refused} UNAVAILABLE answer(s)"
        assert [(r["start"], r["end"]) for r in export_reports] == [(s, e) for _, _, s, e in sorted(before)]
        wait_serving(mesh, 1)
    finally:
        codes = mesh.stop()
    assert codes == [0, 0]
