"""Sequencers: claim slots in a ring, publish them, and gate producers on the slowest consumer.

``SingleProducerSequencer`` is for one producing thread and does no locking at all.
``MultiProducerSequencer`` serialises only the claim (a few attribute reads under a lock, never a
wait while holding it) and marks each published slot in an availability array, so a consumer sees
exactly the contiguous published prefix even when producers publish out of claim order.
"""

from __future__ import annotations

import threading
import time

from tuplemesh.disruptor.sequence import Sequence, minimum_sequence
from tuplemesh.disruptor.wait_strategies import WaitStrategy
from tuplemesh.errors import AlertError, InsufficientCapacityError

__all__ = ["MultiProducerSequencer", "Sequencer", "SingleProducerSequencer"]


def _check_power_of_two(buffer_size: int) -> None:
    if buffer_size < 1 or buffer_size & (buffer_size - 1):
        raise ValueError(f"buffer size must be a power of two >= 1, got {buffer_size!r}")


#: Claims that find no room give the interpreter lock away this many times before they park.
ROOM_YIELDS = 50
#: Longest a parked producer sleeps before it looks again: a consumer that frees slots wakes it
#: at once (`Sequencer.wake_producers`); this bounds the wait when room comes another way (the
#: queue-time ``limit`` rising, a gating sequence moved by hand).
ROOM_WAIT = 0.001


