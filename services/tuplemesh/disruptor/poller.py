"""`EventPoller`: non-blocking consumption for a thread that has other work (a spout's loop)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuplemesh.disruptor.ring_buffer import RingBuffer
from tuplemesh.disruptor.sequence import Sequence

__all__ = ["EventPoller"]


class EventPoller:
    """Hands every published, unread event to a callback and returns; never waits.

    Add ``sequence`` to the ring's gating sequences. One consumer thread only.
    """

    def __init__(self, ring: RingBuffer[Any], release_slots: bool = False) -> None:
        """``release_slots``: clear each slot after handling it (see BatchEventProcessor)."""
        self.ring = ring
        self.sequence = Sequence()
        self.release_slots = release_slots

    def rest(self, timeout: float) -> None:
        """Wait up to ``timeout`` for an event this poller has not handled yet (returns at once
        when one is there; a publish wakes it where the ring's wait strategy parks consumers)."""
        sequencer = self.ring.sequencer
        sequencer.wait_strategy.park(self.sequence.value + 1, sequencer.cursor, timeout)

    def poll(self, on_event: Callable[[Any, int, bool], None]) -> int:
        """Process what is available now; returns how many events were handled."""
        sequencer = self.ring.sequencer
        next_seq = self.sequence.value + 1
        cursor = sequencer.cursor.value
        if cursor < next_seq:
            return 0
        available = sequencer.highest_published(next_seq, cursor)
        if available < next_seq:
            return 0
        entries = self.ring.entries
        mask = self.ring.buffer_size - 1
        try:
            for seq in range(next_seq, available + 1):
                event = entries[seq & mask]
                if self.release_slots:
                    entries[seq & mask] = None
                on_event(event, seq, seq == available)
        finally:
            self.sequence.value = seq
            if sequencer.room_waiters:  # producers parked on a full ring: room now
                sequencer.wake_producers()
        return available - next_seq + 1
