"""The worker's Prometheus ``/metrics`` HTTP endpoint, serving a registry of its own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, start_http_server

from tuplemesh.metrics import WorkerCollector

if TYPE_CHECKING:
    from tuplemesh.rpcerrors import RpcErrors
    from tuplemesh.security import TlsConnections
    from tuplemesh.worker.worker import Worker

__all__ = ["MetricsEndpoint"]


class MetricsEndpoint:
    """``/metrics`` for one Worker on ``host:port``; a fresh registry, so tests never share one."""

    def __init__(
        self,
        worker: Worker,
        host: str,
        port: int,
        rpc_errors: RpcErrors | None = None,
        tls: TlsConnections | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(WorkerCollector(worker, rpc_errors, tls))
        self._server: Any
        self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)

    @property
    def port(self) -> int:
        return int(self._server.server_port)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