class Sequencer:
    """Shared state and contract of both sequencers (LMAX's AbstractSequencer)."""

    def __init__(self, buffer_size: int, wait_strategy: WaitStrategy) -> None:
        _check_power_of_two(buffer_size)
        self.buffer_size = buffer_size
        #: the slots producers may fill ahead of the slowest consumer, at most ``buffer_size``:
        #: a consumer that measures its own speed lowers it so what waits in the ring stays
        #: within a time (see `tuplemesh.worker.debloat`); any thread may set it at any time
        self.limit = buffer_size
        self.wait_strategy = wait_strategy
        self.cursor = Sequence()
        self.gating_sequences: tuple[Sequence, ...] = ()
        self._alerted = False
        #: Claims that waited for room (the ring full, or filled to its ``limit``), and their
        #: time in all: how long producers were held back here. A wait is counted when it
        #: starts and its time added as it goes, so a producer blocked for long shows at once.
        #: Only the waiting path touches them.
        self.producer_waits = 0
        self.producer_wait_seconds = 0.0
        #: Producers parked for room right now; a consumer that moves on wakes them (it reads
        #: this, one attribute, after each batch, and takes the lock only when it is not 0).
        self.room_waiters = 0
        #: how long a parked producer sleeps at most before it looks again
        self.room_wait = ROOM_WAIT
        self._room = threading.Condition(threading.Lock())

    # -- gating ---------------------------------------------------------------------------------
    def add_gating_sequences(self, *sequences: Sequence) -> None:
        """Make producers wait for ``sequences`` too; they start at the cursor. Setup time only."""
        for seq in sequences:
            seq.value = self.cursor.value
        self.gating_sequences = self.gating_sequences + tuple(sequences)

    def remove_gating_sequence(self, sequence: Sequence) -> bool:
        """Stop gating on ``sequence``; True when it was present. Setup time only."""
        kept = tuple(s for s in self.gating_sequences if s is not sequence)
        removed = len(kept) != len(self.gating_sequences)
        self.gating_sequences = kept
        return removed

    def minimum_gating_sequence(self) -> int:
        """Slowest consumer's position (the cursor when nothing gates). Any thread."""
        return minimum_sequence(self.gating_sequences, self.cursor.value)

    # -- waiting for room -----------------------------------------------------------------------
    def _await_room(self, attempt: int, n: int) -> None:
        """Back off while ``n`` slots cannot be claimed. Never spin holding the GIL: the consumer
        needs it. First yields; then park until a consumer moves on (`wake_producers`), at most
        ``room_wait``. Polling in naps instead woke each waiting producer thousands of times a
        second (each wake-up takes the GIL from the threads doing the work) and still found
        room late: a nap of 0.5 ms wakes up to milliseconds late on a loaded machine, while the
        consumer has emptied the ring and parked. ``room_waiters`` is raised before the last
        look at the ring, so a consumer that moved on after that look sees it and wakes us."""
        if attempt < ROOM_YIELDS:
            time.sleep(0)
            return
        room = self._room
        with room:
            self.room_waiters += 1
            try:
                if not self._alerted and not self.has_available_capacity(n):
                    room.wait(self.room_wait)
            finally:
                self.room_waiters -= 1

    def wake_producers(self) -> None:
        """Wake the producers parked for room: a consumer calls it after moving its sequence on,
        when ``room_waiters`` is not 0. Any thread."""
        with self._room:
            self._room.notify_all()

    def has_available_capacity(self, n: int) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- producer alert (halt) ------------------------------------------------------------------
    def alert(self) -> None:
        """Make producers blocked on a full ring (and later claims) raise AlertError."""
        self._alerted = True
        self.wake_producers()

    @property
    def alerted(self) -> bool:
        """Whether ``alert`` was called (and not cleared): the ring is halted. Any thread."""
        return self._alerted

    def clear_alert(self) -> None:
        """Allow claims again after ``alert``."""
        self._alerted = False

    def _check_alert(self) -> None:
        if self._alerted:
            raise AlertError("ring buffer halted while a producer waited for capacity")

    def _check_claim_size(self, n: int) -> None:
        if n < 1 or n > self.buffer_size:
            raise ValueError(f"claim size must be in 1..{self.buffer_size}, got {n!r}")

    def _capacity(self, n: int) -> int:
        """The slots a claim of ``n`` may fill ahead of the slowest consumer: ``limit``, or the
        whole ring for a claim larger than the limit (else it could never be granted)."""
        limit = self.limit
        return limit if n <= limit else self.buffer_size

    # -- contract -------------------------------------------------------------------------------
    def next(self, n: int = 1) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def try_next(self, n: int = 1) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def publish(self, sequence: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def publish_range(self, low: int, high: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def is_available(self, sequence: int) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def highest_published(self, low: int, available: int) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def remaining_capacity(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError


class SingleProducerSequencer(Sequencer):
    """Sequencer for exactly one producing thread. Not safe with several producers."""

    def __init__(self, buffer_size: int, wait_strategy: WaitStrategy) -> None:
        super().__init__(buffer_size, wait_strategy)
        self._next_value = -1  # last claimed
        self._cached_gating = -1  # last seen slowest consumer

    def has_available_capacity(self, n: int) -> bool:
        """True when ``n`` slots can be claimed without waiting. Producer thread only."""
        wrap_point = self._next_value + n - self._capacity(n)
        if wrap_point > self._cached_gating:
            self._cached_gating = minimum_sequence(self.gating_sequences, self._next_value)
            return wrap_point <= self._cached_gating
        return True

    def next(self, n: int = 1) -> int:
        """Claim ``n`` slots, blocking while the ring is full; returns the highest. Producer only."""
        if n != 1:
            self._check_claim_size(n)
        next_seq = self._next_value + n
        wrap_point = next_seq - self._capacity(n)
        if wrap_point > self._cached_gating:
            attempt = 0
            last = 0.0
            gating = self.gating_sequences
            while True:
                if attempt:  # the time so far, so that a producer blocked for long shows it
                    now = time.monotonic()
                    self.producer_wait_seconds += now - last
                    last = now
                self._check_alert()
                wrap_point = next_seq - self._capacity(n)  # the limit may rise meanwhile
                slowest = minimum_sequence(gating, self._next_value)
                if wrap_point <= slowest:
                    self._cached_gating = slowest
                    break
                if attempt == 0:
                    last = time.monotonic()
                    self.producer_waits += 1
                self._await_room(attempt, n)
                attempt += 1
        self._next_value = next_seq
        return next_seq

    def try_next(self, n: int = 1) -> int:
        """Claim ``n`` slots or raise InsufficientCapacityError at once. Producer thread only."""
        self._check_claim_size(n)
        self._check_alert()
        if not self.has_available_capacity(n):
            raise InsufficientCapacityError(f"ring has {self.remaining_capacity()} free, asked {n}")
        self._next_value += n
        return self._next_value

    def publish(self, sequence: int) -> None:
        """Make everything up to ``sequence`` visible to consumers. Producer thread only."""
        self.cursor.value = sequence
        if self.wait_strategy.waiters:
            self.wait_strategy.signal_all_when_blocking()

    def publish_range(self, low: int, high: int) -> None:
        """Publish ``low..high`` (inclusive). Producer thread only."""
        self.publish(high)

    def is_available(self, sequence: int) -> bool:
        """True when ``sequence`` is published and not yet overwritten. Any thread."""
        cursor = self.cursor.value
        return cursor - self.buffer_size < sequence <= cursor

    def highest_published(self, low: int, available: int) -> int:
        """Highest published sequence in ``low..available``; one producer publishes in order."""
        return available

    def remaining_capacity(self) -> int:
        """Free slots right now. Any thread (a snapshot)."""
        produced = self._next_value
        consumed = minimum_sequence(self.gating_sequences, produced)
        return self.buffer_size - (produced - consumed)


class MultiProducerSequencer(Sequencer):
    """Sequencer safe for any number of producing threads."""

    def __init__(self, buffer_size: int, wait_strategy: WaitStrategy) -> None:
        super().__init__(buffer_size, wait_strategy)
        self._mask = buffer_size - 1
        self._claim_lock = threading.Lock()
        self._cached_gating = -1
        # Slot i holds the sequence last published into it; -1 means never.
        self._published = [-1] * buffer_size

    def _claim(self, n: int, block: bool) -> int:
        attempt = 0
        last = 0.0
        lock = self._claim_lock
        while True:
            with lock:
                if attempt:  # the time so far (under the lock: producers waiting at once all count)
                    now = time.monotonic()
                    self.producer_wait_seconds += now - last
                    last = now
                self._check_alert()
                current = self.cursor.value
                next_seq = current + n
                wrap_point = next_seq - self._capacity(n)
                if wrap_point > self._cached_gating:
                    self._cached_gating = minimum_sequence(self.gating_sequences, current)
                if wrap_point <= self._cached_gating:
                    self.cursor.value = next_seq
                    return next_seq
                if block and attempt == 0:
                    last = time.monotonic()
                    self.producer_waits += 1
            if not block:
                raise InsufficientCapacityError(f"ring has {self.remaining_capacity()} free, asked {n}")
            self._await_room(attempt, n)
            attempt += 1

    def next(self, n: int = 1) -> int:
        """Claim ``n`` contiguous slots, blocking while full; returns the highest. Any thread."""
        self._check_claim_size(n)
        return self._claim(n, block=True)

    def try_next(self, n: int = 1) -> int:
        """Claim ``n`` slots or raise InsufficientCapacityError at once. Any thread."""
        self._check_claim_size(n)
        return self._claim(n, block=False)

    def has_available_capacity(self, n: int) -> bool:
        """True when ``n`` slots could be claimed now (a snapshot). Any thread."""
        current = self.cursor.value
        return current + n - self._capacity(n) <= minimum_sequence(self.gating_sequences, current)

    def publish(self, sequence: int) -> None:
        """Mark ``sequence`` published. The claiming thread only."""
        self._published[sequence & self._mask] = sequence
        if self.wait_strategy.waiters:
            self.wait_strategy.signal_all_when_blocking()

    def publish_range(self, low: int, high: int) -> None:
        """Mark ``low..high`` (inclusive) published. The claiming thread only."""
        mask = self._mask
        start, end = low & mask, high & mask
        if start <= end and high - low < self.buffer_size:
            self._published[start : end + 1] = range(low, high + 1)
        else:
            published = self._published
            for seq in range(low, high + 1):
                published[seq & mask] = seq
        if self.wait_strategy.waiters:
            self.wait_strategy.signal_all_when_blocking()

    def is_available(self, sequence: int) -> bool:
        """True when ``sequence`` itself is published (not merely claimed). Any thread."""
        return self._published[sequence & self._mask] == sequence

    def highest_published(self, low: int, available: int) -> int:
        """End of the contiguous published run starting at ``low`` (``low - 1`` if none)."""
        mask = self._mask
        published = self._published
        start, end = low & mask, available & mask
        contiguous_in_array = start <= end and available - low < self.buffer_size
        if contiguous_in_array and published[start : end + 1] == list(range(low, available + 1)):
            return available
        for seq in range(low, available + 1):
            if published[seq & mask] != seq:
                return seq - 1
        return available

    def remaining_capacity(self) -> int:
        """Free slots right now. Any thread (a snapshot)."""
        produced = self.cursor.value
        consumed = minimum_sequence(self.gating_sequences, produced)
        return self.buffer_size - (produced - consumed)
