"""mTLS for every gRPC connection of a worker, and a bearer token for its client calls.

With ``tls.enabled`` the worker port serves TLS and requires a client certificate signed by the
mesh CA (``tls.ca.file``); Transfer connections to peers present ``tls.cert.file``/``tls.key.file``.
A peer without a certificate from the mesh CA fails the handshake. ``admin.token`` makes every
call but Transfer, health and reflection (Admin, Gateway and the features' own services) need
``authorization: Bearer <token>`` (UNAUTHENTICATED otherwise); Transfer is guarded by mTLS or
the mesh secret, health and reflection stay open for probes and tools.

Mesh membership (who may open Transfer streams and send control messages). A member proves
itself by the channel, never by a batch field: with a mesh secret (``mesh.secret.file`` or
``mesh.secret``) every stream and forwarded call carries its worker id and a fresh proof
(`mesh_auth`): HMAC-SHA256(secret) of what it is for, the topology, the sending and the receiving
worker, a timestamp and a random nonce. The receiver (`ProofVerifier`) takes each proof once,
only when it names this receiver and its timestamp is within ``mesh.secret.max.skew.secs``,
so a proof read off a plaintext stream cannot be replayed, nor used at another worker. With mTLS
the peer certificate must also carry the worker role, the URI SAN `WORKER_URI` the chart's
worker certificates get and Gateway/Spark client certificates never do. The receiver then takes
the sender's id from what it verified. A Rebalance naming an epoch (a worker forwarding the
rescale it started) must prove its caller a member the same way.
"""

from __future__ import annotations

import heapq
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import grpc

from tuplemesh.admission import SERVICE_CLASSES, service_of
from tuplemesh.errors import ConfigError
from tuplemesh.grpcutil import handler_factory

__all__ = [
    "AUTH_METADATA",
    "OPEN_SERVICES",
    "REBALANCE",
    "REPLAY_CACHE_ENTRIES",
    "TRANSFER",
    "WORKER_METADATA",
    "WORKER_URI",
    "ProofRefused",
    "ProofVerifier",
    "TlsConnections",
    "TokenInterceptor",
    "is_worker_certificate",
    "mesh_auth",
    "mesh_mac",
    "mesh_proof",
    "mesh_secret",
    "read_pem",
    "server_credentials",
]


#: The services open without the bearer token, by exact name: those that are no client's
#: (`tuplemesh.admission.SERVICE_CLASSES`): health and reflection (probes, grpcurl's ``list``)
#: and Transfer (a worker's stream, proven by mTLS or the mesh secret instead). Every other call
#: needs it: Admin's, the Gateway's and any service a feature adds.
OPEN_SERVICES = frozenset(SERVICE_CLASSES)

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


#: What a proof is for: a Transfer proof opens no Admin call and the reverse (its MAC names it).
TRANSFER = "transfer"
REBALANCE = "rebalance"

#: Nonces remembered per receiver and purpose by default (``mesh.secret.replay.cache.entries``;
#: one per accepted stream or call, each for twice ``mesh.secret.max.skew.secs`` at most). Only a
#: holder of the secret can add one (a nonce is remembered after its MAC is checked), and a mesh
#: opens a stream per peer and reconnect: 65,536 is more than 100 new streams a second for the
#: whole default window, in about 13 MiB (measured).
REPLAY_CACHE_ENTRIES = 65_536

_HEX = frozenset("0123456789abcdef")


def mesh_mac(
    secret: bytes, purpose: str, topology_id: str, worker: int, receiver: int, timestamp: int, nonce: str
) -> str:
    """Hex HMAC-SHA256 of everything a proof binds: what it is for, the topology, the sending
    worker, the receiving worker, when it was made and its nonce."""
    message = f"tuplemesh-proof-2\n{purpose}\n{topology_id}\n{worker}\n{receiver}\n{timestamp}\n{nonce}"
    return hmac.new(secret, message.encode(), "sha256").hexdigest()


def mesh_auth(
    secret: bytes,
    topology_id: str,
    worker: int,
    receiver: int,
    purpose: str = TRANSFER,
    clock: Callable[[], float] = time.time,
    nonce: str | None = None,
) -> str:
    """A fresh proof (``receiver.timestamp.nonce.mac``) that ``worker`` holds the secret, good once,
    at ``receiver`` only, for ``purpose``, within the receiver's skew window of now."""
    timestamp = int(clock())
    nonce = nonce if nonce is not None else secrets.token_hex(16)
    mac = mesh_mac(secret, purpose, topology_id, worker, receiver, timestamp, nonce)
    return f"{receiver}.{timestamp}.{nonce}.{mac}"


#: Call metadata naming the calling worker, and its proof of the mesh secret (`mesh_auth`): what a
#: member's Transfer streams and its forwarded Rebalance calls carry.
WORKER_METADATA = "tuplemesh-worker"
AUTH_METADATA = "tuplemesh-auth"


def mesh_proof(
    secret: bytes,
    topology_id: str,
    worker: int,
    receiver: int,
    purpose: str = TRANSFER,
    clock: Callable[[], float] = time.time,
) -> tuple[tuple[str, str], ...]:
    """The metadata naming ``worker`` and, with a secret, a fresh proof of it for ``receiver``
    (none needed: the name only). Make one per stream or call: a receiver takes each proof once."""
    pairs = [(WORKER_METADATA, str(worker))]
    if secret:
        pairs.append((AUTH_METADATA, mesh_auth(secret, topology_id, worker, receiver, purpose, clock)))
    return tuple(pairs)


