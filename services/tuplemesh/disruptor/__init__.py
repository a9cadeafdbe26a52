"""Disruptor-style bounded ring buffers: the in-process queues of tuplemesh (no I/O, no routing).

The roles follow the LMAX Disruptor: `Sequence` counts, a `Sequencer` claims, publishes and
gates producers, a `SequenceBarrier` is where a consumer waits, a `WaitStrategy` is how it waits,
and `BatchEventProcessor` is the consumer loop calling ``on_event(event, sequence, end_of_batch)``.
"""

from tuplemesh.disruptor.barrier import SequenceBarrier
from tuplemesh.disruptor.poller import EventPoller
from tuplemesh.disruptor.processor import (
    BatchEventProcessor,
    EventHandler,
    ExceptionHandler,
    LoggingExceptionHandler,
)
from tuplemesh.disruptor.ring_buffer import RingBuffer
from tuplemesh.disruptor.sequence import Sequence, minimum_sequence
from tuplemesh.disruptor.sequencer import MultiProducerSequencer, Sequencer, SingleProducerSequencer
from tuplemesh.disruptor.wait_strategies import (
    WAIT_STRATEGIES,
    BlockingWaitStrategy,
    BusySpinWaitStrategy,
    SleepingWaitStrategy,
    TimeoutBlockingWaitStrategy,
    WaitStrategy,
    YieldingWaitStrategy,
    make_wait_strategy,
)

__all__ = [
    "WAIT_STRATEGIES",
    "BatchEventProcessor",
    "BlockingWaitStrategy",
    "BusySpinWaitStrategy",
    "EventHandler",
    "EventPoller",
    "ExceptionHandler",
    "LoggingExceptionHandler",
    "MultiProducerSequencer",
    "RingBuffer",
    "Sequence",
    "SequenceBarrier",
    "Sequencer",
    "SingleProducerSequencer",
    "SleepingWaitStrategy",
    "TimeoutBlockingWaitStrategy",
    "WaitStrategy",
    "YieldingWaitStrategy",
    "make_wait_strategy",
    "minimum_sequence",
]
