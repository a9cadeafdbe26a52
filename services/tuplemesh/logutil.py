"""Rate-limited logging for warnings that can fire once per tuple."""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["RateLimitedLog"]


class RateLimitedLog:
    """Logs at most once per ``interval`` seconds; the lines held back are counted in the next one.

    Thread-safe.
    """

    def __init__(self, logger: logging.Logger, interval: float, level: int = logging.WARNING) -> None:
        self.logger = logger
        self.interval = interval
        self.level = level
        self._lock = threading.Lock()
        self._last = -float("inf")
        self._suppressed = 0

    def log(self, msg: str, *args: object) -> bool:
        """Log ``msg % args`` unless one was logged within the interval; True when written."""
        now = time.monotonic()
        with self._lock:
            if now - self._last < self.interval:
                self._suppressed += 1
                return False
            suppressed, self._suppressed = self._suppressed, 0
            self._last = now
        if suppressed:
            self.logger.log(self.level, msg + " (%d similar messages suppressed)", *args, suppressed)
        else:
            self.logger.log(self.level, msg, *args)
        return True
