"""mTLS for every gRPC connection of a worker, and a bearer token for Admin and Gateway.

With ``tls.enabled`` the worker port serves TLS and requires a client certificate signed by the
mesh CA (``tls.ca.file``); Transfer connections to peers present ``tls.cert.file``/``tls.key.file``.
A peer without a certificate from the mesh CA fails the handshake. ``admin.token`` makes Admin
and Gateway calls need ``authorization: Bearer <token>`` (UNAUTHENTICATED otherwise); Transfer
is guarded by mTLS, health and reflection stay open for probes and tools.

Mesh membership (who may open Transfer streams and send control messages). A member proves
itself by the channel, never by a batch field: with a mesh secret (``mesh.secret.file`` or
``mesh.secret``) every stream carries its worker id and HMAC-SHA256(secret, topology id and
worker id) (`mesh_mac`); with mTLS the peer certificate must also carry the worker role, the URI
SAN `WORKER_URI` the chart's worker certificates get and Gateway/Spark client certificates never
do. The receiver then takes the sender's id from what it verified. A Rebalance naming an epoch
(a worker forwarding the rescale it started) must prove its caller a member the same way.
"""

from __future__ import annotations

import hmac
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import grpc

from tuplemesh.errors import ConfigError

__all__ = [
    "AUTH_METADATA",
    "WORKER_METADATA",
    "WORKER_URI",
    "TlsConnections",
    "TokenInterceptor",
    "is_worker_certificate",
    "mesh_mac",
    "mesh_proof",
    "mesh_secret",
    "proven_worker",
    "read_pem",
    "server_credentials",
]

PROTECTED = ("/tuplemesh.v1.Admin/", "/tuplemesh.v1.Gateway/")

#: The URI SAN that gives a certificate of the mesh CA the worker role (Transfer streams).
WORKER_URI = "urn:tuplemesh:role:worker"


def mesh_secret(conf: Mapping[str, Any]) -> bytes:
    """The mesh secret (b"": none); ConfigError naming the key when it cannot be used."""
    path, inline = conf.get("mesh.secret.file", ""), conf.get("mesh.secret", "")
    if path and inline:
        raise ConfigError("mesh.secret", "<hidden>", "cannot be set together with mesh.secret.file")
    if inline:
        return str(inline).encode()
    if not path:
        return b""
    try:
        secret = Path(path).read_bytes().strip()  # a trailing newline is how editors save files
    except OSError as exc:
        raise ConfigError("mesh.secret.file", path, f"cannot be read: {exc.strerror}") from exc
    if not secret:
        raise ConfigError("mesh.secret.file", path, "is empty")
    return secret


def mesh_mac(secret: bytes, topology_id: str, worker: int) -> str:
    """The proof a worker sends on its streams: hex HMAC-SHA256 of (topology, worker id)."""
    return hmac.new(secret, f"{topology_id}\n{worker}".encode(), "sha256").hexdigest()


#: Call metadata naming the calling worker, and its proof of the mesh secret (`mesh_mac`): what a
#: member's Transfer streams and its forwarded Rebalance calls carry.
WORKER_METADATA = "tuplemesh-worker"
AUTH_METADATA = "tuplemesh-auth"


def mesh_proof(secret: bytes, topology_id: str, worker: int) -> tuple[tuple[str, str], ...]:
    """The metadata naming ``worker`` and, with a secret, proving it (none needed: the name only)."""
    pairs = [(WORKER_METADATA, str(worker))]
    if secret:
        pairs.append((AUTH_METADATA, mesh_mac(secret, topology_id, worker)))
    return tuple(pairs)


def proven_worker(secret: bytes, topology_id: str, metadata: Mapping[str, str]) -> int | None:
    """The worker ``metadata`` names when it carries that worker's proof of ``secret`` (compared in
    constant time); None when the name or the proof is missing or wrong."""
    claimed = metadata.get(WORKER_METADATA) or ""
    # a worker id is a few digits: int() of thousands of them would raise, not refuse
    worker = int(claimed) if claimed.isdecimal() and len(claimed) <= 9 else -1
    expected = mesh_mac(secret, topology_id, worker)  # computed either way: no shortcut to time
    given = metadata.get(AUTH_METADATA, "")
    if worker < 0 or not hmac.compare_digest(given.encode(), expected.encode()):
        return None
    return worker


