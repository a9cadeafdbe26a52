"""A worker started ahead of a scale-up serves while it waits to be included: health NOT_SERVING
(alive for a liveness probe), Admin.GetStatus saying it waits, with its index and epoch; then
SERVING once a rescale includes it."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2

from tests.fault import harness
from tests.helpers import eventually
from tests.worker.conftest import Mesh, wait_serving
from tuplemesh.core.admin_calls import admin_call
from tuplemesh.hotkeys.service import HOT_KEYS
from tuplemesh.hotkeys.v1 import hotkeys_pb2
from tuplemesh.launcher import stop_processes
from tuplemesh.netutil import free_ports
from tuplemesh.server.joining import WAITING_TO_JOIN
from tuplemesh.topology.assignment import Epoch
from tuplemesh.v1 import admin_pb2

TARGET = "tests.fault.numbered:numbered"


def health(mesh: Mesh, index: int, service: str) -> int:
    try:
        return int(mesh.health(index).Check(health_pb2.HealthCheckRequest(service=service), timeout=2).status)
    except grpc.RpcError:
        return -1  # not answering yet


def test_a_worker_waiting_to_join_serves_its_health_and_status_then_serves_once_included(tmp_path: Path):
    config, _ = harness.numbered_config(tmp_path)
    ports = free_ports(4)
    mesh = Mesh(ports[:2], [None] * 2, ports[2:], [None] * 2)  # type: ignore[list-item]
    try:
        harness.start_worker(mesh, TARGET, 0, 1, config)
        wait_serving(mesh, 0)
        harness.start_worker(mesh, TARGET, 1, 2, config)  # the mesh runs 1 worker: it waits
        not_serving = health_pb2.HealthCheckResponse.NOT_SERVING
        eventually(lambda: health(mesh, 1, "") == not_serving, timeout=30, message="readiness NOT_SERVING")
        assert health(mesh, 1, "tuplemesh.v1.Transfer") == not_serving
        assert health(mesh, 1, "tuplemesh.v1.Admin") == health_pb2.HealthCheckResponse.SERVING  # alive
        status = mesh.admin(1).GetStatus(admin_pb2.GetStatusRequest(), timeout=2)
        mesh_epoch = harness.epoch_of(mesh, 0)
        assert mesh_epoch is not None
        own = Epoch(2, mesh_epoch.code, 0)  # what its flags say
        assert (status.state, status.worker, status.workers, status.epoch) == (
            WAITING_TO_JOIN,
            1,
            2,
            str(own),
        )
        with pytest.raises(grpc.RpcError) as refused:  # no epoch the mesh routes by
            mesh.admin(1).GetAssignment(admin_pb2.GetAssignmentRequest(), timeout=2)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert refused.value.details() == (
            f"worker 1 is waiting to be included in the mesh (the mesh runs 1 worker(s), epoch "
            f"{mesh_epoch}); ask a worker of the mesh, or rescale it to include this one"
        )
        with pytest.raises(grpc.RpcError) as refused:  # it has routed by no epoch yet
            mesh.admin(1).GetEpochHistory(admin_pb2.GetEpochHistoryRequest(), timeout=2)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        # a call a feature adds to Admin: no feature runs yet, so it is refused as Admin's own are
        with grpc.insecure_channel(mesh.address(1)) as channel, pytest.raises(grpc.RpcError) as refused:
            admin_call(channel, HOT_KEYS)(hotkeys_pb2.HotKeysRequest(), timeout=2)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert refused.value.details().startswith("worker 1 is waiting to be included in the mesh")

        mesh.admin(0).Rebalance(admin_pb2.RebalanceRequest(workers=2), timeout=30)
        harness.wait_rescaled(mesh, 2, 1)
        status = mesh.admin(1).GetStatus(admin_pb2.GetStatusRequest(), timeout=2)
        assert (status.state, status.worker, status.epoch) == (
            "SERVING",
            1,
            str(Epoch(2, mesh_epoch.code, 1)),
        )
        # its history starts with the epoch it joined at (waiting routes by none)
        history = mesh.admin(1).GetEpochHistory(admin_pb2.GetEpochHistoryRequest(), timeout=2)
        assert [(e.epoch, e.workers) for e in history.epochs] == [(str(Epoch(2, mesh_epoch.code, 1)), 2)]
    finally:
        codes = stop_processes([proc for proc in mesh.procs if proc is not None], 30)
    assert codes == [0, 0]
