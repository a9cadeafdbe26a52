"""A Rebalance that names an epoch is how a worker forwards the rescale it started to its peers.
With a mesh secret only a member may send one, proven as on Transfer; the admin token alone does
not make a member, while a client's Rebalance naming only the worker count keeps working with the
token. Under mTLS the caller's certificate must carry the worker role. Real worker processes on
loopback."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2

from tests.helpers import eventually
from tests.security.test_mtls_and_tokens import admin as tls_admin
from tests.security.test_mtls_and_tokens import tls_env, wait_tls_serving
from tests.worker.conftest import Mesh, start_mesh
from tuplemesh.security import REBALANCE, TRANSFER, mesh_auth, mesh_proof
from tuplemesh.topology.assignment import Epoch
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc

TARGET = "tests.worker.topologies:small_wordcount"
TOPOLOGY = "wordcount"
SECRET = b"the mesh secret"
TOKEN = "the-admin-token"
AUTH = (("authorization", f"Bearer {TOKEN}"),)


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    """Two workers sharing the mesh secret, their Admin guarded by the token."""
    secret = tmp_path_factory.mktemp("secret") / "mesh-secret"
    secret.write_bytes(SECRET)
    env = {"TUPLEMESH_MESH_SECRET_FILE": str(secret), "TUPLEMESH_ADMIN_TOKEN": TOKEN}
    mesh = start_mesh(TARGET, 2, env=env)
    yield mesh
    assert mesh.stop() == [0, 0]


def epoch(mesh: Mesh, index: int) -> str:
    return str(
        mesh.admin(index).GetAssignment(admin_pb2.GetAssignmentRequest(), metadata=AUTH, timeout=5).epoch
    )


def state(mesh: Mesh, index: int) -> str:
    return str(mesh.admin(index).GetStatus(admin_pb2.GetStatusRequest(), metadata=AUTH, timeout=5).state)


def refused(mesh: Mesh, index: int) -> dict[str, int]:
    """tuplemesh_transfer_refused_total by reason, from worker ``index``'s /metrics."""
    text = urllib.request.urlopen(mesh.metrics_url(index), timeout=5).read().decode()
    found = re.findall(r'^tuplemesh_transfer_refused_total\{[^}]*reason="(\w+)"[^}]*\} (\S+)$', text, re.M)
    return {reason: int(float(value)) for reason, value in found}


def rebalance_code(
    stub: admin_pb2_grpc.AdminStub, request: admin_pb2.RebalanceRequest, metadata: tuple[tuple[str, str], ...]
) -> tuple[grpc.StatusCode, str]:
    try:
        stub.Rebalance(request, metadata=metadata, timeout=30)
    except grpc.RpcError as exc:
        return exc.code(), exc.details()
    return grpc.StatusCode.OK, ""


def test_a_token_holder_without_the_secret_cannot_forward_an_epoch_and_every_worker_runs_on(mesh: Mesh):
    current = Epoch.parse(epoch(mesh, 0))
    newer = Epoch(2, current.code, current.counter + 1)
    request = admin_pb2.RebalanceRequest(workers=2, epoch=str(newer))
    before = [refused(mesh, i).get("unauthenticated", 0) for i in (0, 1)]
    for index in (0, 1):
        worker_1s = mesh_auth(SECRET, TOPOLOGY, 1, index, REBALANCE)
        attempts = [
            AUTH,  # the token, no proof
            (*AUTH, *mesh_proof(b"a guess", TOPOLOGY, 0, index, REBALANCE)),  # made with another secret
            (*AUTH, ("tuplemesh-worker", "0"), ("tuplemesh-auth", worker_1s)),  # worker 1's, named 0
            (*AUTH, ("tuplemesh-worker", "x"), ("tuplemesh-auth", "00")),  # no worker id at all
            (*AUTH, *mesh_proof(SECRET, TOPOLOGY, 0, index, TRANSFER)),  # a Transfer stream's proof
        ]
        for metadata in attempts:
            assert rebalance_code(mesh.admin(index), request, metadata) == (
                grpc.StatusCode.UNAUTHENTICATED,
                "a Rebalance naming an epoch comes from a worker: it needs a fresh proof of the mesh "
                "secret: no or a wrong proof of the mesh secret (metadata tuplemesh-worker and "
                "tuplemesh-auth); to rescale, give only the worker count",
            )
    assert [refused(mesh, i).get("unauthenticated", 0) - before[i] for i in (0, 1)] == [5, 5]
    for index in (0, 1):  # nothing reached either worker: same epoch, serving, running
        assert epoch(mesh, index) == str(current)
        assert state(mesh, index) == "SERVING"
        assert mesh.procs[index].poll() is None
        reply = mesh.health(index).Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_a_forwarded_rebalance_proof_is_taken_once_and_only_by_the_worker_it_names(mesh: Mesh):
    current = Epoch.parse(epoch(mesh, 1))
    # the request is refused after the membership check (its epoch is for 3 workers, it asks for
    # 2): a proof that passes is used up, and nothing moves
    request = admin_pb2.RebalanceRequest(workers=2, epoch=str(Epoch(3, current.code, current.counter + 1)))
    how = "; to rescale, give only the worker count"
    captured = (*AUTH, *mesh_proof(SECRET, TOPOLOGY, 0, 1, REBALANCE))  # worker 0's call to worker 1
    before = [refused(mesh, i) for i in (0, 1)]
    assert rebalance_code(mesh.admin(1), request, captured)[0] == grpc.StatusCode.INVALID_ARGUMENT
    assert rebalance_code(mesh.admin(1), request, captured) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "a Rebalance naming an epoch comes from a worker: it needs a fresh proof of the mesh secret: "
        "a proof already used (each stream or call needs a fresh one): replayed" + how,
    )
    for_worker_0 = (*AUTH, *mesh_proof(SECRET, TOPOLOGY, 1, 0, REBALANCE))  # worker 1's call to worker 0
    assert rebalance_code(mesh.admin(1), request, for_worker_0) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "a Rebalance naming an epoch comes from a worker: it needs a fresh proof of the mesh secret: "
        "a proof made for worker 0, presented to worker 1" + how,
    )
    after = [refused(mesh, i) for i in (0, 1)]
    assert after[0] == before[0]
    assert {r: n - before[1].get(r, 0) for r, n in after[1].items() if n != before[1].get(r, 0)} == {
        "replayed_proof": 1,
        "wrong_receiver": 1,
    }
    for index in (0, 1):
        assert epoch(mesh, index) == str(current)
        assert state(mesh, index) == "SERVING"


