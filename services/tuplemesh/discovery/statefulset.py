"""`StatefulSetReplicas`: the replica count of the workers' StatefulSet, listed and watched.

``kubectl scale``, ``helm upgrade`` or a HorizontalPodAutoscaler change ``spec.replicas``; the
mesh follows it with a live rescale. One object is watched (``fieldSelector=metadata.name=``)
with the official client, through the same list/watch loop as the peer directory.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
from collections.abc import Callable

from kubernetes import client

from tuplemesh.discovery.listwatch import ListWatch, Objects

__all__ = ["StatefulSetReplicas", "replicas_of", "statefulset_of_pod"]

log = logging.getLogger(__name__)

_ORDINAL_SUFFIX = re.compile(r"-\d+$")


def statefulset_of_pod(hostname: str | None = None) -> str:
    """The StatefulSet a pod belongs to: its name (the hostname) without the ``-<ordinal>``."""
    name = hostname if hostname is not None else socket.gethostname()
    return _ORDINAL_SUFFIX.sub("", name.split(".", 1)[0])


def replicas_of(obj: dict[str, object]) -> int | None:
    """``spec.replicas`` of a raw StatefulSet (1 when unset, the API's default); None if malformed."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None
    replicas = spec.get("replicas", 1)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        return None
    return replicas


class StatefulSetReplicas:
    """A `tuplemesh.discovery.base.ReplicaSource`. Thread-safe; ``start`` runs the list/watch
    loop on a thread of its own."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        name: str,
        *,
        watch_timeout: int = 60,
        min_backoff: float = 0.2,
        max_backoff: float = 5.0,
        log_interval: float = 10.0,
    ) -> None:
        apps = client.AppsV1Api(api)
        self.namespace = namespace
        self.name = name
        self._replicas: int | None = None
        self._lock = threading.Lock()
        self._subscribers: list[Callable[[int], None]] = []
        self.watch = ListWatch(
            f"statefulset {name}",
            lambda **kwargs: apps.list_namespaced_stateful_set(namespace, **kwargs),
            {"field_selector": f"metadata.name={name}"},
            self._publish,
            watch_timeout=watch_timeout,
            min_backoff=min_backoff,
            max_backoff=max_backoff,
            log_interval=log_interval,
        )

    def start(self) -> None:
        self.watch.start()

    def replicas(self) -> int | None:
        """``spec.replicas`` as last seen; None before the first list or while it does not exist."""
        with self._lock:
            return self._replicas

    def subscribe(self, callback: Callable[[int], None]) -> None:
        with self._lock:
            self._subscribers.append(callback)

    def stop(self) -> None:
        self.watch.stop()

    def _publish(self, objects: Objects) -> None:
        obj = objects.get(self.name)
        replicas = None if obj is None else replicas_of(obj)
        if obj is not None and replicas is None:
            log.warning("statefulset %s: spec.replicas is not a count: %r", self.name, obj.get("spec"))
            return  # keep the last good view
        with self._lock:
            changed = replicas != self._replicas
            self._replicas = replicas
            subscribers = list(self._subscribers)
        if not changed or replicas is None:
            return
        log.info("statefulset %s: %d replica(s)", self.name, replicas)
        for callback in subscribers:
            try:
                callback(replicas)
            except Exception:  # one bad subscriber must not stop the watch
                log.exception("replicas subscriber failed")
