"""`SequenceBarrier`: where a consumer waits for producers and for the consumers ahead of it."""

from __future__ import annotations

import time

from tuplemesh.disruptor.sequence import Sequence
from tuplemesh.disruptor.sequencer import Sequencer
from tuplemesh.errors import AlertError

__all__ = ["SequenceBarrier"]


class SequenceBarrier:
    """Waits until a sequence is published and every dependent consumer has passed it.

    One consumer thread waits; any thread may ``alert``.
    """

    def __init__(self, sequencer: Sequencer, dependents: tuple[Sequence, ...] = ()) -> None:
        self.sequencer = sequencer
        self.wait_strategy = sequencer.wait_strategy
        self.cursor = sequencer.cursor
        self.dependents = dependents
        self._alerted = False

    def wait_for(self, sequence: int) -> int:
        """Highest sequence >= ``sequence`` safe to read. Raises AlertError / WaitTimeoutError."""
        if self._alerted:
            raise AlertError("sequence barrier alerted")
        while True:
            available = self.wait_strategy.wait_for(sequence, self.cursor, self.dependents, self)
            if available < sequence:
                return available
            highest = self.sequencer.highest_published(sequence, available)
            if highest >= sequence:
                return highest
            # Claimed but not yet published by a multi-producer: give the GIL to the publisher.
            self.check_alert()
            time.sleep(0)

    def alert(self) -> None:
        """Wake the waiting consumer with AlertError. Any thread."""
        self._alerted = True
        self.wait_strategy.signal_all_when_blocking()

    def clear_alert(self) -> None:
        """Allow waiting again. Any thread."""
        self._alerted = False

    @property
    def alerted(self) -> bool:
        return self._alerted

    def check_alert(self) -> None:
        """Raise AlertError if alerted. Waiting thread."""
        if self._alerted:
            raise AlertError("sequence barrier alerted")
