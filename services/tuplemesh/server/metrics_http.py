"""The worker's Prometheus ``/metrics`` HTTP endpoint, serving a registry of its own, and the
web UI under ``/ui/`` (unless ``ui.enabled`` is off).

Besides the worker's own metrics it serves what every Prometheus client exports by convention
(``process_*``, ``python_*``) and ``tuplemesh_build_info``, so standard dashboards and alerts
(restarts, memory, open files, GC) work unchanged.
"""

from __future__ import annotations

import platform
import selectors
import socket
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    make_wsgi_app,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector

from tuplemesh import build_info
from tuplemesh.metrics import ObservedWorker, WorkerCollector
from tuplemesh.ui.server import UiApp

if TYPE_CHECKING:
    from tuplemesh.admission import CallAdmission
    from tuplemesh.rpcerrors import RpcErrors
    from tuplemesh.security import TlsConnections

__all__ = ["BuildInfo", "MetricsEndpoint"]


#: A connection that sends no request (or reads no answer) for this long is closed: a client
#: that opens connections and stays silent must not keep a thread each for ever.
CONNECTION_TIMEOUT_SECS = 10.0

#: Connections served at once (a thread each); more are closed at once, unanswered. Prometheus
#: scrapes with one connection at a time; the web UI's event streams (at most ui.events.clients)
#: hold one each, so this leaves scrapes room beside them.
MAX_CONNECTIONS = 16


class _QuietHandler(WSGIRequestHandler):
    """No access log line per scrape; a silent connection times out."""

    timeout = CONNECTION_TIMEOUT_SECS

    def log_message(self, format: str, *args: Any) -> None:
        return None


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
        worker: ObservedWorker,
        host: str,
        port: int,
        rpc_errors: RpcErrors | None = None,
        tls: TlsConnections | None = None,
        admission: CallAdmission | None = None,
        ui: UiApp | None = None,
    ) -> None:
        self.ui = ui
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(WorkerCollector(worker, rpc_errors, tls, admission))
        self.registry.register(BuildInfo())
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        # prometheus_client's start_http_server, but with a loop that sleeps until a connection
        # or `stop` comes: serve_forever looks for a stop request every poll interval, and that
        # was either a quarter of a rescale's pause (its default, 0.5 s) or, polled every 20 ms,
        # a tenth of an idle worker's CPU on a host of many workers
        family, _, _, _, sockaddr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]

        class Server(ThreadingWSGIServer):
            address_family = family
            slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

            def process_request(self, request: Any, client_address: Any) -> None:
                if not self.slots.acquire(blocking=False):
                    self.shutdown_request(request)  # every slot taken: no thread for this one
                    return
                try:
                    super().process_request(request, client_address)
                except BaseException:
                    self.slots.release()
                    raise

            def process_request_thread(self, request: Any, client_address: Any) -> None:
                try:
                    super().process_request_thread(request, client_address)
                finally:
                    self.slots.release()

        metrics = make_wsgi_app(self.registry)

        def app(environ: dict[str, Any], start_response: Any) -> Any:
            if not environ.get("PATH_INFO", "").startswith("/ui"):
                return metrics(environ, start_response)  # (prometheus_client answers any path)
            if ui is not None:
                return ui(environ, start_response)
            body = b"the web UI is off on this worker (ui.enabled: false)\n"
            start_response(
                "404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))]
            )
            return [body]

        self._server: Any = make_server(str(sockaddr[0]), port, app, Server, handler_class=_QuietHandler)
        self._wake, self._waker = socket.socketpair()
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name="metrics-http", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        server = self._server
        with selectors.DefaultSelector() as selector:
            selector.register(server, selectors.EVENT_READ, "listening")
            selector.register(self._wake, selectors.EVENT_READ)
            while not self._stopping:
                for key, _ in selector.select():
                    if key.data == "listening" and not self._stopping:
                        server._handle_request_noblock()  # accept and hand to a thread, as serve_forever

    @property
    def port(self) -> int:
        return int(self._server.server_port)

    def stop(self) -> None:
        if self.ui is not None:
            self.ui.stop()
        self._stopping = True
        self._waker.send(b"\0")
        self._thread.join(5.0)
        self._server.server_close()
        self._wake.close()
        self._waker.close()
