"""Admin control calls are opt-in and token-guarded; Rebalance refuses what the mesh cannot reach
and leaves every worker running; readiness follows the peers (real worker processes)."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2

from tests.helpers import eventually, freeze
from tests.worker.conftest import Mesh, start_mesh, wait_serving
from tuplemesh.v1 import admin_pb2

TICKER = "tests.worker.topologies:ticker"


def health(mesh: Mesh, index: int) -> int:
    """Worker ``index``'s readiness (the empty service name), -1 while it does not answer."""
    try:
        reply = mesh.health(index).Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0)
    except grpc.RpcError:
        return -1
    return int(reply.status)


def sunk(mesh: Mesh, index: int) -> int:
    """Tuples the ``sink`` task of worker ``index`` has executed."""
    status = mesh.admin(index).GetStatus(admin_pb2.GetStatusRequest(include_reports=True), timeout=5.0)
    [count] = json.loads(status.reports_json)["sink"].values()
    return int(count)


def assert_both_move_tuples(mesh: Mesh) -> None:
    for index in (0, 1):
        assert health(mesh, index) == health_pb2.HealthCheckResponse.SERVING
        assert mesh.procs[index].poll() is None
        before = sunk(mesh, index)
        eventually(lambda i=index, b=before: sunk(mesh, i) > b, timeout=30, message=f"worker {index} sinks")


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    """Two workers (the ticker topology: a sink task on each); keepalive and grace short, so a
    stopped peer is noticed within seconds."""
    config: Path = tmp_path_factory.mktemp("conf") / "tuplemesh.yaml"
    config.write_text("messaging.keepalive.millis: 500\nworker.peer.grace.secs: 1.0\n")
    mesh = start_mesh(TICKER, 2, config)
    yield mesh
    for proc in mesh.procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)  # a failed readiness test may leave one stopped
    assert mesh.stop() == [0, 0]


def test_rebalance_to_more_workers_than_discovery_knows_is_refused_and_both_keep_running(mesh: Mesh):
    with pytest.raises(grpc.RpcError) as refused:
        mesh.admin(0).Rebalance(admin_pb2.RebalanceRequest(workers=3), timeout=30.0)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert refused.value.details() == (
        "cannot rescale to 3 worker(s): no address known for worker(s) 2 (discovery knows 2 address(es))"
    )
    assert_both_move_tuples(mesh)


def test_a_forged_epoch_of_no_workers_is_refused_and_both_keep_running(mesh: Mesh):
    epoch = mesh.admin(1).GetAssignment(admin_pb2.GetAssignmentRequest(), timeout=5.0).epoch
    counter, workers, code = epoch.split("/")
    assert (counter, workers) == ("0", "2")
    forged = f"1/0/{code}"
    for workers_asked, details in [
        (0, "workers must be >= 1, got 0"),
        (1, f"epoch '{forged}' is for 0 worker(s), the request for 1"),
    ]:
        with pytest.raises(grpc.RpcError) as refused:
            mesh.admin(1).Rebalance(
                admin_pb2.RebalanceRequest(workers=workers_asked, epoch=forged), timeout=30
            )
        assert (refused.value.code(), refused.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, details)
    # an epoch that is not after the current one: the mesh cannot go back
    with pytest.raises(grpc.RpcError) as refused:
        mesh.admin(1).Rebalance(admin_pb2.RebalanceRequest(workers=2, epoch=f"0/2/{code}"), timeout=30)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert (
        refused.value.details()
        == f"epoch 0/2/{code} is not after this worker's 0/2/{code} (its counter must be higher)"
    )
    assert_both_move_tuples(mesh)
    assert mesh.admin(0).GetAssignment(admin_pb2.GetAssignmentRequest(), timeout=5.0).epoch == epoch


def test_readiness_follows_a_stopped_then_killed_and_restarted_peer(mesh: Mesh):
    serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
    freeze(mesh.procs[1].pid)
    try:
        # well below gRPC's default ping timeout (60 s): the keepalive period must be what notices
        eventually(lambda: health(mesh, 0) == not_serving, timeout=30, interval=0.1, message="NOT_SERVING")
    finally:
        os.kill(mesh.procs[1].pid, signal.SIGCONT)
    eventually(lambda: health(mesh, 0) == serving, timeout=60, interval=0.1, message="SERVING again")
    mesh.kill(1)
    eventually(lambda: health(mesh, 0) == not_serving, timeout=60, interval=0.1, message="NOT_SERVING")
    mesh.restart(1)
    eventually(lambda: health(mesh, 0) == serving, timeout=60, interval=0.1, message="SERVING again")
    wait_serving(mesh, 1)
    assert_both_move_tuples(mesh)


def test_disabled_control_calls_are_refused_naming_their_key_and_need_the_token():
    mesh = start_mesh(
        TICKER,
        1,
        env={
            "TUPLEMESH_ADMIN_REBALANCE_ENABLED": "false",
            "TUPLEMESH_ADMIN_WATCH_TUPLES_ENABLED": "false",
            "TUPLEMESH_ADMIN_EMIT_ENABLED": "false",
            "TUPLEMESH_ADMIN_DRAIN_ENABLED": "false",
            "TUPLEMESH_ADMIN_TOKEN": "s3cret",
        },
    )
    try:
        admin = mesh.admin(0)
        token = (("authorization", "Bearer s3cret"),)
        calls = [
            (admin.Rebalance, admin_pb2.RebalanceRequest(workers=1), "Rebalance", "admin.rebalance.enabled"),
            (
                admin.Emit,
                admin_pb2.EmitRequest(component="sink", values_json="[1]"),
                "Emit",
                "admin.emit.enabled",
            ),
            (admin.Drain, admin_pb2.DrainRequest(), "Drain", "admin.drain.enabled"),
        ]
        for call, request, name, key in calls:
            with pytest.raises(grpc.RpcError) as without_token:
                call(request, timeout=10.0)
            assert without_token.value.code() == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.RpcError) as disabled:
                call(request, timeout=10.0, metadata=token)
            assert (disabled.value.code(), disabled.value.details()) == (
                grpc.StatusCode.PERMISSION_DENIED,
                f"Admin.{name} is off: set {key}: true",
            )
        with pytest.raises(grpc.RpcError) as disabled:
            next(
                iter(
                    admin.WatchTuples(
                        admin_pb2.WatchTuplesRequest(component="sink"), timeout=10.0, metadata=token
                    )
                )
            )
        assert (disabled.value.code(), disabled.value.details()) == (
            grpc.StatusCode.PERMISSION_DENIED,
            "Admin.WatchTuples is off: set admin.watch.tuples.enabled: true",
        )
        status = admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=10.0, metadata=token)
        assert status.state == "SERVING"  # nothing of the above reached the worker
    finally:
        assert mesh.stop() == [0]
