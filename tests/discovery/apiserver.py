"""A test Kubernetes API server for EndpointSlices and StatefulSets: list, watch and get, as the
real one speaks them.

- ``GET /apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices`` and
  ``GET /apis/apps/v1/namespaces/{ns}/statefulsets`` list (with ``metadata.resourceVersion``),
  filtered by a ``labelSelector`` of one ``key=value`` and a ``fieldSelector`` on
  ``metadata.name``; ``.../statefulsets/{name}`` (and ``.../endpointslices/{name}``) gets one
  object or a 404 ``Status``.
- With ``watch=true``: a chunked stream of newline-delimited JSON events of that resource with
  resourceVersion after the one asked for, held open until ``timeoutSeconds``. A resourceVersion
  older than the retained history gets an ``ERROR`` event whose object is a 410 ``Status``
  (reason Expired), as etcd compaction makes the real server answer. One resourceVersion
  counter and one history serve every resource, as etcd does.
- ``down()``/``up()`` stop and restart it on the same port (the API server away for a while).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

SERVICE_LABEL = "kubernetes.io/service-name"


def endpoint_slice(
    name: str, service: str, endpoints: list[tuple[str, str, bool | None]], port: int = 6700
) -> dict[str, Any]:
    """An EndpointSlice with (hostname, ip, ready) endpoints; ready None leaves the condition out."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": "streams", "labels": {SERVICE_LABEL: service}},
        "addressType": "IPv4",
        "ports": [{"name": "transfer", "port": port, "protocol": "TCP"}],
        "endpoints": [
            {
                "addresses": [ip],
                "hostname": host,
                "conditions": {} if ready is None else {"ready": ready},
                "targetRef": {"kind": "Pod", "name": host, "namespace": "streams"},
            }
            for host, ip, ready in endpoints
        ],
    }


