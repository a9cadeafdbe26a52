"""`KubernetesDirectory`: peers from the EndpointSlices of the workers' headless Service.

Lists, then watches, EndpointSlices labelled ``kubernetes.io/service-name=<service>`` with the
official ``kubernetes`` client; maps every ready endpoint to its worker index (the StatefulSet
ordinal at the end of the endpoint's hostname, or of its targetRef name). The list/watch loop
(`tuplemesh.discovery.listwatch`) relists on 410 Gone, resumes from the last resourceVersion
after a watch timeout and backs off on API errors. A
malformed slice or an endpoint without an ordinal is counted and logged, and the last good view
of everything else is kept. Works in-cluster (service account) and from a kubeconfig.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable

from kubernetes import client, config

from tuplemesh.discovery.base import DiscoveryStats, Peers
from tuplemesh.discovery.listwatch import ListWatch, Objects
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


def peers_from_slices(slices: Objects, port_name: str, default_port: int) -> tuple[Peers, list[str]]:
    """(worker index -> address, problems) from raw EndpointSlice objects.

    Every ordinal counts, also those beyond the mesh's worker count: pods a scale-up adds are
    ready before the mesh grows to include them, as ``--peers`` may list more addresses."""
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
                peers[int(match.group(1))] = (addresses[0], port)
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
        port_name: str = "transfer",
        default_port: int = 6700,
        watch_timeout: int = 60,
        min_backoff: float = 0.2,
        max_backoff: float = 5.0,
        log_interval: float = 10.0,
    ) -> None:
        slices_api = client.DiscoveryV1Api(api)
        self.namespace = namespace
        self.service = service
        self.port_name = port_name
        self.default_port = default_port
        self.problems = 0
        self._peers: Peers = {}
        self._lock = threading.Lock()
        self._subscribers: list[Callable[[Peers], None]] = []
        self._log = RateLimitedLog(log, log_interval)
        self._slices = ListWatch(
            "discovery",
            lambda **kwargs: slices_api.list_namespaced_endpoint_slice(namespace, **kwargs),
            {"label_selector": f"kubernetes.io/service-name={service}"},
            self._publish,
            watch_timeout=watch_timeout,
            min_backoff=min_backoff,
            max_backoff=max_backoff,
            log_interval=log_interval,
        )

    @property
    def listed(self) -> threading.Event:
        """Set once the first list succeeded."""
        return self._slices.listed

    @property
    def relists(self) -> int:
        return self._slices.relists

    @property
    def watch_restarts(self) -> int:
        return self._slices.watch_restarts

    @property
    def api_errors(self) -> int:
        return self._slices.api_errors

    # -- PeerDirectory --------------------------------------------------------------------------
    def start(self) -> None:
        self._slices.start()

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
        self._slices.stop()

    def _publish(self, slices: Objects) -> None:
        peers, problems = peers_from_slices(slices, self.port_name, self.default_port)
        with self._lock:
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