def is_worker_certificate(context: grpc.ServicerContext) -> bool:
    """The peer's verified certificate carries the worker role (`WORKER_URI`)."""
    return WORKER_URI.encode() in context.auth_context().get("peer_uri", ())


def read_pem(key: str, path: str) -> bytes:
    """The PEM file configured as ``key``; ConfigError naming the key when unset or unreadable."""
    if not path:
        raise ConfigError(key, path, "is required when tls.enabled is true")
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(key, path, f"cannot be read: {exc.strerror}") from exc


def _read(conf: Mapping[str, Any], key: str) -> bytes:
    return read_pem(key, conf[key])


def server_credentials(
    conf: Mapping[str, Any], connections: TlsConnections | None = None
) -> grpc.ServerCredentials:
    """TLS for the worker port, requiring client certificates from the mesh CA.

    With ``connections``, every new connection is counted before its handshake (gRPC calls the
    certificate fetcher of dynamic credentials once per connection; it never changes them)."""
    certificates = grpc.ssl_server_certificate_configuration(
        [(_read(conf, "tls.key.file"), _read(conf, "tls.cert.file"))],
        root_certificates=_read(conf, "tls.ca.file"),
    )
    fetch = connections.on_handshake if connections is not None else (lambda: None)
    return grpc.dynamic_ssl_server_credentials(certificates, fetch, require_client_authentication=True)


class TlsConnections:
    """Counts TLS connections to the worker port, and those whose peer authenticated.

    ``handshakes`` counts every connection (before its handshake); ``authenticated`` counts the
    distinct connections that made a call with a verified mesh certificate. Their difference is
    the connections refused (plaintext, no certificate, a foreign CA) plus any that never made a
    call; a refused peer never reaches a handler, so this is the only place it can be counted.
    """

    RECENT = 4096  # connections remembered to count each once (oldest forgotten first)

    def __init__(self) -> None:
        self.handshakes = 0
        self.authenticated = 0
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def on_handshake(self) -> None:
        with self._lock:
            self.handshakes += 1
        return None  # keep the current certificates

    def on_call(self, context: grpc.ServicerContext) -> None:
        peer = context.peer()  # address and port: one TCP connection
        with self._lock:
            if peer in self._recent:
                return
        if not context.auth_context().get("x509_common_name"):
            return
        with self._lock:
            self._recent[peer] = None
            if len(self._recent) > self.RECENT:
                self._recent.popitem(last=False)
            self.authenticated += 1


class TokenInterceptor(grpc.ServerInterceptor):
    """Answers UNAUTHENTICATED to Admin/Gateway calls without the right bearer token."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()
        self.rejected = 0

    def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Any], details: grpc.HandlerCallDetails
    ) -> Any:
        if not details.method.startswith(PROTECTED):
            return continuation(details)
        given = dict(details.invocation_metadata or ()).get("authorization", "")
        if hmac.compare_digest(str(given).encode(), self._expected):  # constant time
            return continuation(details)
        self.rejected += 1
        handler = continuation(details)
        message = "missing or wrong bearer token (metadata 'authorization: Bearer <admin.token>')"

        def deny(request: Any, context: grpc.ServicerContext) -> Any:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

        if handler is None:
            return None
        if handler.request_streaming and handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(lambda it, ctx: deny(None, ctx))
        if handler.request_streaming:
            return grpc.stream_unary_rpc_method_handler(lambda it, ctx: deny(None, ctx))
        if handler.response_streaming:
            return grpc.unary_stream_rpc_method_handler(
                deny, request_deserializer=handler.request_deserializer
            )
        return grpc.unary_unary_rpc_method_handler(deny, request_deserializer=handler.request_deserializer)
