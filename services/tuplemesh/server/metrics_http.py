"""The worker's Prometheus ``/metrics`` HTTP endpoint, serving a registry of its own.

Besides the worker's own metrics it serves what every Prometheus client exports by convention
(``process_*``, ``python_*``) and ``tuplemesh_build_info``, so standard dashboards and alerts
(restarts, memory, open files, GC) work unchanged.
"""

from __future__ import annotations

import platform
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tuplemesh import build_info
from tuplemesh.metrics import WorkerCollector

if TYPE_CHECKING:
    from tuplemesh.rpcerrors import RpcErrors
    from tuplemesh.security import TlsConnections
    from tuplemesh.worker.worker import Worker

__all__ = ["BuildInfo", "MetricsEndpoint"]


class BuildInfo(Collector):
    """``tuplemesh_build_info{version, build, python}`` = 1: what a worker runs, for dashboards."""

    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "tuplemesh_build_info",
            "Always 1; the labels say which tuplemesh version runs and whether its hot path is compiled.",
            labels=["version", "build", "python"],
        )
        info.add_metric([build_info.version(), build_info.build(), platform.python_version()], 1)
        yield info


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
        self.registry.register(BuildInfo())
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._server: Any
        self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)

    @property
    def port(self) -> int:
        return int(self._server.server_port)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
