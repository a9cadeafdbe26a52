"""`ByteBudget`: a ceiling on the bytes a worker holds on their way out to other workers.

Executors take bytes from it before they publish a batch of serialized tuples into the transfer
ring (as packed for the wire: payloads plus their framing, at most). The bytes stay held until
the peer has them: a connection's send window holds each chunk it takes (``hold``: the transfer
thread hands a chunk over and gives back the executors' share for it, which is never less) and
gives its bytes back when the peer acknowledges it. So one ceiling bounds the ring, the transfer
thread's merge buffers and every send window together. Slots alone bound the ring in batches,
not bytes: 1024 batches of a hundred 1 MiB tuples is 100 GiB; and windows of
``messaging.window.bytes`` each would add that much again per peer.

Executors are the only ones who wait. A window never waits for room here: the transfer thread
is what frees the ring, and a window that made it wait for room the ring itself held could never
be served. Past the ceiling, executors wait until acknowledgements bring the bytes back down. A
batch is always taken when nothing is held (in the ring or in any window), so the bytes held
pass the ceiling by at most one batch. A peer that acknowledges nothing keeps what its window
holds, and every executor sending to other workers waits once that reaches the ceiling (as
they would once the single transfer thread waited on that peer's full window).
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

    def hold(self, nbytes: int) -> None:
        """Take ``nbytes`` without waiting: a batch already in the worker's hands moves to a send
        window (its executor's bytes are given back once it is there)."""
        if not nbytes:
            return
        with self._cond:
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