def test_a_stale_forwarded_rebalance_proof_is_refused_and_counted(mesh: Mesh):
    current = Epoch.parse(epoch(mesh, 1))
    # an epoch for 3 workers, asking for 2: a proof taken by mistake would be answered
    # INVALID_ARGUMENT, and nothing could move
    request = admin_pb2.RebalanceRequest(workers=2, epoch=str(Epoch(3, current.code, current.counter + 1)))
    before = [refused(mesh, i) for i in (0, 1)]
    for shift, when in ((-400, "before"), (400, "after")):  # made 400 s ago, or 400 s ahead
        made = mesh_proof(SECRET, TOPOLOGY, 0, 1, REBALANCE, clock=lambda shift=shift: time.time() + shift)
        stale = (*AUTH, *made)
        code, message = rebalance_code(mesh.admin(1), request, stale)
        assert code == grpc.StatusCode.UNAUTHENTICATED
        assert re.fullmatch(
            r"a Rebalance naming an epoch comes from a worker: it needs a fresh proof of the mesh "
            rf"secret: a proof made (399|40\d) s {when} now by this worker's clock, outside the 300 s "
            r"window \(mesh.secret.max.skew.secs; are the clocks synchronised\?\); to rescale, give "
            r"only the worker count",
            message,
        ), message
    after = [refused(mesh, i) for i in (0, 1)]
    assert after[0] == before[0]
    assert {r: n - before[1].get(r, 0) for r, n in after[1].items() if n != before[1].get(r, 0)} == {
        "stale_proof": 2
    }
    for index in (0, 1):
        assert epoch(mesh, index) == str(current)
        assert state(mesh, index) == "SERVING"


def test_a_worker_initiated_rescale_with_the_secret_moves_every_worker(mesh: Mesh):
    current = Epoch.parse(epoch(mesh, 1))
    newer = Epoch(2, current.code, current.counter + 1)
    # a client names the worker count only, with the token: worker 1 forwards the epoch it chose
    reply = mesh.admin(1).Rebalance(admin_pb2.RebalanceRequest(workers=2), metadata=AUTH, timeout=30)
    assert reply.epoch == str(newer)

    def moved() -> list[str]:
        found = []
        for index in (0, 1):
            assert mesh.procs[index].poll() is None, f"worker {index} exited"
            try:
                found.append(f"{epoch(mesh, index)} {state(mesh, index)}")
            except grpc.RpcError:
                found.append("restarting")  # between its old epoch's server and its new one's
        return found

    eventually(
        lambda: moved() == [f"{newer} SERVING"] * 2, timeout=60, interval=0.1, message=lambda: f"{moved()}"
    )


def test_under_mtls_only_a_worker_certificate_forwards_an_epoch(pki: Path):
    mesh = start_mesh(TARGET, 2, wait=False, env=tls_env(pki))
    try:
        for index in (0, 1):
            wait_tls_serving(mesh.address(index), pki)
        client = [tls_admin(mesh.address(i), pki, "client") for i in (0, 1)]
        current = Epoch.parse(client[0].GetAssignment(admin_pb2.GetAssignmentRequest(), timeout=5).epoch)
        newer = Epoch(2, current.code, current.counter + 1)
        request = admin_pb2.RebalanceRequest(workers=2, epoch=str(newer))
        assert rebalance_code(client[1], request, ()) == (
            grpc.StatusCode.PERMISSION_DENIED,
            "a Rebalance naming an epoch comes from a worker: it needs a certificate with the worker "
            "role; to rescale, give only the worker count",
        )
        status = client[1].GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
        assert (status.epoch, status.state, dict(status.binding.refused)) == (
            str(current),
            "SERVING",
            {"not_a_worker": 1},
        )
        # the client certificate asks for the worker count; the workers forward with theirs
        assert client[0].Rebalance(admin_pb2.RebalanceRequest(workers=2), timeout=30).epoch == str(newer)

        def moved() -> list[str]:
            found = []
            for stub in client:
                try:
                    found.append(stub.GetStatus(admin_pb2.GetStatusRequest(), timeout=5).epoch)
                except grpc.RpcError:
                    found.append("restarting")
            return found

        eventually(
            lambda: moved() == [str(newer)] * 2, timeout=60, interval=0.1, message=lambda: f"{moved()}"
        )
    finally:
        assert mesh.stop() == [0, 0]
