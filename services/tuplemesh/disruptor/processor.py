"""`BatchEventProcessor`: the consumer loop that hands each published event to an EventHandler."""

from __future__ import annotations

import logging
import threading
from typing import Any

from tuplemesh.disruptor.barrier import SequenceBarrier
from tuplemesh.disruptor.interfaces import EventHandler, ExceptionHandler
from tuplemesh.disruptor.ring_buffer import RingBuffer
from tuplemesh.disruptor.sequence import Sequence
from tuplemesh.errors import AlertError, WaitTimeoutError

__all__ = ["BatchEventProcessor", "EventHandler", "ExceptionHandler", "LoggingExceptionHandler"]

log = logging.getLogger(__name__)


class LoggingExceptionHandler:
    """Default handler: log with traceback and carry on with the next event."""

    def __init__(self, logger: logging.Logger = log) -> None:
        self.logger = logger

    def handle_event_exception(self, exc: BaseException, sequence: int, event: Any) -> None:
        self.logger.error("exception processing sequence %d: %r", sequence, exc, exc_info=exc)

    def handle_lifecycle_exception(self, exc: BaseException, hook: str) -> None:
        self.logger.error("exception in %s: %r", hook, exc, exc_info=exc)


class BatchEventProcessor:
    """Consumes a ring through a barrier; one thread runs it.

    ``halt`` (any thread) stops the loop and also alerts the ring's producers, so neither a
    consumer parked on an empty ring nor a producer blocked on a full one stays stuck.
    """

    def __init__(
        self,
        ring: RingBuffer[Any],
        barrier: SequenceBarrier,
        handler: EventHandler,
        exception_handler: ExceptionHandler | None = None,
        release_slots: bool = False,
    ) -> None:
        """``release_slots``: after handling an event, set its slot to None. For rings whose slots
        hold references to whole batches (``put``), so a consumed batch is freed at once instead of
        living until the slot is reused; never for rings of preallocated, reused events."""
        self.ring = ring
        self.release_slots = release_slots
        self.barrier = barrier
        self.handler = handler
        self.exception_handler: ExceptionHandler = exception_handler or LoggingExceptionHandler()
        self.sequence = Sequence()
        self._running = False
        self._started = threading.Event()
        self._loop_thread: threading.Thread | None = None
        self._on_timeout = getattr(handler, "on_timeout", None)
        self._on_batch_start = getattr(handler, "on_batch_start", None)

    @property
    def running(self) -> bool:
        return self._running

    def start(self, name: str | None = None, daemon: bool = True) -> threading.Thread:
        """Run the loop on a new thread; returns once the loop has started."""
        thread = threading.Thread(target=self.run, name=name or "batch-event-processor", daemon=daemon)
        self._loop_thread = thread
        thread.start()
        self._started.wait()
        return thread

    def halt(self) -> None:
        """Stop the loop after the event in hand; wake its waiters. Any thread."""
        self._running = False
        self.barrier.alert()
        self.ring.sequencer.alert()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread started by ``start``; True when it has ended."""
        if self._loop_thread is None:
            return True
        self._loop_thread.join(timeout)
        return not self._loop_thread.is_alive()

    def _hook(self, name: str, *args: Any) -> None:
        hook = getattr(self.handler, name, None)
        if hook is None:
            return
        try:
            hook(*args)
        except Exception as exc:  # the loop must survive user hooks
            self.exception_handler.handle_lifecycle_exception(exc, name)

    def run(self) -> None:
        """The processing loop. Returns after ``halt``."""
        if self._running:
            raise RuntimeError("processor is already running")
        self._running = True
        self.barrier.clear_alert()
        self.ring.sequencer.clear_alert()
        self._started.set()
        self._hook("on_start")
        try:
            self._loop()
        finally:
            self._hook("on_shutdown")
            self._running = False
            self._started.clear()

    def _loop(self) -> None:
        entries = self.ring.entries
        mask = self.ring.buffer_size - 1
        on_event = self.handler.on_event
        barrier = self.barrier
        sequence = self.sequence
        sequencer = self.ring.sequencer
        next_seq = sequence.value + 1
        release = self.release_slots
        event: Any = None
        available = next_seq - 1
        while True:
            try:
                found = barrier.wait_for(next_seq)
                if self._on_batch_start is not None and found >= next_seq:
                    self._on_batch_start(found - next_seq + 1)
                available = found  # from here on, an AlertError comes from handling an event
                if release:
                    while next_seq <= available:
                        index = next_seq & mask
                        event = entries[index]
                        entries[index] = None
                        on_event(event, next_seq, next_seq == available)
                        next_seq += 1
                else:
                    while next_seq <= available:
                        event = entries[next_seq & mask]
                        on_event(event, next_seq, next_seq == available)
                        next_seq += 1
                sequence.value = available
                if sequencer.room_waiters:  # producers parked on a full ring: room now
                    sequencer.wake_producers()
            except WaitTimeoutError:
                if self._on_timeout is not None:
                    try:
                        self._on_timeout(sequence.value)
                    except Exception as exc:
                        self.exception_handler.handle_lifecycle_exception(exc, "on_timeout")
            except AlertError:
                if not self._running:
                    return
                if next_seq <= available:
                    # raised by the handler, not the barrier: a ring it publishes to was halted
                    # (its worker is stopping). The event in hand is done with: handled again,
                    # it would run twice, or be None where its slot was released.
                    sequence.value = next_seq
                    next_seq += 1
                    if sequencer.room_waiters:
                        sequencer.wake_producers()
            except Exception as exc:
                self.exception_handler.handle_event_exception(exc, next_seq, event)
                sequence.value = next_seq
                next_seq += 1
                if sequencer.room_waiters:  # the failed event's slot is free too
                    sequencer.wake_producers()
