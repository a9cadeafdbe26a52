"""`ServerSettings`: what a worker process's server side reads from the config, typed and in seconds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tuplemesh.config import as_config

__all__ = ["ServerSettings"]


@dataclass(frozen=True)
class ServerSettings:
    """Built once by the WorkerProcess from its final config. Immutable."""

    transport: str  # alias or module:attr of the transport plugin
    tls_enabled: bool
    bind_host: str  # of the worker port (Transfer, Admin, Gateway, health)
    metrics_enabled: bool
    metrics_port: int  # 0: no /metrics endpoint
    metrics_bind_host: str
    refresh_poll_seconds: float  # between two re-applications of discovery's view
    shutdown_timeout_seconds: float
    log_interval_seconds: float
    peer_grace_seconds: float  # a peer unreachable this long turns readiness NOT_SERVING
    epoch_confirm_seconds: float  # spouts held this long at most while no peer answers
    stream_idle_timeout_seconds: float  # a streaming call idle this long is ended
    secret_max_skew_seconds: float  # a mesh-secret proof this far from our clock is refused
    ui_stream_seconds: float  # the web UI's event stream ends after this (the page reconnects)

    @classmethod
    def from_config(cls, conf: Mapping[str, Any]) -> ServerSettings:
        conf = as_config(conf)
        return cls(
            transport=conf["messaging.transport"],
            tls_enabled=conf["tls.enabled"],
            bind_host=conf["worker.bind.host"],
            metrics_enabled=conf["metrics.enabled"],
            metrics_port=conf["metrics.port"],
            metrics_bind_host=conf["metrics.bind.host"],
            refresh_poll_seconds=conf.seconds("task.refresh.poll.secs"),
            shutdown_timeout_seconds=conf.seconds("topology.shutdown.timeout.secs"),
            log_interval_seconds=conf.seconds("tuplemesh.log.rate.limit.secs"),
            peer_grace_seconds=conf.seconds("worker.peer.grace.secs"),
            epoch_confirm_seconds=conf.seconds("worker.epoch.confirm.secs"),
            stream_idle_timeout_seconds=conf.seconds("server.stream.idle.timeout.ms"),
            secret_max_skew_seconds=conf.seconds("mesh.secret.max.skew.secs"),
            ui_stream_seconds=conf.seconds("ui.events.timeout.secs"),
        )
