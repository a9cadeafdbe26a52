"""mTLS between workers and for Admin/Gateway clients, the bearer token, and Admin actions
that are off unless enabled. The tests make their own CA and certificates."""

from __future__ import annotations

import re
import socket
import ssl
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from examples.wordcount import expected_counts
from tests.helpers import eventually
from tests.pki import make_ca, make_leaf
from tests.worker.conftest import Mesh, start_mesh
from tuplemesh.cli import main
from tuplemesh.client import TlsSettings, open_channel
from tuplemesh.core.admin_calls import admin_call
from tuplemesh.hotkeys.service import HOT_KEYS
from tuplemesh.hotkeys.v1 import hotkeys_pb2
from tuplemesh.launcher import is_serving
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    mesh_ca = make_ca(d, "mesh-ca")
    make_leaf(d, "worker", mesh_ca, worker=True)
    make_leaf(d, "client", mesh_ca)
    make_leaf(d, "intruder", make_ca(d, "foreign-ca"))
    return d


def tls_env(pki: Path, **extra: str) -> dict[str, str]:
    return {
        "TUPLEMESH_TLS_ENABLED": "true",
        "TUPLEMESH_TLS_CA_FILE": str(pki / "mesh-ca.pem"),
        "TUPLEMESH_TLS_CERT_FILE": str(pki / "worker.crt"),
        "TUPLEMESH_TLS_KEY_FILE": str(pki / "worker.key"),
        **extra,
    }


def tls_as(pki: Path, who: str | None) -> TlsSettings:
    """Client TLS settings: the mesh CA, and ``who``'s certificate (None: no client certificate)."""
    if who is None:
        return TlsSettings(str(pki / "mesh-ca.pem"))
    return TlsSettings(str(pki / "mesh-ca.pem"), str(pki / f"{who}.crt"), str(pki / f"{who}.key"))


def admin(address: str, pki: Path, who: str | None, token: str = "") -> admin_pb2_grpc.AdminStub:
    return admin_pb2_grpc.AdminStub(open_channel(address, tls_as(pki, who), token))


def wait_tls_serving(address: str, pki: Path, timeout: float = 30) -> None:
    stub = health_pb2_grpc.HealthStub(open_channel(address, tls_as(pki, "client")))
    eventually(
        lambda: is_serving(stub), timeout=timeout, interval=0.1, message=f"{address} SERVING over mTLS"
    )


def test_a_mesh_with_mtls_works_end_to_end_and_refuses_outsiders(pki: Path):
    mesh = start_mesh("tests.worker.topologies:small_wordcount", 2, wait=False, env=tls_env(pki))
    try:
        for i in (0, 1):
            wait_tls_serving(mesh.address(i), pki)
        expected = sum(expected_counts(10).values())

        def executed() -> int:
            return sum(
                e.executed
                for i in (0, 1)
                for e in admin(mesh.address(i), pki, "client")
                .GetStatus(admin_pb2.GetStatusRequest())
                .executors
                if e.component == "count"
            )

        eventually(
            lambda: executed() >= expected, timeout=30, interval=0.1, message=lambda: f"{executed()} counted"
        )
        assert executed() == expected  # every word crossed the mTLS Transfer streams and was counted
        for who in (None, "intruder"):  # no client certificate; a certificate from another CA
            with pytest.raises(grpc.RpcError) as err:
                admin(mesh.address(0), pki, who).GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(grpc.RpcError) as err:  # plaintext
            admin_pb2_grpc.AdminStub(grpc.insecure_channel(mesh.address(0))).GetStatus(
                admin_pb2.GetStatusRequest(), timeout=5
            )
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        assert mesh.stop() == [0, 0]


