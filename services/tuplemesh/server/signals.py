"""SIGTERM/SIGINT handling of a worker process: the first asks for a drain, a second exits at once."""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Any

__all__ = ["TerminationSignals"]

log = logging.getLogger(__name__)


class TerminationSignals:
    """Installs the handlers; ``requested`` is set by the first signal. Main thread only (Python's rule)."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self._also: list[threading.Event] = []
        self._count = 0

    def also_set(self, event: threading.Event) -> None:
        """Set ``event`` too when a signal comes (at once if one came already): the stop event of
        each worker that lives in this process, one after another across rescales."""
        self._also.append(event)
        if self.requested.is_set():
            event.set()

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._count += 1
        if self._count > 1:
            # An operator who asks twice does not want to wait for the drain.
            log.warning("second %s: exiting without draining", signal.Signals(signum).name)
            os._exit(1)
        self.requested.set()
        for event in self._also:
            event.set()
