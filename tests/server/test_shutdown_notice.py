"""A member's shutdown notice stops the receiving worker receiving for good; the worker then
drains as a whole: readiness NOT_SERVING and Gateway Publish UNAVAILABLE, while every row it took
before still comes out. Real worker processes on loopback; the member is a hand-made Transfer
client that proves worker 0 with the mesh secret."""

from __future__ import annotations

from pathlib import Path

import grpc
import msgpack
import pytest
from grpc_health.v1 import health_pb2

from tests.helpers import eventually
from tests.worker.conftest import Mesh, start_mesh
from tuplemesh.security import mesh_proof
from tuplemesh.transport.framing import pack_within
from tuplemesh.transport.grpc_impl import EPOCH_METADATA
from tuplemesh.v1 import admin_pb2, gateway_pb2, gateway_pb2_grpc, messages_pb2, transfer_pb2_grpc

#: lines (an IngestSpout) on workers 1 and 0, echo (the ExportBolt) on worker 0 only
TARGET = "tests.spark.topologies:echo"
TOPOLOGY = "echo"
SECRET = b"the mesh secret"
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVING = health_pb2.HealthCheckResponse.SERVING


def health(mesh: Mesh, index: int, service: str = "") -> int:
    return int(mesh.health(index).Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status)


def publish(mesh: Mesh, index: int, rows: list[list[str]]) -> int:
    gateway = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(mesh.address(index)))
    request = gateway_pb2.PublishRequest(component="lines", packed=msgpack.packb(rows))
    return sum(ack.accepted for ack in gateway.Publish(iter([request]), timeout=30))


def exported(mesh: Mesh) -> list[list[str]]:
    gateway = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(mesh.address(0)))
    request = gateway_pb2.FetchRequest(export="echo", partition=0, start_offset=0, max_records=10_000)
    return list(msgpack.unpackb(gateway.Fetch(request, timeout=10).packed))


def send_notice(mesh: Mesh, index: int) -> list[int]:
    """The shutdown notice (task -1) on a Transfer stream proven as worker 0's; the acks' sequences."""
    epoch = mesh.admin(index).GetStatus(admin_pb2.GetStatusRequest(), timeout=5).epoch
    [(packed, _)] = pack_within([(-1, b"")], 1 << 20)
    notice = messages_pb2.TransferBatch(
        topology_id=TOPOLOGY, sender=0, session=4242, sequence=1, packed=packed, ack_requested=True
    )
    metadata = ((EPOCH_METADATA, epoch), *mesh_proof(SECRET, TOPOLOGY, 0, index))
    stream = transfer_pb2_grpc.TransferStub(grpc.insecure_channel(mesh.address(index))).Stream
    return [ack.sequence for ack in stream(iter([notice]), metadata=metadata, timeout=10)]


def test_a_members_shutdown_notice_drains_the_worker_and_loses_no_row_it_took(tmp_path: Path):
    secret = tmp_path / "mesh-secret"
    secret.write_bytes(SECRET)
    mesh = start_mesh(TARGET, 2, env={"TUPLEMESH_MESH_SECRET_FILE": str(secret)})
    try:
        rows = [[f"before-{i:03d}"] for i in range(200)]
        assert publish(mesh, 1, rows) == 200
        assert send_notice(mesh, 1) == [1]  # honoured (acknowledged), not refused
        eventually(lambda: health(mesh, 1) == NOT_SERVING, timeout=10, interval=0.05, message="NOT_SERVING")
        assert health(mesh, 1, "tuplemesh.v1.Transfer") == NOT_SERVING
        assert health(mesh, 1, "tuplemesh.v1.Admin") == SERVING  # alive: a liveness probe keeps it
        status = mesh.admin(1).GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
        assert (status.state, status.binding.shutdown_messages) == ("NOT_SERVING", 1)
        with pytest.raises(grpc.RpcError) as refused:
            publish(mesh, 1, [["after"]])
        assert (refused.value.code(), refused.value.details()) == (
            grpc.StatusCode.UNAVAILABLE,
            "worker 1 is draining or stopping: publish elsewhere",
        )
        # every row worker 1 took before the notice comes out of the export on worker 0, once
        eventually(
            lambda: len(exported(mesh)) >= 200, timeout=30, interval=0.1, message=lambda: f"{exported(mesh)}"
        )
        assert sorted(exported(mesh)) == rows
        assert health(mesh, 0) == SERVING  # the worker that got no notice serves on
        assert publish(mesh, 0, [["after"]]) == 1
        eventually(lambda: len(exported(mesh)) == 201, timeout=30, interval=0.1)
    finally:
        assert mesh.stop() == [0, 0]