def test_bearer_token_and_admin_actions_off_by_default():
    mesh = start_mesh(
        "tests.worker.topologies:small_wordcount", 1,
        env={"TUPLEMESH_ADMIN_TOKEN": "s3cret", "TUPLEMESH_ADMIN_EMIT_ENABLED": "false",
             "TUPLEMESH_ADMIN_DRAIN_ENABLED": "false"},
    )  # fmt: skip
    try:
        stub = mesh.admin(0)
        for metadata in ((), (("authorization", "Bearer wrong"),), (("authorization", "s3cret"),)):
            with pytest.raises(grpc.RpcError) as err:
                stub.GetStatus(admin_pb2.GetStatusRequest(), metadata=metadata, timeout=5)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "bearer token" in err.value.details()
        good = (("authorization", "Bearer s3cret"),)
        assert stub.GetStatus(admin_pb2.GetStatusRequest(), metadata=good, timeout=5).topology == "wordcount"
        for call, request in ((stub.Emit, admin_pb2.EmitRequest(component="count", values_json='["x"]')),
                              (stub.Drain, admin_pb2.DrainRequest())):  # fmt: skip
            with pytest.raises(grpc.RpcError) as err:
                call(request, metadata=good, timeout=5)
            assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "is off: set admin." in err.value.details()
        # a call a feature adds to Admin needs the token as Admin's own do: hot keys' (user data)
        keys = admin_call(grpc.insecure_channel(mesh.address(0)), HOT_KEYS)
        with pytest.raises(grpc.RpcError) as err:
            keys(hotkeys_pb2.HotKeysRequest(), timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as err:  # with it: the call's own setting decides
            keys(hotkeys_pb2.HotKeysRequest(), metadata=good, timeout=5)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # health stays open for probes
        assert (
            mesh.health(0).Check(health_pb2.HealthCheckRequest()).status
            == health_pb2.HealthCheckResponse.SERVING
        )
    finally:
        assert mesh.stop() == [0]


def tls_counts(mesh: Mesh) -> tuple[int, int]:
    """(handshakes, authenticated connections) from worker 0's /metrics."""
    text = urllib.request.urlopen(mesh.metrics_url(0), timeout=5).read().decode()
    found = dict(re.findall(r'^(tuplemesh_tls_\w+_total)\{worker="0"\} (\S+)$', text, re.M))
    return (
        int(float(found["tuplemesh_tls_handshakes_total"])),
        int(float(found["tuplemesh_tls_authenticated_connections_total"])),
    )


def raw_tls_attempt(address: str, pki: Path, who: str | None) -> None:
    """One TCP connection and one TLS handshake (no retries, unlike a gRPC channel)."""
    host, port = address.split(":")
    context = ssl.create_default_context(cafile=str(pki / "mesh-ca.pem"))
    context.check_hostname = False
    if who is not None:
        context.load_cert_chain(pki / f"{who}.crt", pki / f"{who}.key")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        try:
            with context.wrap_socket(sock) as tls:
                tls.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
                tls.recv(1)  # TLS 1.3 reports a refused client certificate on the first read
        except (ssl.SSLError, ConnectionError, OSError):
            pass


def test_refused_tls_peers_are_counted(pki: Path):
    mesh = start_mesh("tests.worker.topologies:small_wordcount", 1, wait=False, env=tls_env(pki))
    try:
        wait_tls_serving(mesh.address(0), pki)
        good = admin(mesh.address(0), pki, "client")
        good.GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
        before = tls_counts(mesh)
        raw_tls_attempt(mesh.address(0), pki, None)  # no client certificate
        raw_tls_attempt(mesh.address(0), pki, "intruder")  # a certificate from a foreign CA
        with socket.create_connection(("127.0.0.1", mesh.ports[0]), timeout=5) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\n\r\n")  # plaintext
            sock.recv(1)
        fresh = admin(mesh.address(0), pki, "client")  # a new authenticated connection
        fresh.GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
        good.GetStatus(admin_pb2.GetStatusRequest(), timeout=5)  # an old one: not counted again
        handshakes, authenticated = tls_counts(mesh)
        assert handshakes - before[0] == 4
        assert authenticated - before[1] == 1
    finally:
        assert mesh.stop() == [0]


def test_top_reaches_a_worker_with_mtls_and_a_token(
    pki: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    token = {"TUPLEMESH_ADMIN_TOKEN": "s3cret"}
    mesh = start_mesh("tests.worker.topologies:small_wordcount", 1, wait=False, env=tls_env(pki, **token))
    try:
        wait_tls_serving(mesh.address(0), pki)
        # `top` reads the TLS settings and the token as the workers do (here: their env vars)
        for name, value in tls_env(
            pki,
            TUPLEMESH_TLS_CERT_FILE=str(pki / "client.crt"),
            TUPLEMESH_TLS_KEY_FILE=str(pki / "client.key"),
            **token,
        ).items():
            monkeypatch.setenv(name, value)  # fmt: skip
        assert main(["top", "--once", "--target", mesh.address(0)]) == 0
        view = capsys.readouterr().out
        assert "components" in view and "count" in view and "split" in view
        monkeypatch.setenv("TUPLEMESH_ADMIN_TOKEN", "wrong")
        assert main(["top", "--once", "--target", mesh.address(0)]) == 1
        assert "UNAUTHENTICATED" in capsys.readouterr().out
    finally:
        assert mesh.stop() == [0]


@pytest.mark.parametrize(
    ("method", "open_"),
    [
        ("/grpc.health.v1.Health/Check", True),
        ("/grpc.health.v1.Health/Watch", True),
        ("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", True),
        ("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", True),
        ("/tuplemesh.v1.Transfer/Stream", True),
        ("/tuplemesh.v1.Admin/GetStatus", False),
        ("/tuplemesh.v1.Gateway/Publish", False),
        ("/tuplemesh.v1.Admin/HotKeys", False),  # a call a feature adds to Admin
        ("/grpc.reflection.evil.Svc/M", False),  # a look-alike of an open service's package
        ("/tuplemesh.v1.TransferX/Stream", False),
        ("/grpc.health.v1.HealthX/Check", False),
    ],
)
def test_the_token_leaves_open_exactly_health_reflection_and_transfer(method: str, open_: bool):
    from tuplemesh.admission import call_class
    from tuplemesh.security import TokenInterceptor

    # one table: what the token leaves open is exactly what admission does not count as a client's
    assert (call_class(method) != "client") == open_

    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: b"ok")

    class Details(grpc.HandlerCallDetails):
        def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
            self.method, self.invocation_metadata = method, metadata

    interceptor = TokenInterceptor("s3cret")
    without = interceptor.intercept_service(lambda d: handler, Details(()))
    assert (without is handler) == open_  # refused: a handler of its own answering UNAUTHENTICATED
    assert interceptor.rejected == (0 if open_ else 1)
    # with the token every call goes through as it is
    assert (
        interceptor.intercept_service(lambda d: handler, Details((("authorization", "Bearer s3cret"),)))
        is handler
    )
