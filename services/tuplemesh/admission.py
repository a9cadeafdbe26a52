"""`CallAdmission`: a server interceptor that keeps each kind of caller within its own limit.

A worker's gRPC server runs every call on a thread of one pool, and gRPC's own cap
(``maximum_concurrent_rpcs``) refuses every new call, health checks included, once the pool is
taken. Streams hold their thread for as long as they are open, so a few dozen idle streams of any
kind used to starve everything else. Calls are therefore admitted by class, each with its own
limit, and the pool is sized from their sum so gRPC's global cap is never what refuses:

- ``peer``: Transfer streams from the other workers (``server.peer.streams.max``);
- ``health``: grpc.health.v1 and reflection streams (``server.health.streams.max``); unary health
  checks have a reserve of their own (`HEALTH_CHECK_RESERVE`) that no stream can take, so a
  liveness probe is answered however many watchers are open;
- ``client``: everything else: Admin, Gateway and the features' own services
  (``server.client.calls.max`` in all and ``server.client.calls.per.peer.max`` per client
  address).

A refused call is answered RESOURCE_EXHAUSTED naming the config key of the limit it hit, and
counted by class (``tuplemesh_rpc_refused_total{class}``); ``tuplemesh_rpc_in_use{class}``
says how many calls each class holds now.

A peer's Transfer stream that carries no message for ``server.stream.idle.timeout.ms`` is ended
with DEADLINE_EXCEEDED (the peer reconnects and resends what is unacknowledged); a live sender
sends an empty heartbeat every quarter of that period on a link with nothing to send, so only a
half-open or stuck stream is ever ended (``tuplemesh_rpc_idle_ended_total``).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import grpc
from grpc._cython import cygrpc

from tuplemesh.grpcutil import handler_factory
from tuplemesh.logutil import short

__all__ = [
    "CLASSES",
    "HEALTH_CHECK_RESERVE",
    "SERVICE_CLASSES",
    "AdmissionLimits",
    "CallAdmission",
    "call_class",
    "service_of",
]

#: Unary health checks that may run at once however many health streams are open.
HEALTH_CHECK_RESERVE = 8

#: Threads beyond the limits: a call over its limit needs a thread to be refused on.
REFUSAL_RESERVE = 16

CLASSES = ("peer", "health", "client")

#: The services that are no client's, by exact name, with their class. They are also the ones
#: open without the bearer token (`tuplemesh.security.TokenInterceptor`): probes and grpcurl's
#: ``list`` need none, and a worker's Transfer stream is proven by mTLS or the mesh secret.
SERVICE_CLASSES: Mapping[str, str] = MappingProxyType(
    {
        "tuplemesh.v1.Transfer": "peer",
        "grpc.health.v1.Health": "health",
        "grpc.reflection.v1.ServerReflection": "health",
        "grpc.reflection.v1alpha.ServerReflection": "health",
    }
)


def service_of(method: str) -> str:
    """The service of a method path: ``package.Service`` of ``/package.Service/Method``."""
    return method.rpartition("/")[0].lstrip("/")


def call_class(method: str) -> str:
    """The admission class of a method path (``/package.Service/Method``): every service not
    in `SERVICE_CLASSES` is a client's (Admin, the Gateway, the features' own services)."""
    return SERVICE_CLASSES.get(service_of(method), "client")


@dataclass(frozen=True)
class AdmissionLimits:
    peer_streams: int
    health_streams: int
    client_calls: int
    client_calls_per_peer: int

    @classmethod
    def from_config(cls, conf: Mapping[str, Any]) -> AdmissionLimits:
        return cls(
            peer_streams=conf["server.peer.streams.max"],
            health_streams=conf["server.health.streams.max"],
            client_calls=conf["server.client.calls.max"],
            client_calls_per_peer=conf["server.client.calls.per.peer.max"],
        )

    @property
    def threads(self) -> int:
        """Threads for a server that runs every admitted call at once and refuses the rest."""
        return (
            self.peer_streams
            + self.health_streams
            + self.client_calls
            + HEALTH_CHECK_RESERVE
            + REFUSAL_RESERVE
        )


def _client_address(context: grpc.ServicerContext) -> str:
    """``ipv4:10.0.0.5`` of ``ipv4:10.0.0.5:51234``: a client's connections share one budget."""
    peer = context.peer() or ""
    return peer.rsplit(":", 1)[0] if peer.count(":") > 1 else peer