class ProofRefused(Exception):
    """A proof the receiver does not take: ``reason`` is the refusal metric's label, ``code`` the
    status to answer, the message says why without repeating the proof."""

    def __init__(self, reason: str, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.code = code


class ProofVerifier:
    """Checks the proofs one receiver (worker ``index``) takes for ``purpose``. Thread-safe.

    A proof is taken when its MAC matches, it names this worker as its receiver, its timestamp
    is within ``max_skew`` seconds of this worker's clock (either way: pods' clocks differ), and
    its nonce was not taken before. Nonces are remembered until their proof could no longer be
    taken anyway (timestamp + ``max_skew``). When ``capacity`` nonces are remembered and none has
    expired, a proof is refused with RESOURCE_EXHAUSTED rather than forgetting one (forgetting
    would let that proof be replayed).
    """

    def __init__(
        self,
        secret: bytes,
        topology_id: str,
        index: int,
        purpose: str,
        max_skew: float,
        capacity: int = REPLAY_CACHE_ENTRIES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.secret = secret
        self.topology_id = topology_id
        self.index = index
        self.purpose = purpose
        self.max_skew = max_skew
        self.capacity = capacity
        self._clock = clock
        self._seen: set[str] = set()
        self._expiry: list[tuple[float, str]] = []  # heap of (forget at, nonce)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._seen)

    def within_window(self, timestamp: float) -> bool:
        """A proof made at ``timestamp`` is not stale by this worker's clock."""
        return abs(self._clock() - timestamp) <= self.max_skew

    def verify(self, claimed: str, auth: str) -> int:
        """The worker ``claimed`` names, when ``auth`` is its fresh proof for this receiver;
        ProofRefused otherwise. A proof taken is remembered: the same one is refused after."""
        # a worker id is a few digits: int() of thousands of them would raise, not refuse
        worker = int(claimed) if claimed.isdecimal() and len(claimed) <= 9 else -1
        parts = auth.split(".")
        well_formed = (
            worker >= 0
            and len(parts) == 4
            and all(p.isdecimal() and len(p) <= 12 for p in parts[:2])
            and len(parts[2]) == 32
            and set(parts[2]) <= _HEX
        )
        receiver, timestamp, nonce, given = -1, 0, "", ""
        if well_formed:
            receiver, timestamp, nonce, given = int(parts[0]), int(parts[1]), parts[2], parts[3]
        expected = mesh_mac(self.secret, self.purpose, self.topology_id, worker, receiver, timestamp, nonce)
        # compared either way, in constant time: no shortcut to time
        if not hmac.compare_digest(given.encode(), expected.encode()) or not well_formed:
            raise ProofRefused(
                "unauthenticated", grpc.StatusCode.UNAUTHENTICATED,
                f"no or a wrong proof of the mesh secret (metadata {WORKER_METADATA} and {AUTH_METADATA})",
            )  # fmt: skip
        if receiver != self.index:
            raise ProofRefused(
                "wrong_receiver", grpc.StatusCode.UNAUTHENTICATED,
                f"a proof made for worker {receiver}, presented to worker {self.index}",
            )  # fmt: skip
        now = self._clock()
        if not self.within_window(timestamp):
            when = "before" if timestamp < now else "after"
            raise ProofRefused(
                "stale_proof", grpc.StatusCode.UNAUTHENTICATED,
                f"a proof made {abs(now - timestamp):.0f} s {when} now by this worker's clock, outside "
                f"the {self.max_skew:g} s window (mesh.secret.max.skew.secs; are the clocks synchronised?)",
            )  # fmt: skip
        with self._lock:
            while self._expiry and self._expiry[0][0] < now:
                self._seen.discard(heapq.heappop(self._expiry)[1])
            if nonce in self._seen:
                raise ProofRefused(
                    "replayed_proof", grpc.StatusCode.UNAUTHENTICATED,
                    "a proof already used (each stream or call needs a fresh one): replayed",
                )  # fmt: skip
            if len(self._seen) >= self.capacity:
                raise ProofRefused(
                    "replay_cache_full", grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"{self.capacity} proofs taken within the skew window; try again later",
                )  # fmt: skip
            self._seen.add(nonce)
            heapq.heappush(self._expiry, (timestamp + self.max_skew, nonce))
        return worker

    def verify_metadata(self, metadata: Mapping[str, str]) -> int:
        """`verify` of the worker and proof call metadata carries."""
        return self.verify(metadata.get(WORKER_METADATA) or "", metadata.get(AUTH_METADATA) or "")


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
    """Answers UNAUTHENTICATED to calls without the right bearer token: every call but those of
    `OPEN_SERVICES` (exact names), so Admin's, the Gateway's and any service a feature adds to
    the worker's server need it, whoever wrote them."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()
        self.rejected = 0

    def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Any], details: grpc.HandlerCallDetails
    ) -> Any:
        if service_of(details.method) in OPEN_SERVICES:
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
        factory = handler_factory(handler.request_streaming, handler.response_streaming)
        if handler.request_streaming:  # the requests are never read: no deserializer
            return factory(lambda it, ctx: deny(None, ctx))
        return factory(deny, request_deserializer=handler.request_deserializer)
