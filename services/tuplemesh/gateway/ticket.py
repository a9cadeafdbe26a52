"""`PublishTicket`: one Publish request's rows on their way through the topology, and their outcome.

The Gateway answers a Publish request only when its ticket is settled: ``held`` (every row's
tuple tree completed, or with acking off every row emitted) or ``failed`` (some row's tree failed
or timed out). A retry of a failed request publishes only the rows that did not complete, so a
producer that retries until OK gets each row's effect once.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

__all__ = ["PublishTicket"]

_OPEN, _ACKED, _FAILED = 0, 1, 2


class PublishTicket:
    """The per-row outcome of one request (rows by their index in it). Thread-safe: the spout's
    executor settles rows, the Gateway's threads wait."""

    __slots__ = ("_cond", "_open", "_state", "failures", "indices")

    def __init__(self, rows: int, already_acked: bytes | None = None) -> None:
        #: the rows this attempt publishes: every row the earlier attempts did not complete
        self.indices: Sequence[int]
        if already_acked is None:  # a first attempt: every row (a range: no Python step per row)
            self._state = bytearray(rows)
            self.indices = range(rows)
        else:
            self._state = bytearray(already_acked)
            self.indices = [i for i, s in enumerate(self._state) if s == _OPEN]
        self._open = len(self.indices)
        self.failures = 0
        self._cond = threading.Condition()

    def retry(self) -> PublishTicket:
        """A ticket for publishing this request again: its acked rows stay acked, the rest open."""
        with self._cond:
            return PublishTicket(len(self._state), bytes(s if s == _ACKED else _OPEN for s in self._state))

    def ack(self, index: int) -> None:
        """Row ``index`` is held (its tree completed). Any thread."""
        self._settle(index, _ACKED)

    def fail(self, index: int) -> None:
        """Row ``index`` failed or timed out in the topology, or was never emitted. Any thread."""
        self._settle(index, _FAILED)

    def ack_many(self, indices: Sequence[int]) -> None:
        """Rows ``indices`` are held (their batch's tree completed), in one step. Any thread."""
        self._settle_many(indices, _ACKED)

    def fail_many(self, indices: Sequence[int]) -> None:
        """Rows ``indices`` failed or timed out (their batch's tree failed). Any thread."""
        self._settle_many(indices, _FAILED)

    def fail_open(self) -> None:
        """Every row still open failed (its rows could not be queued). Any thread."""
        with self._cond:
            for index, state in enumerate(self._state):
                if state == _OPEN:
                    self._state[index] = _FAILED
                    self.failures += 1
            self._open = 0
            self._cond.notify_all()

    def _settle(self, index: int, outcome: int) -> None:
        self._settle_many((index,), outcome)

    def _settle_many(self, indices: Sequence[int], outcome: int) -> None:
        with self._cond:
            state = self._state
            settled = 0
            if indices.__class__ is range and indices.step == 1:
                low, high = indices.start, indices.stop
                if state.count(_OPEN, low, high) == high - low:  # every one open: in one step
                    state[low:high] = bytes((outcome,)) * (high - low)
                    settled = high - low
                    indices = ()
            for index in indices:
                # a late verdict (an ack after a timeout failed the row) changes nothing
                if state[index] == _OPEN:
                    state[index] = outcome
                    settled += 1
            if not settled:
                return
            if outcome == _FAILED:
                self.failures += settled
            self._open -= settled
            if not self._open:
                self._cond.notify_all()

    def wait(self, timeout: float) -> bool:
        """True once every row is settled (held or failed); False after ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._open, timeout)

    @property
    def size(self) -> int:
        """Rows in the request."""
        return len(self._state)

    @property
    def settled(self) -> bool:
        return not self._open

    @property
    def held(self) -> bool:
        """Every row is acked: the request may be acknowledged to its producer."""
        return not self._open and not self.failures
