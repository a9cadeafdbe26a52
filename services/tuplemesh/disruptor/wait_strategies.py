"""How a consumer waits for a sequence to be published (LMAX's WaitStrategy family).

CPython note: a thread that spins holds the GIL, so the producer it waits for cannot run until
the interpreter's switch interval forces a hand-over. ``BusySpinWaitStrategy`` is therefore only
sensible with a free core and no GIL contention; ``Yielding``/``Sleeping`` give the GIL away, and
``Blocking`` parks on a condition that producers signal only while someone is parked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from collections.abc import Sequence as SeqOf

from tuplemesh.disruptor.interfaces import Alertable, WaitStrategy
from tuplemesh.disruptor.sequence import Sequence, minimum_sequence
from tuplemesh.errors import PluginError, WaitTimeoutError

__all__ = [
    "WAIT_STRATEGIES",
    "BlockingWaitStrategy",
    "BusySpinWaitStrategy",
    "SleepingWaitStrategy",
    "TimeoutBlockingWaitStrategy",
    "WaitStrategy",
    "YieldingWaitStrategy",
    "make_wait_strategy",
]


def _available(cursor: Sequence, dependents: SeqOf[Sequence]) -> int:
    if not dependents:
        return cursor.value
    return minimum_sequence(dependents, cursor.value)


def _sleep_unless_published(sequence: int, cursor: Sequence, timeout: float) -> None:
    """``park`` of a strategy that never parks: producers do not signal it, so it sleeps."""
    if cursor.value < sequence:
        time.sleep(timeout)


#: Polls between two GIL hand-overs of a busy spin. The interpreter forces a hand-over every
#: switch interval, but a compiled loop never reaches that check: the spin must give it away.
SPIN_POLLS_PER_GIL_RELEASE = 1000


class BusySpinWaitStrategy:
    """Poll without pause. Lowest latency with a dedicated core; burns CPU and the GIL."""

    waiters = 0  # never parks: producers need not signal

    def wait_for(
        self, sequence: int, cursor: Sequence, dependents: SeqOf[Sequence], barrier: Alertable
    ) -> int:
        polls = 0
        while True:
            available = _available(cursor, dependents)
            if available >= sequence:
                return available
            barrier.check_alert()
            polls += 1
            if polls == SPIN_POLLS_PER_GIL_RELEASE:
                polls = 0
                time.sleep(0)

    def signal_all_when_blocking(self) -> None:
        return None

    def park(self, sequence: int, cursor: Sequence, timeout: float) -> None:
        _sleep_unless_published(sequence, cursor, timeout)


class YieldingWaitStrategy:
    """Spin ``spin_tries`` times, then give the GIL and the core away on every poll."""

    waiters = 0  # never parks: producers need not signal

    def __init__(self, spin_tries: int = 100) -> None:
        self.spin_tries = spin_tries

    def wait_for(
        self, sequence: int, cursor: Sequence, dependents: SeqOf[Sequence], barrier: Alertable
    ) -> int:
        counter = self.spin_tries
        sleep = time.sleep
        while True:
            available = _available(cursor, dependents)
            if available >= sequence:
                return available
            barrier.check_alert()
            if counter > 0:
                counter -= 1
            else:
                sleep(0)

    def signal_all_when_blocking(self) -> None:
        return None

    def park(self, sequence: int, cursor: Sequence, timeout: float) -> None:
        _sleep_unless_published(sequence, cursor, timeout)


class SleepingWaitStrategy:
    """Spin, then yield, then sleep ``sleep_seconds`` per poll: low CPU when idle, no signalling."""

    waiters = 0  # never parks: producers need not signal

    def __init__(self, retries: int = 200, sleep_seconds: float = 0.0001) -> None:
        self.retries = retries
        self.sleep_seconds = sleep_seconds

    def wait_for(
        self, sequence: int, cursor: Sequence, dependents: SeqOf[Sequence], barrier: Alertable
    ) -> int:
        counter = self.retries
        sleep = time.sleep
        while True:
            available = _available(cursor, dependents)
            if available >= sequence:
                return available
            barrier.check_alert()
            if counter > 100:
                counter -= 1
            elif counter > 0:
                counter -= 1
                sleep(0)
            else:
                sleep(self.sleep_seconds)

    def signal_all_when_blocking(self) -> None:
        return None

    def park(self, sequence: int, cursor: Sequence, timeout: float) -> None:
        _sleep_unless_published(sequence, cursor, timeout)


class BlockingWaitStrategy:
    """Yield the GIL up to ``yield_tries`` times while the ring is busy, then park on a condition;
    producers signal only while a consumer is parked.

    The yielding phase matters in CPython when items come close together: a consumer that parks
    the moment it catches up makes the producer pay a lock + notify on nearly every publish (a
    quarter of the rate of ``python -m bench ring``'s one-item case). When they come far apart,
    as batches do into a worker's rings below full load, it is waste: each yield is a GIL
    hand-over that the busy threads pay for, and the wait ends parked anyway. So the phase adapts:
    after a wait whose yields did not see the item come, the next waits park at once, until one
    finds its item already published (the ring is busy again) and restores the yields.

    The waiter count is read by producers without the lock. That is safe under the GIL: a
    consumer increments it *before* re-checking the cursor, a producer stores the cursor *before*
    reading it, so either the producer sees the waiter or the waiter sees the new cursor.
    """

    def __init__(self, timeout_seconds: float | None = None, yield_tries: int = 5) -> None:
        self._cond = threading.Condition(threading.Lock())
        self.waiters = 0
        self.timeout_seconds = timeout_seconds
        self.yield_tries = yield_tries
        #: yields of the next wait: ``yield_tries`` while the ring is busy, 0 after yields failed
        self.yields_now = yield_tries

    def wait_for(
        self, sequence: int, cursor: Sequence, dependents: SeqOf[Sequence], barrier: Alertable
    ) -> int:
        if cursor.value >= sequence:
            self.yields_now = self.yield_tries  # published before it was asked for: busy
        else:
            tries = self.yields_now
            while cursor.value < sequence and tries > 0:
                barrier.check_alert()
                time.sleep(0)
                tries -= 1
        if cursor.value < sequence:
            self.yields_now = 0  # yielding did not pay: park at once until the ring is busy again
            deadline = None if self.timeout_seconds is None else time.monotonic() + self.timeout_seconds
            with self._cond:
                self.waiters += 1
                try:
                    while cursor.value < sequence:
                        barrier.check_alert()
                        if deadline is None:
                            self._cond.wait()
                        else:
                            remaining = deadline - time.monotonic()
                            if remaining <= 0:
                                raise WaitTimeoutError(
                                    f"no sequence >= {sequence} within {self.timeout_seconds}s"
                                )
                            self._cond.wait(remaining)
                finally:
                    self.waiters -= 1
        # The cursor is published; dependents (earlier consumers) may still lag: yield to them.
        while True:
            available = _available(cursor, dependents)
            if available >= sequence:
                return available
            barrier.check_alert()
            time.sleep(0)

    def signal_all_when_blocking(self) -> None:
        if self.waiters:
            with self._cond:
                self._cond.notify_all()

    def park(self, sequence: int, cursor: Sequence, timeout: float) -> None:
        # counted as a waiter before the cursor is read again: a producer that publishes after
        # that read sees the waiter and wakes it (the same order as ``wait_for``)
        with self._cond:
            self.waiters += 1
            try:
                if cursor.value < sequence:
                    self._cond.wait(timeout)
            finally:
                self.waiters -= 1


class TimeoutBlockingWaitStrategy(BlockingWaitStrategy):
    """Blocking, but raises WaitTimeoutError after ``timeout_seconds`` (drives ``on_timeout``)."""

    def __init__(self, timeout_seconds: float = 0.001, yield_tries: int = 5) -> None:
        if timeout_seconds <= 0:
            raise ValueError(f"timeout_seconds must be > 0, got {timeout_seconds!r}")
        super().__init__(timeout_seconds, yield_tries)


WAIT_STRATEGIES: dict[str, Callable[..., WaitStrategy]] = {
    "blocking": BlockingWaitStrategy,
    "sleeping": SleepingWaitStrategy,
    "yielding": YieldingWaitStrategy,
    "busy-spin": BusySpinWaitStrategy,
    "timeout-blocking": TimeoutBlockingWaitStrategy,
}


def make_wait_strategy(name: str, timeout_seconds: float = 0.001, yield_tries: int = 5) -> WaitStrategy:
    """Build a wait strategy from its config name (``blocking``, ``sleeping``, ...);
    ``yield_tries`` is the yielding phase of the blocking ones (the others have none)."""
    try:
        factory = WAIT_STRATEGIES[name]
    except KeyError:
        known = ", ".join(sorted(WAIT_STRATEGIES))
        raise PluginError(f"unknown wait strategy {name!r}; known: {known}") from None
    if name == "timeout-blocking":
        return factory(timeout_seconds, yield_tries)
    if name == "blocking":
        return factory(None, yield_tries)
    return factory()