class _Silence:
    """When a stream's last message came; ``requests`` passes its messages through."""

    __slots__ = ("context", "last")

    def __init__(self, context: grpc.ServicerContext) -> None:
        self.context = context
        self.last = time.monotonic()

    def requests(self, iterator: Iterator[Any]) -> Iterator[Any]:
        for request in iterator:
            self.last = time.monotonic()
            yield request


#: Longest status message a call answers with. Messages name what was wrong, often a value the
#: client sent: a 1 MiB component name echoed back would exceed the client's metadata limit and
#: turn a deliberate answer into a confusing RESOURCE_EXHAUSTED ("Stream removed").
MAX_DETAILS_CHARS = 1000


class _ShortDetails:
    """A handler's context whose status messages are cut to MAX_DETAILS_CHARS."""

    __slots__ = ("_context",)

    def __init__(self, context: grpc.ServicerContext) -> None:
        self._context = context

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self._context.abort(code, short(details, MAX_DETAILS_CHARS))

    def set_details(self, details: str) -> None:
        self._context.set_details(short(details, MAX_DETAILS_CHARS))


class _Oversize:
    """What the deserializer hands a handler instead of a request above the message limit."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size


def _end(context: grpc.ServicerContext, details: str) -> None:
    """End a call from another thread than its handler's, with DEADLINE_EXCEEDED and ``details``.

    gRPC's public ``cancel`` answers CANCELLED with no details, which reads like the client's own
    doing; its call object can say why (checked with grpcio 1.85), so it is used when present."""
    call = getattr(getattr(context, "_rpc_event", None), "call", None)
    try:
        call.cancel(cygrpc.StatusCode.deadline_exceeded, details)  # type: ignore[union-attr]
    except Exception:
        context.cancel()


class CallAdmission(grpc.ServerInterceptor):
    """Admits or refuses each call by class; ends peer streams idle for ``idle_timeout`` seconds
    (0: never); thread-safe; its counts feed /metrics."""

    def __init__(self, limits: AdmissionLimits, idle_timeout: float = 0.0) -> None:
        self.limits = limits
        self.idle_timeout = idle_timeout
        #: Requests above this many bytes are refused here, RESOURCE_EXHAUSTED and counted (gRPC's
        #: own receive limit, set above it, refuses larger ones unseen); 0: not checked here.
        self.max_request_bytes = 0
        #: Peer streams ended for their silence so far.
        self.idle_ended = 0
        self._silences: set[_Silence] = set()
        self._watching = False  # a thread watches ``_silences`` (only while one is open)
        self._lock = threading.Lock()
        self._in_use: Counter[str] = Counter()
        self._checks = 0  # unary health checks running (within HEALTH_CHECK_RESERVE)
        self._per_client: Counter[str] = Counter()
        self._refused: Counter[str] = Counter()

    def in_use(self) -> dict[str, int]:
        with self._lock:
            return {name: self._in_use[name] for name in CLASSES}

    def refused(self) -> dict[str, int]:
        with self._lock:
            return {name: self._refused[name] for name in CLASSES}

    # -- admission ------------------------------------------------------------------------------
    def _acquire(self, kind: str, streaming: bool, client: str) -> str | None:
        """None when admitted (release it later), else the refusal's message."""
        limits = self.limits
        with self._lock:
            if kind == "peer":
                if self._in_use["peer"] >= limits.peer_streams:
                    return self._refuse(
                        "peer", f"{limits.peer_streams} peer streams are open (server.peer.streams.max)"
                    )
            elif kind == "health":
                if not streaming:
                    if self._checks >= HEALTH_CHECK_RESERVE:
                        return self._refuse("health", f"{HEALTH_CHECK_RESERVE} health checks are running")
                    self._checks += 1
                elif self._in_use["health"] - self._checks >= limits.health_streams:
                    return self._refuse(
                        "health",
                        f"{limits.health_streams} health streams are open (server.health.streams.max)",
                    )
            else:
                if self._in_use["client"] >= limits.client_calls:
                    return self._refuse(
                        "client", f"{limits.client_calls} client calls are running (server.client.calls.max)"
                    )
                if self._per_client[client] >= limits.client_calls_per_peer:
                    return self._refuse(
                        "client",
                        f"{limits.client_calls_per_peer} calls of {client} are running "
                        "(server.client.calls.per.peer.max)",
                    )
                self._per_client[client] += 1
            self._in_use[kind] += 1
        return None

    def _refuse(self, kind: str, why: str) -> str:
        self._refused[kind] += 1  # under the lock
        return f"worker busy: {why}; try again later"

    def _release(self, kind: str, streaming: bool, client: str) -> None:
        with self._lock:
            self._in_use[kind] -= 1
            if kind == "health" and not streaming:
                self._checks -= 1
            elif kind == "client":
                self._per_client[client] -= 1
                if not self._per_client[client]:
                    del self._per_client[client]

    # -- idle peer streams ----------------------------------------------------------------------
    def _watch(self, silence: _Silence) -> None:
        with self._lock:
            self._silences.add(silence)
            if self._watching:
                return
            self._watching = True
        threading.Thread(target=self._watch_silences, name="idle-streams", daemon=True).start()

    def _unwatch(self, silence: _Silence) -> None:
        with self._lock:
            self._silences.discard(silence)

    def _watch_silences(self) -> None:
        timeout = self.idle_timeout
        while True:
            time.sleep(min(timeout / 4, 1.0))
            now = time.monotonic()
            with self._lock:
                if not self._silences:
                    self._watching = False  # a next stream starts another watcher
                    return
                idle = [s for s in self._silences if now - s.last > timeout]
                for silence in idle:
                    self._silences.discard(silence)
                self.idle_ended += len(idle)
            for silence in idle:
                _end(
                    silence.context,
                    f"no message for {timeout:g} s (server.stream.idle.timeout.ms): stream ended",
                )

    # -- the interceptor ------------------------------------------------------------------------
    def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Any], details: grpc.HandlerCallDetails
    ) -> Any:
        handler = continuation(details)
        if handler is None:
            return None
        kind = call_class(details.method)
        streaming = bool(handler.request_streaming or handler.response_streaming)
        deserializer = handler.request_deserializer
        if self.max_request_bytes and deserializer is not None:
            deserializer = self._sized(deserializer)
        if handler.response_streaming:
            behavior = handler.stream_stream if handler.request_streaming else handler.unary_stream
            wrapped: Callable[[Any, Any], Any] = self._admitted_stream(kind, streaming, behavior)
        else:
            behavior = handler.stream_unary if handler.request_streaming else handler.unary_unary
            wrapped = self._admitted_unary(kind, streaming, behavior)
        factory = handler_factory(handler.request_streaming, handler.response_streaming)
        return factory(
            wrapped, request_deserializer=deserializer, response_serializer=handler.response_serializer
        )

    def _sized(self, deserializer: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
        limit = self.max_request_bytes

        def deserialize(data: bytes) -> Any:
            return _Oversize(len(data)) if len(data) > limit else deserializer(data)

        return deserialize

    def _refuse_oversize(self, request: _Oversize, context: grpc.ServicerContext) -> None:
        context.abort(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"a request of {request.size} bytes is above this worker's limit of {self.max_request_bytes} "
            "(messaging.max.message.bytes and room for framing)",
        )

    def _checked(self, requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        for request in requests:
            if request.__class__ is _Oversize:
                self._refuse_oversize(request, context)
            yield request

    def _admitted_unary(
        self, kind: str, streaming: bool, behavior: Callable[[Any, Any], Any]
    ) -> Callable[[Any, Any], Any]:
        def call(request: Any, context: grpc.ServicerContext) -> Any:
            client = _client_address(context) if kind == "client" else ""
            refusal = self._acquire(kind, streaming, client)
            if refusal is not None:
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refusal)
            try:
                if request.__class__ is _Oversize:
                    self._refuse_oversize(request, context)
                elif self.max_request_bytes and isinstance(request, Iterator):
                    request = self._checked(request, context)
                return behavior(request, _ShortDetails(context))
            finally:
                self._release(kind, streaming, client)

        return call

    def _admitted_stream(
        self, kind: str, streaming: bool, behavior: Callable[[Any, Any], Iterator[Any]]
    ) -> Callable[[Any, Any], Iterator[Any]]:
        def call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            client = _client_address(context) if kind == "client" else ""
            refusal = self._acquire(kind, streaming, client)
            if refusal is not None:
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refusal)
            silence = None
            try:
                if request.__class__ is _Oversize:
                    self._refuse_oversize(request, context)
                elif self.max_request_bytes and isinstance(request, Iterator):
                    request = self._checked(request, context)
                if kind == "peer" and self.idle_timeout > 0 and isinstance(request, Iterator):
                    silence = _Silence(context)
                    request = silence.requests(request)
                    self._watch(silence)
                yield from behavior(request, _ShortDetails(context))
            finally:
                if silence is not None:
                    self._unwatch(silence)
                self._release(kind, streaming, client)

        return call
