"""Rate-limited, truncated logging for warnings that can fire once per tuple or per call.

A line is cut to `MAX_LINE_CHARS` (with how long it was): an error naming a 16 MiB tuple must
not write a 16 MiB log line. A traceback keeps its frames, each line cut the same way.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback

__all__ = ["MAX_LINE_CHARS", "RateLimitFilter", "RateLimitedLog", "short", "short_traceback"]

#: Longest line a rate-limited log writes (a message, or one line of a traceback).
MAX_LINE_CHARS = 500


def short(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters in all)"


def short_traceback(exc: BaseException, limit: int = MAX_LINE_CHARS) -> str:
    """The traceback of ``exc`` with every line cut to ``limit`` characters."""
    lines = "".join(traceback.format_exception(exc)).splitlines()
    return "\n".join(short(line, limit) for line in lines)


class _Throttle:
    """Admits one event per ``interval`` seconds and counts the ones it holds back. Thread-safe."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._lock = threading.Lock()
        self._last = -float("inf")
        self._suppressed = 0

    def admit(self) -> int | None:
        """None when held back; otherwise how many were held back since the last admitted one."""
        now = time.monotonic()
        with self._lock:
            if now - self._last < self.interval:
                self._suppressed += 1
                return None
            suppressed, self._suppressed = self._suppressed, 0
            self._last = now
        return suppressed


class RateLimitedLog:
    """Logs at most once per ``interval`` seconds; the lines held back are counted in the next one.

    Thread-safe.
    """

    def __init__(self, logger: logging.Logger, interval: float, level: int = logging.WARNING) -> None:
        self.logger = logger
        self.level = level
        self._throttle = _Throttle(interval)

    def log(self, msg: str, *args: object, exc: BaseException | None = None) -> bool:
        """Log ``msg % args`` (cut to MAX_LINE_CHARS; with ``exc``'s traceback, each line cut)
        unless one was logged within the interval; True when written."""
        suppressed = self._throttle.admit()
        if suppressed is None:
            return False
        text = short(msg % args if args else msg)
        if suppressed:
            text += f" ({suppressed} similar messages suppressed)"
        if exc is not None:
            text += "\n" + short_traceback(exc)
        self.logger.log(self.level, "%s", text)
        return True


class RateLimitFilter(logging.Filter):
    """A filter for a library's logger that lets one record through per ``interval`` seconds.

    For loggers tuplemesh does not call itself: gRPC logs a traceback for every request it
    cannot decode, which a hostile client could turn into a flood. Those requests are counted
    (``tuplemesh_rpc_errors_total``); the log keeps a sample and says how many it held back.
    """

    def __init__(self, interval: float) -> None:
        super().__init__()
        self._throttle = _Throttle(interval)

    def filter(self, record: logging.LogRecord) -> bool:
        suppressed = self._throttle.admit()
        if suppressed is None:
            return False
        text = short(record.getMessage())
        if suppressed:
            text += f" ({suppressed} similar messages suppressed)"
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:  # the traceback's own lines may hold the whole request
            text += "\n" + short_traceback(exc)
            record.exc_info = None
            record.exc_text = None
        record.msg, record.args = text, None
        return True
