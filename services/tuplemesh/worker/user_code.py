"""`UserCode`: how an executor calls its components' own code (``open``, ``prepare``, ``ack``,
``fail``, ``report``, ``cleanup``, ``close``, and what a bolt raises on its input): each
exception counted, the first kept with where it was raised (for ``tuplemesh run`` to name and
the status to show), and a rate-limited log line. The executor's loop goes on in every case.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from tuplemesh.core.stats import ErrorSnapshot
from tuplemesh.logutil import RateLimitedLog

__all__ = ["UserCode"]

log = logging.getLogger("tuplemesh.worker.executor")  # where these lines were always written

#: The longest exception message kept (a message may hold a whole, huge, tuple).
MESSAGE_LIMIT = 500


class UserCode:
    """One executor's calls into its components' code. ``count`` is called once per exception
    (a spout executor and a bolt executor count theirs apart). Executor thread only."""

    def __init__(self, component: str, worker: int, count: Callable[[], None], log_interval: float) -> None:
        self._component = component
        self._worker = worker
        self._count = count
        #: The first exception user code raised here (set once)
        self.first_error: ErrorSnapshot | None = None
        self.errors_log = RateLimitedLog(log, log_interval, logging.ERROR)

    def call(self, what: str, task: int, fn: Any, *args: Any) -> bool:
        """``fn(*args)``, the method ``what`` of ``task``; False when it raised (counted, kept,
        logged)."""
        try:
            fn(*args)
            return True
        except Exception as exc:
            self.record_error(what, task, exc)
            # rate-limited and cut: an exception's message may hold a whole (huge) tuple, and a
            # bolt failing on every tuple would otherwise write a traceback per tuple
            self.errors_log.log("%s %s task %d failed: %r", what, self._component, task, exc, exc=exc)
            return False

    def record_error(self, method: str, task: int, exc: BaseException) -> None:
        """Count one exception raised by user code in ``method``; keep the first one."""
        self._count()
        if self.first_error is None:
            message = " ".join(str(exc).split())  # one line: a message may hold newlines
            if len(message) > MESSAGE_LIMIT:
                message = message[: MESSAGE_LIMIT - 3] + "..."
            self.first_error = ErrorSnapshot(
                component=self._component,
                task=task,
                method=method,
                type=type(exc).__name__,
                message=message,
                worker=self._worker,
                at=time.time(),
            )

    def reports(self, components: Mapping[int, Any]) -> dict[int, Any]:
        """Each task's ``report()``; one that raised is counted and left out."""
        out: dict[int, Any] = {}
        for task, component in components.items():
            try:
                out[task] = component.report()
            except Exception as exc:
                self.record_error("report", task, exc)
                log.error("report() of %s task %d failed: %r", self._component, task, exc)
        return out
