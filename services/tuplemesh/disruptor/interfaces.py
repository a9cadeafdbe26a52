"""What users of the disruptor implement: event and exception handlers, wait strategies.

Protocols, so an implementation needs no base class; kept out of the compiled modules because
interpreted classes cannot subclass a compiled one, and an implementation may subclass these.
"""

from __future__ import annotations

from collections.abc import Sequence as SeqOf
from typing import Any, Protocol

from tuplemesh.disruptor.sequence import Sequence

__all__ = ["Alertable", "EventHandler", "ExceptionHandler", "WaitStrategy"]


class Alertable(Protocol):
    """What a wait strategy checks between polls: the barrier it waits on."""

    def check_alert(self) -> None: ...


class WaitStrategy(Protocol):
    """Waits until ``sequence`` is available; returns the highest available sequence."""

    def wait_for(
        self, sequence: int, cursor: Sequence, dependents: SeqOf[Sequence], barrier: Alertable
    ) -> int:
        """Block the calling consumer thread. Raises AlertError / WaitTimeoutError."""
        ...

    #: Number of consumers parked right now; producers call ``signal_all_when_blocking`` only
    #: when it is non-zero, which keeps the publish hot path free of a method call.
    waiters: int

    def signal_all_when_blocking(self) -> None:
        """Wake parked consumers. Called by producers after each publish; any thread."""
        ...

    def park(self, sequence: int, cursor: Sequence, timeout: float) -> None:
        """Return once ``sequence`` may be published or after ``timeout``, whichever comes first
        (a consumer that polls, resting between polls). Woken by a publish where the strategy
        parks consumers; a strategy whose producers never signal sleeps ``timeout``."""
        ...


class EventHandler(Protocol):
    """User code run by the processor thread. Optional hooks: ``on_start()``, ``on_shutdown()``,
    ``on_timeout(sequence)`` (timeout wait strategy), ``on_batch_start(size)``."""

    def on_event(self, event: Any, sequence: int, end_of_batch: bool) -> None: ...


class ExceptionHandler(Protocol):
    """Where the processor routes exceptions so that its loop survives them."""

    def handle_event_exception(self, exc: BaseException, sequence: int, event: Any) -> None: ...

    def handle_lifecycle_exception(self, exc: BaseException, hook: str) -> None: ...
