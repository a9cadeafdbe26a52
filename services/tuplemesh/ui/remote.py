"""``tuplemesh ui``: the web UI of a whole mesh, served from wherever the command runs.

One ``Admin.WatchStats`` stream per worker (the stream ``tuplemesh top`` reads), followed again
after it breaks, so a worker that dies shows as down and one that comes back as up; the graph
comes from a worker's ``Admin.GetAssignment``, the rescale history from every worker's
``Admin.GetEpochHistory`` (asked again whenever a worker's epoch changes), and each feature
panel's answer from every worker with each stats message (through the feature's own call: not
asked again of a worker that refuses it, until its stream breaks: the call or the feature is off
there).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Sequence
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import grpc

from tuplemesh.client import TlsSettings, open_channel
from tuplemesh.core.panel import MeshPanel
from tuplemesh.ui.mesh import history_rows, merge_histories
from tuplemesh.ui.server import UiApp
from tuplemesh.ui.view import ViewBuilder
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc

__all__ = ["MeshFollower", "serve"]

#: Seconds between two attempts to reach a worker that is down.
RETRY_SECS = 1.0
#: A panel's call refused with these means "nothing to show here" (not a failure of the page):
#: the call is off, the feature has nothing counted, an earlier release without it.
NO_ANSWER = (
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.UNIMPLEMENTED,
)


class MeshFollower:
    """The latest WorkerStats of every target, and why a target cannot be read when it cannot.
    One thread per target follows it; ``view`` and ``stop`` are thread-safe."""

    def __init__(
        self,
        targets: Sequence[str],
        tls: TlsSettings | None = None,
        token: str = "",
        panels: Sequence[MeshPanel] = (),
    ) -> None:
        self.targets = list(targets)
        self._panels = tuple(panels)
        self._tls, self._token = tls, token
        self._lock = threading.Lock()
        self._stats: dict[str, admin_pb2.WorkerStats | None] = dict.fromkeys(self.targets)
        self._errors: dict[str, str] = {}
        self._graph: dict[str, Any] | None = None
        self._graph_epoch = ""
        #: target -> its epoch history rows (newest first), kept while it is down
        self._histories: dict[str, list[dict[str, Any]]] = {}
        #: targets whose worker has no GetEpochHistory (an earlier release): not asked again
        self._no_history: set[str] = set()
        #: per panel: target -> its latest answer; (panel name, target) refused: not asked again
        self._answers: dict[str, dict[str, Any]] = {panel.name: {} for panel in self._panels}
        self._refused: set[tuple[str, str]] = set()
        self._stop = threading.Event()
        self._calls: dict[str, Any] = {}
        self._builder = ViewBuilder()
        self._threads = [
            threading.Thread(target=self._follow, args=(t,), name=f"ui-follow-{t}", daemon=True)
            for t in self.targets
        ]
        for thread in self._threads:
            thread.start()

    def _follow(self, target: str) -> None:
        channel = open_channel(target, self._tls, self._token)
        stub = admin_pb2_grpc.AdminStub(channel)
        while not self._stop.is_set():
            try:
                call = stub.WatchStats(admin_pb2.WatchStatsRequest(interval_seconds=1.0))
                with self._lock:
                    self._calls[target] = call
                    # a worker back after a stream broke may be a newer release that has the rpc
                    self._no_history.discard(target)
                    self._refused -= {(panel.name, target) for panel in self._panels}
                for message in call:
                    with self._lock:
                        self._stats[target] = message
                        self._errors.pop(target, None)
                        stale = self._graph is None or message.status.epoch != self._graph_epoch
                        rows = self._histories.get(target)
                        # a worker records its epoch just after it starts serving: until its
                        # history leads with the epoch it reports, ask again
                        behind = target not in self._no_history and (
                            not rows or rows[0]["epoch"] != message.status.epoch
                        )
                        asked = [p for p in self._panels if (p.name, target) not in self._refused]
                    if stale:
                        self._fetch_graph(stub, message.status.epoch)
                    if behind:
                        self._fetch_history(stub, target)
                    for panel in asked:
                        self._fetch_answer(panel, channel, target)
                detail = "drained: its stats stream ended"
            except grpc.RpcError as exc:
                if self._stop.is_set():
                    return
                detail = f"{exc.code().name}: {exc.details()}"
            with self._lock:
                self._errors[target] = detail
            self._stop.wait(RETRY_SECS)

    def _fetch_graph(self, stub: admin_pb2_grpc.AdminStub, epoch: str) -> None:
        info = stub.GetAssignment(admin_pb2.GetAssignmentRequest(), timeout=5)
        if info.graph_json:
            with self._lock:
                self._graph, self._graph_epoch = json.loads(info.graph_json), epoch

    def _fetch_history(self, stub: admin_pb2_grpc.AdminStub, target: str) -> None:
        try:
            rows = history_rows(stub.GetEpochHistory(admin_pb2.GetEpochHistoryRequest(), timeout=5))
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            with self._lock:
                self._no_history.add(target)
            return
        with self._lock:
            self._histories[target] = rows

    def _fetch_answer(self, panel: MeshPanel, channel: grpc.Channel, target: str) -> None:
        try:
            answer = panel.ask(channel, 5).result()
        except grpc.RpcError as exc:
            # the page shows no entry of it, and the worker stays up on the page: whether it is
            # up is its stats stream's to say (a worker that went away breaks that too)
            with self._lock:
                self._answers[panel.name].pop(target, None)
                if exc.code() in NO_ANSWER:
                    self._refused.add((panel.name, target))
            return
        with self._lock:
            self._answers[panel.name][target] = answer

    def view(self) -> dict[str, Any]:
        with self._lock:
            history = merge_histories(self._histories.values())
            return self._builder.view(
                dict(self._stats),
                dict(self._errors),
                self._graph,
                history=history,
                panels=[(panel, dict(self._answers[panel.name])) for panel in self._panels],
            )

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            calls = list(self._calls.values())
        for call in calls:
            call.cancel()


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


def serve(
    targets: Sequence[str],
    port: int,
    host: str = "127.0.0.1",
    *,
    tls: TlsSettings | None = None,
    token: str = "",
    ready: threading.Event | None = None,
    panels: Sequence[MeshPanel] = (),
) -> int:
    """Serve the UI on ``host:port`` until Ctrl-C. With ``token`` (``admin.token``) the page asks
    for it too: whoever reaches this port sees what the workers' Admin shows. ``panels``: the
    features' panels the page shows (the CLI passes every registered feature's)."""
    follower = MeshFollower(targets, tls, token, panels)
    app = UiApp(follower.view, token=token, panels=panels)
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    server_class = type("Server", (_Server,), {"address_family": family})
    server: WSGIServer = make_server(host, port, app, server_class, handler_class=_QuietHandler)
    print(f"tuplemesh ui: http://{host}:{server.server_port}/ui/ following {', '.join(targets)}", flush=True)
    if ready is not None:
        ready.set()
    try:
        server.serve_forever(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        app.stop()
        follower.stop()
        server.server_close()
    return 0
