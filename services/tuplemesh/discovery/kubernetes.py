"""`KubernetesDirectory`: peers from the EndpointSlices of the workers' headless Service.

Lists, then watches, EndpointSlices labelled ``kubernetes.io/service-name=<service>`` with the
official ``kubernetes`` client; maps every ready endpoint to its worker index (the StatefulSet
ordinal at the end of the endpoint's hostname, or of its targetRef name); relists on 410 Gone;
resumes from the last resourceVersion after a watch timeout; backs off on API errors. A
malformed slice or an endpoint without an ordinal is counted and logged, and the last good view
of everything else is kept. Works in-cluster (service account) and from a kubeconfig.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Callable
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from tuplemesh.discovery.base import DiscoveryStats, Peers
from tuplemesh.logutil import RateLimitedLog

__all__ = ["KubernetesDirectory", "api_client_from_environment", "peers_from_slices"]

log = logging.getLogger(__name__)

_ORDINAL = re.compile(r"-(\d+)$")


def api_client_from_environment(kubeconfig: str | None = None) -> client.ApiClient:
    """In a pod: the service account. Elsewhere: ``kubeconfig`` or ``$KUBECONFIG``/~/.kube/config."""
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config()
        return client.ApiClient()
    configuration = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    return client.ApiClient(configuration)


def peers_from_slices(
    slices: dict[str, dict[str, Any]], port_name: str, default_port: int, workers: int
) -> tuple[Peers, list[str]]:
    """(worker index -> address, problems) from raw EndpointSlice objects."""
    peers: Peers = {}
    problems: list[str] = []
    for name, obj in sorted(slices.items()):
        try:
            port = default_port
            for p in obj.get("ports") or []:
                if p.get("name") == port_name and isinstance(p.get("port"), int):
                    port = p["port"]
            for endpoint in obj.get("endpoints") or []:
                conditions = endpoint.get("conditions") or {}
                if conditions.get("ready") is False:  # nil means ready (Kubernetes API convention)
                    continue
                addresses = endpoint.get("addresses") or []
                who = endpoint.get("hostname") or (endpoint.get("targetRef") or {}).get("name") or ""
                match = _ORDINAL.search(who)
                if not addresses or not isinstance(addresses[0], str):
                    problems.append(f"slice {name}: endpoint {who or '?'} has no address")
                    continue
                if match is None:
                    problems.append(
                        f"slice {name}: endpoint {addresses[0]} has no ordinal (hostname {who!r})"
                    )
                    continue
                index = int(match.group(1))
                if index >= workers:
                    problems.append(f"slice {name}: ordinal {index} is not a worker (workers: {workers})")
                    continue
                peers[index] = (addresses[0], port)
        except (AttributeError, TypeError) as exc:
            problems.append(f"slice {name} is malformed: {exc}")
    return peers, problems


class KubernetesDirectory:
    """Thread-safe. ``start`` runs the list/watch loop on a thread of its own."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        service: str,
        *,
        workers: int,
        port_name: str = "transfer",
        default_port: int = 6700,
        watch_timeout: int = 60,
        min_backoff: float = 0.2,
        max_backoff: float = 5.0,
        log_interval: float = 10.0,
    ) -> None:
        self.api = client.DiscoveryV1Api(api)
        self.namespace = namespace
        self.service = service
        self.workers = workers
        self.port_name = port_name
        self.default_port = default_port
        self.watch_timeout = watch_timeout
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self.selector = f"kubernetes.io/service-name={service}"
        self.relists = 0
        self.watch_restarts = 0
        self.api_errors = 0
        self.problems = 0
        self.listed = threading.Event()
        self._slices: dict[str, dict[str, Any]] = {}
        self._peers: Peers = {}
        self._lock = threading.Lock()
        self._subscribers: list[Callable[[Peers], None]] = []
        self._stop = threading.Event()
        self._watch: watch.Watch | None = None
        self._thread: threading.Thread | None = None
        self._log = RateLimitedLog(log, log_interval)

    # -- PeerDirectory --------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="discovery", daemon=True)
        self._thread.start()

    def snapshot(self) -> Peers:
        with self._lock:
            return dict(self._peers)

    def stats(self) -> DiscoveryStats:
        return DiscoveryStats(
            relists=self.relists,
            watch_restarts=self.watch_restarts,
            api_errors=self.api_errors,
            endpoint_problems=self.problems,
        )

    def subscribe(self, callback: Callable[[Peers], None]) -> None:
        with self._lock:
            self._subscribers.append(callback)

    def stop(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()
            # Watch.stop() only takes effect at the next event: close the open response so a
            # quiet watch ends now instead of at its server-side timeout.
            response = getattr(self._watch, "_resp", None)
            shutdown = getattr(response, "shutdown", None)  # urllib3 >= 2.3
            if shutdown is not None:
                try:
                    shutdown()  # the blocked read returns at once
                except OSError:
                    pass  # already closed
        if self._thread is not None:
            self._thread.join(10)

    # -- list and watch -------------------------------------------------------------------------
    def _run(self) -> None:
        backoff = self.min_backoff
        while not self._stop.is_set():
            try:
                version = self._relist()
                backoff = self.min_backoff
                while not self._stop.is_set():
                    version = self._watch_from(version)
                    self.watch_restarts += 1  # the server ended the watch (timeout): resume
            except ApiException as exc:
                if exc.status == 410:
                    self.relists += 1  # our resourceVersion is too old: start over from a list
                    self._log.log("discovery: watch expired (410 Gone); relisting")
                    continue
                self._backoff(f"API error {exc.status} {exc.reason}", backoff)
                backoff = min(backoff * 2, self.max_backoff)
            except Exception as exc:  # connection refused, timeouts, bad JSON: keep the last view
                self._backoff(repr(exc), backoff)
                backoff = min(backoff * 2, self.max_backoff)

    def _backoff(self, what: str, delay: float) -> None:
        self.api_errors += 1
        self._log.log("discovery: %s; keeping the last view, retrying in %.1fs", what, delay)
        self._stop.wait(delay)

    def _relist(self) -> str:
        response: Any = self.api.list_namespaced_endpoint_slice(
            self.namespace, label_selector=self.selector, _preload_content=False
        )  # raw HTTP response: our own parsing, as for watch events
        body = json.loads(response.data)
        slices = {}
        for item in body.get("items") or []:
            name = (item.get("metadata") or {}).get("name")
            if isinstance(name, str):
                slices[name] = item
        with self._lock:
            self._slices = slices
        self._publish()
        self.listed.set()
        return str(body["metadata"]["resourceVersion"])

    def _watch_from(self, version: str) -> str:
        self._watch = w = watch.Watch()

        def list_slices(*args: Any, **kwargs: Any) -> Any:
            # No docstring, so the client finds no return type and hands us raw JSON events:
            # our own parsing keeps a malformed slice from breaking the watch.
            return self.api.list_namespaced_endpoint_slice(*args, **kwargs)

        for event in w.stream(
            list_slices,
            self.namespace,
            label_selector=self.selector,
            resource_version=version,
            timeout_seconds=self.watch_timeout,
            allow_watch_bookmarks=True,
        ):
            if self._stop.is_set():
                break
            kind, obj = event.get("type"), event.get("object") or {}
            metadata = obj.get("metadata") or {}
            version = str(metadata.get("resourceVersion", version))
            name = metadata.get("name")
            if kind == "BOOKMARK" or not isinstance(name, str):
                continue
            with self._lock:
                if kind == "DELETED":
                    self._slices.pop(name, None)
                elif kind in ("ADDED", "MODIFIED"):
                    self._slices[name] = obj
            self._publish()
        return version

    def _publish(self) -> None:
        with self._lock:
            peers, problems = peers_from_slices(self._slices, self.port_name, self.default_port, self.workers)
            changed = peers != self._peers
            self._peers = peers
            subscribers = list(self._subscribers)
        if problems:
            self.problems += len(problems)
            self._log.log("discovery: %d endpoint problem(s), e.g. %s", len(problems), problems[0])
        if changed:
            log.info("discovery: peers now %s", peers)
            for callback in subscribers:
                try:
                    callback(dict(peers))
                except Exception:  # one bad subscriber must not stop discovery
                    log.exception("discovery subscriber failed")
