"""`ListWatch`: a live copy of the Kubernetes objects one list call selects, kept by list + watch.

The loop every controller runs (client-go's reflector): list, then watch from the list's
resourceVersion; resume from the last resourceVersion seen when the server ends a watch (its
timeout); list again when that version is too old (410 Gone); back off on API errors and
connection failures, keeping the last view meanwhile. Events are parsed here, as raw JSON, so
a malformed object never breaks the watch: what it means is the owner's business.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from kubernetes import watch
from kubernetes.client.rest import ApiException

from tuplemesh.logutil import RateLimitedLog

__all__ = ["ListWatch", "Objects"]

log = logging.getLogger(__name__)

#: object name -> the object as the API server sent it (raw JSON)
Objects = dict[str, dict[str, Any]]


class ListWatch:
    """Keeps ``Objects`` current on a thread of its own and hands every new view to ``on_change``.

    ``list_call(**kwargs)`` is the client's namespaced list method with its namespace bound;
    ``selector`` its selector arguments (``label_selector=...`` or ``field_selector=...``).
    Counters and ``listed`` may be read from any thread; ``start``/``stop`` once each.
    """

    def __init__(
        self,
        what: str,
        list_call: Callable[..., Any],
        selector: dict[str, str],
        on_change: Callable[[Objects], None],
        *,
        watch_timeout: int = 60,
        min_backoff: float = 0.2,
        max_backoff: float = 5.0,
        log_interval: float = 10.0,
    ) -> None:
        self.what = what
        self._list_call = list_call
        self._selector = selector
        self._on_change = on_change
        self.watch_timeout = watch_timeout
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        #: Full lists after the watch's resourceVersion expired (410 Gone).
        self.relists = 0
        #: Watches the server ended (a timeout) that resumed where they stopped.
        self.watch_restarts = 0
        #: Failed API calls, each followed by a backoff.
        self.api_errors = 0
        #: The last API failure, for an error message ("" until one happens).
        self.last_error = ""
        #: Set once the first list succeeded.
        self.listed = threading.Event()
        self._objects: Objects = {}
        self._stop = threading.Event()
        self._watch: watch.Watch | None = None
        self._thread: threading.Thread | None = None
        self._log = RateLimitedLog(log, log_interval)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"listwatch-{self.what}", daemon=True)
        self._thread.start()

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
                if self._stop.is_set():
                    return  # stop() cut the open watch
                if exc.status == 410:
                    self.relists += 1  # our resourceVersion is too old: start over from a list
                    self._log.log("%s: watch expired (410 Gone); relisting", self.what)
                    continue
                self._backoff(f"API error {exc.status} {exc.reason}", backoff)
                backoff = min(backoff * 2, self.max_backoff)
            except Exception as exc:  # connection refused, timeouts, bad JSON: keep the last view
                if self._stop.is_set():
                    return
                self._backoff(repr(exc), backoff)
                backoff = min(backoff * 2, self.max_backoff)

    def _backoff(self, what: str, delay: float) -> None:
        self.api_errors += 1
        self.last_error = what
        self._log.log("%s: %s; keeping the last view, retrying in %.1fs", self.what, what, delay)
        self._stop.wait(delay)

    def _relist(self) -> str:
        # the raw HTTP response: our own parsing, as for watch events
        response: Any = self._list_call(**self._selector, _preload_content=False)
        body = json.loads(response.data)
        objects = {}
        for item in body.get("items") or []:
            name = (item.get("metadata") or {}).get("name")
            if isinstance(name, str):
                objects[name] = item
        self._objects = objects
        self._on_change(dict(objects))
        self.listed.set()
        return str(body["metadata"]["resourceVersion"])

    def _watch_from(self, version: str) -> str:
        self._watch = w = watch.Watch()

        def list_objects(**kwargs: Any) -> Any:
            # No docstring, so the client finds no return type and hands us raw JSON events.
            return self._list_call(**kwargs)

        for event in w.stream(
            list_objects,
            **self._selector,
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
            if kind == "DELETED":
                self._objects.pop(name, None)
            elif kind in ("ADDED", "MODIFIED"):
                self._objects[name] = obj
            self._on_change(dict(self._objects))
        return version
