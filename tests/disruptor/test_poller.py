"""EventPoller: handing over what is published, and resting between polls until a publish."""

from __future__ import annotations

import threading
import time

import pytest

from tuplemesh.disruptor import (
    BlockingWaitStrategy,
    BusySpinWaitStrategy,
    EventPoller,
    RingBuffer,
    SleepingWaitStrategy,
    WaitStrategy,
    YieldingWaitStrategy,
)

PRODUCERS = [RingBuffer.single_producer, RingBuffer.multi_producer]
STRATEGIES = [BlockingWaitStrategy, BusySpinWaitStrategy, YieldingWaitStrategy, SleepingWaitStrategy]
LONG_REST = 60.0  # far longer than any test waits: a rest that ends early was woken


def polled_ring(
    strategy: WaitStrategy, producer=RingBuffer.single_producer
) -> tuple[RingBuffer, EventPoller]:
    """An 8-slot ring waiting with ``strategy`` and the poller that gates it."""
    ring = producer(8, wait_strategy=strategy)
    poller = EventPoller(ring, release_slots=True)
    ring.add_gating_sequences(poller.sequence)
    return ring, poller


@pytest.mark.parametrize("producer", PRODUCERS)
def test_a_publish_wakes_a_resting_poller_on_a_blocking_ring(producer):
    ring, poller = polled_ring(BlockingWaitStrategy(), producer)
    woke = threading.Event()

    def rest() -> None:
        poller.rest(LONG_REST)
        woke.set()

    resting = threading.Thread(target=rest, daemon=True)
    resting.start()
    while not ring.sequencer.wait_strategy.waiters:  # parked (the publish must find it there)
        time.sleep(0.001)
    ring.put("rollback")
    assert woke.wait(10.0), "the publish did not wake the resting poller"
    taken: list[object] = []
    assert poller.poll(lambda item, seq, end: taken.append(item)) == 1
    assert taken == ["rollback"]
    assert ring.sequencer.wait_strategy.waiters == 0


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_rest_returns_at_once_when_an_unhandled_event_is_there(strategy):
    ring, poller = polled_ring(strategy())
    ring.put("trigger")
    done = threading.Event()
    threading.Thread(target=lambda: (poller.rest(LONG_REST), done.set()), daemon=True).start()
    assert done.wait(10.0), f"{strategy.__name__}: rested although an event was waiting"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_rest_with_nothing_published_lasts_its_timeout(strategy):
    _, poller = polled_ring(strategy())
    started = time.monotonic()
    poller.rest(0.05)
    assert time.monotonic() - started >= 0.05
    assert poller.poll(lambda item, seq, end: None) == 0
