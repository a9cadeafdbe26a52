"""Rate-limited logging for warnings that can fire once per tuple."""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["RateLimitFilter", "RateLimitedLog"]


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

    def log(self, msg: str, *args: object) -> bool:
        """Log ``msg % args`` unless one was logged within the interval; True when written."""
        suppressed = self._throttle.admit()
        if suppressed is None:
            return False
        if suppressed:
            self.logger.log(self.level, msg + " (%d similar messages suppressed)", *args, suppressed)
        else:
            self.logger.log(self.level, msg, *args)
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
        if suppressed:
            record.msg = f"{record.msg} ({suppressed} similar messages suppressed)"
        return True