def statefulset(name: str, replicas: int) -> dict[str, Any]:
    """A StatefulSet asking for ``replicas`` pods (what ``kubectl scale`` changes)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": "streams", "labels": {"app.kubernetes.io/name": "tuplemesh"}},
        "spec": {
            "replicas": replicas,
            "serviceName": f"{name}-headless",
            "selector": {"matchLabels": {"app.kubernetes.io/instance": name}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/instance": name}},
                "spec": {"containers": [{"name": "worker", "image": "tuplemesh:test"}]},
            },
        },
    }


#: kind -> (API group/version, resource name in the URL)
RESOURCES = {
    "EndpointSlice": ("discovery.k8s.io/v1", "endpointslices"),
    "StatefulSet": ("apps/v1", "statefulsets"),
}
_BY_PATH = {(group, plural): kind for kind, (group, plural) in RESOURCES.items()}


class FakeApiServer:
    def __init__(self, port: int) -> None:
        self.port = port
        self._cond = threading.Condition()
        #: (kind, name) -> object
        self._objects: dict[tuple[str, str], dict[str, Any]] = {}
        #: (resourceVersion, event type, object) of every kind
        self._events: list[tuple[int, str, dict[str, Any]]] = []
        self._version = 100
        self._oldest = 100  # events at or below this were compacted away
        self.requests: list[str] = []
        self._server: ThreadingHTTPServer | None = None

    # -- state changes ------------------------------------------------------------------------
    def put(self, obj: dict[str, Any]) -> None:
        with self._cond:
            self._version += 1
            obj = json.loads(json.dumps(obj))
            obj["metadata"]["resourceVersion"] = str(self._version)
            key = (obj["kind"], obj["metadata"]["name"])
            kind = "MODIFIED" if key in self._objects else "ADDED"
            self._objects[key] = obj
            self._events.append((self._version, kind, obj))
            self._cond.notify_all()

    def delete(self, name: str, kind: str = "EndpointSlice") -> None:
        with self._cond:
            self._version += 1
            obj = self._objects.pop((kind, name))
            obj["metadata"]["resourceVersion"] = str(self._version)
            self._events.append((self._version, "DELETED", obj))
            self._cond.notify_all()

    def compact(self) -> None:
        """Forget the event history: a watch from any older resourceVersion now gets 410."""
        with self._cond:
            self._oldest = self._version
            self._events.clear()
            self._cond.notify_all()

    def watchers_cut(self) -> None:
        """End open watches now (as an apiserver restart does)."""
        with self._cond:
            self._cut = time.monotonic()
            self._cond.notify_all()

    # -- serving ------------------------------------------------------------------------------
    def up(self) -> None:
        self._cut = 0.0
        self._down = False
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._server.daemon_threads = True
        self._server.allow_reuse_address = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def down(self) -> None:
        if self._server is not None:
            with self._cond:
                self._down = True  # open watch streams deliver nothing more, as when a server dies
            self.watchers_cut()
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: fake\n  cluster:\n    server: http://127.0.0.1:{self.port}\n"
            "users:\n- name: fake\n  user:\n    token: test-token\n"
            "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: streams\n"
            "current-context: fake\n"
        )
        return path

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                url = urlparse(self.path)
                fake.requests.append(self.path)
                # /apis/{group}/{version}/namespaces/{ns}/{resource}[/{name}]
                parts = url.path.strip("/").split("/")
                kind = None
                if len(parts) in (6, 7) and parts[0] == "apis" and parts[3] == "namespaces":
                    kind = _BY_PATH.get((f"{parts[1]}/{parts[2]}", parts[5]))
                if kind is None:
                    self._json(404, _status(404, "NotFound", url.path))
                    return
                if len(parts) == 7:
                    with fake._cond:
                        obj = fake._objects.get((kind, parts[6]))
                    if obj is None:
                        self._json(404, _status(404, "NotFound", f'{parts[5]} "{parts[6]}" not found'))
                    else:
                        self._json(200, obj)
                    return
                query = parse_qs(url.query)
                selector = _Selector(query.get("labelSelector", [""])[0], query.get("fieldSelector", [""])[0])
                if query.get("watch", [""])[0] in ("true", "1", "True"):
                    self._watch(int(query.get("resourceVersion", ["0"])[0] or 0),
                                float(query.get("timeoutSeconds", ["30"])[0]), kind, selector)  # fmt: skip
                    return
                with fake._cond:
                    items = [o for (k, _), o in fake._objects.items() if k == kind and selector.matches(o)]
                    version = fake._version
                self._json(200, {"apiVersion": RESOURCES[kind][0], "kind": f"{kind}List",
                                 "metadata": {"resourceVersion": str(version)}, "items": items})  # fmt: skip

            def _json(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                # one request per connection: down() must really leave clients with nothing
                self.send_header("Connection", "close")
                self.close_connection = True
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _chunk(self, event: dict[str, Any]) -> None:
                line = json.dumps(event).encode() + b"\n"
                self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                self.wfile.flush()

            def _watch(self, since: int, timeout: float, kind: str, selector: _Selector) -> None:
                self.send_response(200)
                self.send_header("Connection", "close")
                self.close_connection = True
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                started = time.monotonic()
                try:
                    with fake._cond:
                        if since < fake._oldest:
                            message = f"too old resource version: {since} ({fake._oldest})"
                            self._chunk({"type": "ERROR", "object": _status(410, "Expired", message)})
                            self.wfile.write(b"0\r\n\r\n")
                            return
                    position = since
                    while True:
                        with fake._cond:
                            if fake._down:
                                return  # the connection just ends: no final chunk, like a dead server
                            pending = [e for e in fake._events if e[0] > position]
                            if not pending:
                                remaining = timeout - (time.monotonic() - started)
                                if remaining <= 0 or fake._cut > started:
                                    break
                                fake._cond.wait(min(remaining, 0.2))
                                continue
                        for version, event, obj in pending:
                            position = version
                            if obj["kind"] == kind and selector.matches(obj):
                                self._chunk({"type": event, "object": obj})
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}  # fmt: skip


class _Selector:
    """A label selector of one ``key=value`` and a field selector on ``metadata.name``, the
    forms the workers send; an empty one matches everything."""

    def __init__(self, labels: str, fields: str) -> None:
        self.label = tuple(labels.split("=", 1)) if "=" in labels else None
        field = tuple(fields.split("=", 1)) if "=" in fields else None
        if field is not None and field[0] != "metadata.name":
            raise ValueError(f"field selector {fields!r}: only metadata.name is served")
        self.name = field[1] if field is not None else None

    def matches(self, obj: dict[str, Any]) -> bool:
        metadata = obj["metadata"]
        if self.name is not None and metadata["name"] != self.name:
            return False
        return self.label is None or metadata.get("labels", {}).get(self.label[0]) == self.label[1]
