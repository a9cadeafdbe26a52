"""Opening a gRPC channel to a worker: TLS settings, the bearer token, and nothing else.

Everything that dials a worker (peer workers' Transfer, the ``run`` launcher, ``tuplemesh top``,
the Spark source, tests) opens its channel here, so a secured mesh is reachable by all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import grpc
import grpc.aio

from tuplemesh.security import read_pem

__all__ = ["TlsSettings", "open_channel", "open_channel_from_config", "peer_aio_channel", "peer_channel"]


@dataclass(frozen=True)
class TlsSettings:
    """Where the PEM files are: the mesh CA, and this client's certificate and key (mTLS)."""

    ca_file: str
    cert_file: str = ""
    key_file: str = ""
    #: name to verify in the worker's certificate instead of the address dialled (empty: the address)
    server_name: str = ""

    @classmethod
    def from_config(cls, conf: Mapping[str, Any]) -> TlsSettings | None:
        """The ``tls.*`` keys of ``conf``; None when ``tls.enabled`` is off."""
        if not conf.get("tls.enabled"):
            return None
        return cls(conf["tls.ca.file"], conf["tls.cert.file"], conf["tls.key.file"], conf["tls.server.name"])

    def credentials(self) -> grpc.ChannelCredentials:
        """Channel credentials; ConfigError naming the ``tls.*`` key whose file is missing."""
        has_client_pair = bool(self.cert_file or self.key_file)
        return grpc.ssl_channel_credentials(
            root_certificates=read_pem("tls.ca.file", self.ca_file),
            private_key=read_pem("tls.key.file", self.key_file) if has_client_pair else None,
            certificate_chain=read_pem("tls.cert.file", self.cert_file) if has_client_pair else None,
        )


def open_channel(
    target: str,
    tls: TlsSettings | None = None,
    token: str = "",
    options: Sequence[tuple[str, Any]] = (),
) -> grpc.Channel:
    """A channel to ``target`` (HOST:PORT): TLS when ``tls`` is given, plaintext otherwise; with a
    ``token``, every call carries ``authorization: Bearer <token>`` (what every client call
    needs: Admin, Gateway and the features' own services)."""
    channel_options = list(options)
    if tls is None:
        channel = grpc.insecure_channel(target, options=channel_options)
    else:
        if tls.server_name:
            channel_options.append(("grpc.ssl_target_name_override", tls.server_name))
        channel = grpc.secure_channel(target, tls.credentials(), options=channel_options)
    if not token:
        return channel
    return grpc.intercept_channel(channel, _BearerToken(token))


def open_channel_from_config(
    target: str, conf: Mapping[str, Any], options: Sequence[tuple[str, Any]] = ()
) -> grpc.Channel:
    """``open_channel`` with the TLS settings and ``admin.token`` of a worker config."""
    return open_channel(target, TlsSettings.from_config(conf), conf.get("admin.token", ""), options)


def peer_channel(
    target: str, conf: Mapping[str, Any], options: Sequence[tuple[str, Any]] = ()
) -> grpc.Channel:
    """A worker-to-worker (Transfer) channel: the config's TLS settings, no token (mTLS guards Transfer)."""
    return open_channel(target, TlsSettings.from_config(conf), "", options)


def peer_aio_channel(
    target: str, conf: Mapping[str, Any], options: Sequence[tuple[str, Any]] = ()
) -> grpc.aio.Channel:
    """``peer_channel`` on grpc.aio: call it on the event loop that will use the channel."""
    tls = TlsSettings.from_config(conf)
    channel_options = list(options)
    if tls is None:
        return grpc.aio.insecure_channel(target, options=channel_options)
    if tls.server_name:
        channel_options.append(("grpc.ssl_target_name_override", tls.server_name))
    return grpc.aio.secure_channel(target, tls.credentials(), options=channel_options)


class _CallDetails(NamedTuple):
    method: str
    timeout: float | None
    metadata: Sequence[tuple[str, str]] | None
    credentials: grpc.CallCredentials | None
    wait_for_ready: bool | None
    compression: grpc.Compression | None


class _BearerToken(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds the bearer token to the metadata of every call (all four stream shapes)."""

    def __init__(self, token: str) -> None:
        self._header = ("authorization", f"Bearer {token}")

    def _with_token(self, details: Any) -> _CallDetails:
        metadata = [*(details.metadata or ()), self._header]
        return _CallDetails(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            details.wait_for_ready,
            details.compression,
        )

    def _call(self, continuation: Callable[[Any, Any], Any], details: Any, request: Any) -> Any:
        return continuation(self._with_token(details), request)

    intercept_unary_unary = _call
    intercept_unary_stream = _call
    intercept_stream_unary = _call
    intercept_stream_stream = _call
