"""`ByteBudget`: a ceiling on the bytes a worker holds on their way out to other workers.

Executors take bytes from it before they publish a batch of serialized tuples into the transfer
ring, and the transfer thread gives them back once the batch is in a connection's send window
(which has its own byte bound, ``messaging.window.bytes``). Slots alone bound the ring in
batches, not bytes: 1024 batches of a hundred 1 MiB tuples is 100 GiB.
"""

from __future__ import annotations

import threading
import time

__all__ = ["ByteBudget"]


class ByteBudget:
    """Thread-safe: any number of threads ``acquire``; any thread ``release`` and ``close``."""

    def __init__(self, limit: int) -> None:
        #: the ceiling in bytes; 0: none (``acquire`` never waits)
        self.limit = limit
        self.used = 0
        #: acquisitions that had to wait, and how long they waited in all
        self.waits = 0
        self.wait_seconds = 0.0
        self._cond = threading.Condition()
        self._closed = False

    def acquire(self, nbytes: int) -> None:
        """Take ``nbytes``, first waiting while that would pass the limit. Nothing held admits
        any size, so no single batch can stall. Returns at once once ``close``d."""
        with self._cond:
            if self.limit and self.used and self.used + nbytes > self.limit and not self._closed:
                started = time.monotonic()
                while self.used and self.used + nbytes > self.limit and not self._closed:
                    self._cond.wait()
                self.waits += 1
                self.wait_seconds += time.monotonic() - started
            self.used += nbytes

    def release(self, nbytes: int) -> None:
        """Give back ``nbytes`` (the batch left the worker's hands)."""
        if not nbytes:
            return
        with self._cond:
            self.used -= nbytes
            self._cond.notify_all()

    def close(self) -> None:
        """Stop making anyone wait (the worker halts: the publish that follows is refused)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
