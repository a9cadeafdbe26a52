"""The UI's HTTP side, a WSGI app: the page, its static files, one JSON view and an event stream.

``/ui/`` the page (with the features' panels' scripts and styles, ``/ui/panels/<name>.js`` and
``.css``); ``/ui/view.json`` the view now; ``/ui/events`` server-sent events, one view
per second. Every client shares one reading per second (``source`` is called at most that often,
however many browsers are open). With a token, the page, view and events need it: an
``Authorization: Bearer`` header, or the cookie the login form sets.
"""

from __future__ import annotations

import hmac
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from http.cookies import SimpleCookie
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, unquote

from tuplemesh.core.panel import MeshPanel
from tuplemesh.ui.view import check_panel_names

__all__ = ["UiApp", "WsgiApp"]

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

#: The static files, by URL name: (package file, content type).
STATIC = {
    "": ("index.html", "text/html; charset=utf-8"),
    "app.js": ("app.js", "text/javascript; charset=utf-8"),
    "app.css": ("app.css", "text/css; charset=utf-8"),
}
COOKIE = "tuplemesh_ui_token"
#: Seconds between two events of a stream.
EVENT_INTERVAL = 1.0

LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tuplemesh: sign in</title>
<link rel="stylesheet" href="/ui/app.css"></head>
<body><main class="login"><h1>tuplemesh</h1>
{message}
<form method="post" action="/ui/login">
<label for="token">Admin token (<code>admin.token</code>)</label>
<input id="token" name="token" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form></main></body></html>
"""


#: Where the page's head takes the panels' scripts and styles (after its own script: a panel's
#: script registers with it).
PANEL_ASSETS = "<!-- panel assets -->"


def _static(name: str) -> bytes:
    return (resources.files("tuplemesh.ui") / "static" / name).read_bytes()


def _files(panels: Sequence[MeshPanel]) -> dict[str, tuple[bytes, str]]:
    """The page's files by URL name (under /ui/): its own, with the page naming each panel's
    script and style, and those (``panels/<name>.js``, ``.css``). None holds data."""
    files = {name: (_static(filename), content_type) for name, (filename, content_type) in STATIC.items()}
    check_panel_names([panel.name for panel in panels])
    tags = []
    for panel in panels:
        files[f"panels/{panel.name}.js"] = (panel.script(), STATIC["app.js"][1])
        files[f"panels/{panel.name}.css"] = (panel.style(), STATIC["app.css"][1])
        tags.append(
            f'<link rel="stylesheet" href="/ui/panels/{panel.name}.css">\n'
            f'<script src="/ui/panels/{panel.name}.js" defer></script>'
        )
    page, content_type = files[""]
    files[""] = (page.replace(PANEL_ASSETS.encode(), "\n".join(tags).encode()), content_type)
    return files


class UiApp:
    """``source()`` returns the current view (a JSON-ready dict); ``token`` empty: no sign-in.
    Thread-safe: the HTTP server calls it from one thread per request."""

    def __init__(
        self,
        source: Callable[[], dict[str, Any]],
        token: str = "",
        max_clients: int = 8,
        stream_seconds: float = 300.0,
        panels: Sequence[MeshPanel] = (),
    ) -> None:
        self._source = source
        self._files = _files(panels)
        self._token = token
        self._slots = threading.BoundedSemaphore(max_clients)
        self.max_clients = max_clients
        self.stream_seconds = stream_seconds
        self._lock = threading.Lock()
        self._view: tuple[float, bytes] | None = None
        self._stopping = threading.Event()
        self.clients = 0

    def stop(self) -> None:
        """End every event stream (within one interval)."""
        self._stopping.set()

    def view_json(self) -> bytes:
        """The current view, read at most once per EVENT_INTERVAL whoever asks."""
        with self._lock:
            now = time.monotonic()
            if self._view is None or now - self._view[0] >= EVENT_INTERVAL * 0.9:
                self._view = (now, json.dumps(self._source(), separators=(",", ":")).encode())
            return self._view[1]

    # -- WSGI -----------------------------------------------------------------------------------
    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path == "/ui":
            start_response("301 Moved Permanently", [("Location", "/ui/")])
            return [b""]
        name = path.removeprefix("/ui/")
        if name == "login" and method == "POST":
            return self._login(environ, start_response)
        if name != "" and name in self._files:  # no data in them: the sign-in page needs the style
            return self._file(name, start_response)
        if name not in ("", "view.json", "events"):
            return self._reply(start_response, "404 Not Found", "text/plain", b"not found\n")
        if not self._authorized(environ):
            given = bool(environ.get("HTTP_AUTHORIZATION")) or COOKIE in self._cookies(environ)
            message = (
                '<p class="refused" role="alert">The token given is wrong: access refused.</p>'
                if given
                else "<p>This mesh needs its admin token to show its UI.</p>"
            )
            return self._reply(
                start_response,
                "401 Unauthorized",
                "text/html; charset=utf-8",
                LOGIN_PAGE.format(message=message).encode(),
                [("WWW-Authenticate", 'Bearer realm="tuplemesh"')],
            )
        if name == "":
            return self._file("", start_response)
        if name == "view.json":
            return self._reply(start_response, "200 OK", "application/json", self.view_json())
        return self._events(start_response)

    def _reply(
        self,
        start_response: Callable[..., Any],
        status: str,
        content_type: str,
        body: bytes,
        headers: list[tuple[str, str]] | None = None,
    ) -> list[bytes]:
        start_response(
            status,
            [("Content-Type", content_type), ("Content-Length", str(len(body))),
             ("Cache-Control", "no-store"), *(headers or [])],
        )  # fmt: skip
        return [body]

    def _file(self, name: str, start_response: Callable[..., Any]) -> list[bytes]:
        body, content_type = self._files[name]
        return self._reply(start_response, "200 OK", content_type, body)

    @staticmethod
    def _cookies(environ: dict[str, Any]) -> dict[str, str]:
        cookie: SimpleCookie = SimpleCookie()
        try:
            cookie.load(environ.get("HTTP_COOKIE", ""))
        except Exception:  # a malformed cookie header from someone else's page: ignore it
            return {}
        return {k: m.value for k, m in cookie.items()}

    def _matches(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self._token.encode())

    def _authorized(self, environ: dict[str, Any]) -> bool:
        if not self._token:
            return True
        header = environ.get("HTTP_AUTHORIZATION", "")
        if header:
            scheme, _, value = header.partition(" ")
            return scheme.lower() == "bearer" and self._matches(value.strip())
        cookie = self._cookies(environ).get(COOKIE)
        return cookie is not None and self._matches(unquote(cookie))

    def _login(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        body = environ["wsgi.input"].read(min(length, 4096)).decode("utf-8", "replace")
        given = parse_qs(body).get("token", [""])[0]
        if not self._token or self._matches(given):
            # quoted: a token may hold characters a cookie value may not (";", spaces)
            cookie = f"{COOKIE}={quote(given, safe='')}; Path=/ui/; HttpOnly; SameSite=Strict"
            start_response("303 See Other", [("Location", "/ui/"), ("Set-Cookie", cookie)])
            return [b""]
        message = '<p class="refused" role="alert">The token given is wrong: access refused.</p>'
        return self._reply(
            start_response,
            "401 Unauthorized",
            "text/html; charset=utf-8",
            LOGIN_PAGE.format(message=message).encode(),
        )

    def _events(self, start_response: Callable[..., Any]) -> list[bytes] | Iterator[bytes]:
        if not self._slots.acquire(blocking=False):
            return self._reply(
                start_response,
                "503 Service Unavailable",
                "text/plain",
                f"at most {self.max_clients} event streams at once (ui.events.clients)\n".encode(),
                [("Retry-After", "5")],
            )
        start_response(
            "200 OK",
            [("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"),
             ("X-Accel-Buffering", "no")],
        )  # fmt: skip
        return self._stream()

    def _stream(self) -> Iterator[bytes]:
        with self._lock:
            self.clients += 1
        try:
            # the browser reconnects by itself after the stream ends (ui.events.timeout.secs)
            yield b"retry: 1000\n\n"
            deadline = time.monotonic() + self.stream_seconds
            while True:  # one view at least, then one per interval until the deadline
                yield b"data: " + self.view_json() + b"\n\n"
                if self._stopping.is_set() or time.monotonic() >= deadline:
                    return
                self._stopping.wait(EVENT_INTERVAL)
        finally:
            with self._lock:
                self.clients -= 1
            self._slots.release()
