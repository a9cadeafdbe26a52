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
    """Installs the handlers; ``requested`` is set by the first signal. Main thread only (Python's rule).

    The handler sets no event itself: it runs in the main thread between two bytecodes, and the
    main thread spends its life in ``Event.wait`` on the very events it would set. Caught inside
    that wait's own lock, ``Event.set`` waited for the lock its thread held, for ever: a worker
    that never stopped (seen on a host loaded enough to stretch that window, 5 of 32 workers at
    one whole-mesh stop). So the handler writes a byte to a pipe, and a thread of its own sets
    the events."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self._also: list[threading.Event] = []
        self._count = 0
        self._wake: int | None = None  # the pipe's write end, once installed

    def also_set(self, event: threading.Event) -> None:
        """Set ``event`` too when a signal comes (at once if one came already): the stop event of
        each worker that lives in this process, one after another across rescales."""
        self._also.append(event)
        if self.requested.is_set():
            event.set()

    def install(self) -> None:
        """Install the handlers (again after a rescale: the relay thread and pipe stay)."""
        if self._wake is None:
            read, self._wake = os.pipe()
            threading.Thread(target=self._relay, args=(read,), name="signals", daemon=True).start()
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._count += 1
        if self._count > 1:
            # An operator who asks twice does not want to wait for the drain.
            log.warning("second %s: exiting without draining", signal.Signals(signum).name)
            os._exit(1)
        assert self._wake is not None  # the handler is installed with the pipe
        os.write(self._wake, b"\0")

    def _relay(self, read: int) -> None:
        while os.read(read, 1):  # a signal (the first: a second one exits the process)
            self.requested.set()
            for event in list(self._also):
                event.set()
