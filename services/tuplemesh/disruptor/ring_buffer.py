"""`RingBuffer`: preallocated, power-of-two slots addressed by sequence; no I/O, no threads."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence as SeqOf
from typing import Generic, TypeVar

from tuplemesh.disruptor.barrier import SequenceBarrier
from tuplemesh.disruptor.sequence import Sequence
from tuplemesh.disruptor.sequencer import MultiProducerSequencer, Sequencer, SingleProducerSequencer
from tuplemesh.disruptor.wait_strategies import BlockingWaitStrategy, WaitStrategy

__all__ = ["RingBuffer"]

T = TypeVar("T")


class RingBuffer(Generic[T]):
    """Bounded ring of slots. Producers claim, fill and publish; consumers read behind barriers.

    Slots are created once by ``factory``. A slot either holds a mutable event that producers
    fill in place (LMAX style) or is replaced wholesale with ``put``/``put_many`` (the runtime's
    ring of batches: the slot then holds a reference to an immutable batch).
    """

    def __init__(self, sequencer: Sequencer, factory: Callable[[], T] | None = None) -> None:
        self.sequencer = sequencer
        self.buffer_size = sequencer.buffer_size
        self._mask = self.buffer_size - 1
        make = factory if factory is not None else (lambda: None)
        self.entries: list[T] = [make() for _ in range(self.buffer_size)]  # type: ignore[misc]
        # ``put`` inlines this sequencer's claim and publish (see there); None for multi-producer
        self._single_producer = sequencer if isinstance(sequencer, SingleProducerSequencer) else None

    @classmethod
    def single_producer(
        cls,
        buffer_size: int,
        factory: Callable[[], T] | None = None,
        wait_strategy: WaitStrategy | None = None,
    ) -> RingBuffer[T]:
        """Ring for one producing thread."""
        return cls(SingleProducerSequencer(buffer_size, wait_strategy or BlockingWaitStrategy()), factory)

    @classmethod
    def multi_producer(
        cls,
        buffer_size: int,
        factory: Callable[[], T] | None = None,
        wait_strategy: WaitStrategy | None = None,
    ) -> RingBuffer[T]:
        """Ring safe for many producing threads."""
        return cls(MultiProducerSequencer(buffer_size, wait_strategy or BlockingWaitStrategy()), factory)

    # -- reading --------------------------------------------------------------------------------
    def get(self, sequence: int) -> T:
        """Slot for ``sequence``. Consumers: only at or below the barrier's answer."""
        return self.entries[sequence & self._mask]

    @property
    def cursor(self) -> int:
        """Highest claimed (multi-producer) or published (single-producer) sequence."""
        return self.sequencer.cursor.value

    def new_barrier(self, *dependents: Sequence) -> SequenceBarrier:
        """Barrier for a consumer that must stay behind ``dependents`` (and the producers)."""
        return SequenceBarrier(self.sequencer, tuple(dependents))

    def add_gating_sequences(self, *sequences: Sequence) -> None:
        """Never let producers wrap past ``sequences`` (the last consumers). Setup time only."""
        self.sequencer.add_gating_sequences(*sequences)

    def remove_gating_sequence(self, sequence: Sequence) -> bool:
        return self.sequencer.remove_gating_sequence(sequence)

    # -- claiming and publishing ----------------------------------------------------------------
    def next(self, n: int = 1) -> int:
        """Claim ``n`` slots (blocks while full); returns the highest claimed sequence."""
        return self.sequencer.next(n)

    def try_next(self, n: int = 1) -> int:
        """Claim ``n`` slots or raise InsufficientCapacityError."""
        return self.sequencer.try_next(n)

    def publish(self, sequence: int) -> None:
        self.sequencer.publish(sequence)

    def publish_range(self, low: int, high: int) -> None:
        self.sequencer.publish_range(low, high)

    def remaining_capacity(self) -> int:
        return self.sequencer.remaining_capacity()

    def put(self, item: T) -> int:
        """Claim one slot, store ``item`` in it, publish; blocks while full. Returns its sequence."""
        single = self._single_producer
        if single is not None:
            # The sequencer's claim and publish inlined: this is the per-item hot path, and three
            # method calls per item cost more than the work itself.
            seq = single._next_value + 1
            if seq - single.limit > single._cached_gating:  # the limit: a queue-time bound
                seq = single.next()
            else:
                single._next_value = seq
            self.entries[seq & self._mask] = item
            single.cursor.value = seq
            wait_strategy = single.wait_strategy
            if wait_strategy.waiters:
                wait_strategy.signal_all_when_blocking()
            return seq
        sequencer = self.sequencer
        seq = sequencer.next()
        self.entries[seq & self._mask] = item
        sequencer.publish(seq)
        return seq

    def try_put(self, item: T) -> int:
        """Like ``put`` but raises InsufficientCapacityError instead of blocking."""
        sequencer = self.sequencer
        seq = sequencer.try_next()
        self.entries[seq & self._mask] = item
        sequencer.publish(seq)
        return seq

    def put_many(self, items: SeqOf[T]) -> int:
        """Claim, fill and publish ``len(items)`` slots as one range. Returns the highest sequence.

        Arguments are checked before anything is claimed, so a bad call leaves the ring untouched.
        """
        n = len(items)
        if n < 1 or n > self.buffer_size:
            raise ValueError(f"batch size must be in 1..{self.buffer_size}, got {n}")
        sequencer = self.sequencer
        high = sequencer.next(n)
        low = high - n + 1
        mask = self._mask
        entries = self.entries
        start = low & mask
        if start + n <= self.buffer_size:
            entries[start : start + n] = items
        else:
            for offset, item in enumerate(items):
                entries[(low + offset) & mask] = item
        sequencer.publish_range(low, high)
        return high

    def publish_event(self, translator: Callable[..., None], *args: object) -> int:
        """Claim one slot and let ``translator(event, sequence, *args)`` fill it in place."""
        seq = self.sequencer.next()
        try:
            translator(self.entries[seq & self._mask], seq, *args)
        finally:
            self.sequencer.publish(seq)  # a claimed slot must be published, or consumers stall
        return seq

    def publish_events(
        self,
        translator: Callable[..., None],
        args: SeqOf[SeqOf[object]],
        batch_starts_at: int = 0,
        batch_size: int | None = None,
    ) -> int:
        """Fill ``batch_size`` slots from ``args[batch_starts_at:...]`` in one claim.

        Like LMAX, every argument is validated before claiming: a bad call leaves the ring as it was.
        """
        size = len(args) - batch_starts_at if batch_size is None else batch_size
        if batch_starts_at < 0:
            raise ValueError(f"batch_starts_at must be >= 0, got {batch_starts_at}")
        if size < 1 or size > self.buffer_size:
            raise ValueError(f"batch_size must be in 1..{self.buffer_size}, got {size}")
        if batch_starts_at + size > len(args):
            raise ValueError(
                f"batch_starts_at {batch_starts_at} + batch_size {size} exceeds {len(args)} arguments"
            )
        high = self.sequencer.next(size)
        low = high - size + 1
        try:
            for offset in range(size):
                seq = low + offset
                translator(self.entries[seq & self._mask], seq, *args[batch_starts_at + offset])
        finally:
            self.sequencer.publish_range(low, high)
        return high
