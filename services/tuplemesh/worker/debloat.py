"""`QueueTimeLimit`: keeps what waits in a ring within a time, not a slot count.

A ring's slots say nothing about time: 1024 slots of 1000-tuple batches in front of a bolt that
takes 3 us a tuple is 3 s of backlog, and every checkpoint barrier, tick and latency-sensitive
tuple waits behind all of it. The ring's consumer knows how long it takes per slot; from that
it sets the ring's ``limit`` (the slots producers may fill ahead of it) so that the slots
allowed drain in ``target`` seconds. Producers then wait for room sooner: backpressure reaches
the spouts after ``target`` seconds of queue, not after the ring is full (Flink calls this
buffer debloating; its in-flight data per channel follows a target time the same way).

A consumer that is held up downstream (its own publish waits for room) takes longer per slot,
so its ring's limit drops too, and the time bound carries upstream hop by hop.
"""

from __future__ import annotations

from tuplemesh.disruptor.sequencer import Sequencer

__all__ = ["MIN_SLOTS", "QueueTimeLimit"]

#: never fewer slots than this: a producer can publish while the consumer works on the last one
MIN_SLOTS = 4
#: A measurement covers at least this many slots, or a quarter of the target time of work: a
#: consumer that blocks on one slot in a hundred (a transfer thread waiting for its send window)
#: takes the mean of all of them, where an average moved slot by slot swung between the two.
SAMPLE_SLOTS = 64
#: weight of the newest measurement in the moving average of the time per slot
_WEIGHT = 0.3


class QueueTimeLimit:
    """Sets ``sequencer.limit`` to the slots its consumer drains in ``target_seconds``.

    ``observe`` is called by the consumer's thread only, after each slot it handled; the
    producers read ``limit`` lock-free (a stale value is harmless: it is a bound, not a count).
    """

    def __init__(self, sequencer: Sequencer, target_seconds: float) -> None:
        self.sequencer = sequencer
        self.target = target_seconds
        self.maximum = sequencer.buffer_size
        self.minimum = min(MIN_SLOTS, self.maximum)
        #: moving average of the seconds the consumer spends per slot (0: nothing measured yet)
        self.seconds_per_slot = 0.0
        self._sample_seconds = 0.0
        self._sample_slots = 0

    def observe(self, busy_seconds: float) -> None:
        """The consumer spent ``busy_seconds`` on one slot: update the average and the limit."""
        average = self.seconds_per_slot
        if average == 0.0:  # the first slot sets the limit at once
            self._set(busy_seconds)
            return
        self._sample_seconds += busy_seconds
        self._sample_slots += 1
        if self._sample_slots < SAMPLE_SLOTS and self._sample_seconds < self.target / 4:
            return
        measured = self._sample_seconds / self._sample_slots
        self._sample_seconds, self._sample_slots = 0.0, 0
        self._set(average + _WEIGHT * (measured - average))

    def _set(self, seconds_per_slot: float) -> None:
        self.seconds_per_slot = seconds_per_slot
        slots = self.maximum if seconds_per_slot <= 0.0 else int(self.target / seconds_per_slot)
        if slots < self.minimum:
            slots = self.minimum
        elif slots > self.maximum:
            slots = self.maximum
        self.sequencer.limit = slots
