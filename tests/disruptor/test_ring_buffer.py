"""Ring buffer semantics, after the LMAX Disruptor's own RingBufferTest / SequencerTest."""

from __future__ import annotations

import threading
import time

import pytest

from tests.helpers import eventually
from tuplemesh.disruptor import (
    BatchEventProcessor,
    BlockingWaitStrategy,
    EventPoller,
    MultiProducerSequencer,
    RingBuffer,
    Sequence,
    SingleProducerSequencer,
)
from tuplemesh.errors import AlertError, InsufficientCapacityError

PRODUCERS = [RingBuffer.single_producer, RingBuffer.multi_producer]


class Slot:
    def __init__(self) -> None:
        self.value: object = None


def set_value(slot: Slot, sequence: int, value: object) -> None:
    slot.value = value


@pytest.mark.parametrize("make", PRODUCERS)
def test_claim_and_get(make):
    ring = make(32, Slot)
    gate = Sequence()
    ring.add_gating_sequences(gate)
    barrier = ring.new_barrier()
    seq = ring.publish_event(set_value, "first")
    assert seq == 0
    assert barrier.wait_for(0) == 0
    assert ring.get(0).value == "first"
    assert ring.cursor == 0


@pytest.mark.parametrize("make", PRODUCERS)
def test_slots_are_preallocated_and_reused_on_wrap(make):
    ring = make(4, Slot)
    slots = list(ring.entries)
    assert len(slots) == 4 and all(isinstance(s, Slot) for s in slots)
    gate = Sequence()
    ring.add_gating_sequences(gate)
    for i in range(10):
        ring.publish_event(set_value, i)
        gate.value = i  # consumer keeps up
    # sequence 9 lives in slot 9 & 3 == 1; the same object as at construction
    assert ring.get(9) is slots[1]
    assert ring.get(9).value == 9
    assert ring.get(8).value == 8


@pytest.mark.parametrize("size", [0, 3, 6, 1000, -4])
def test_capacity_must_be_power_of_two(size):
    with pytest.raises(ValueError, match="power of two"):
        RingBuffer.single_producer(size)


@pytest.mark.parametrize("make", PRODUCERS)
def test_try_next_fails_on_full_ring(make):
    ring = make(4)
    gate = Sequence()
    ring.add_gating_sequences(gate)
    for i in range(4):
        ring.try_put(i)
    assert ring.remaining_capacity() == 0
    with pytest.raises(InsufficientCapacityError):
        ring.try_next()
    with pytest.raises(InsufficientCapacityError):
        ring.try_put("x")
    assert ring.cursor == 3  # the failed claims changed nothing
    gate.value = 0  # consumer frees one slot
    assert ring.remaining_capacity() == 1
    assert ring.try_put("y") == 4
    assert ring.get(4) == "y"


@pytest.mark.parametrize("make", PRODUCERS)
def test_remaining_capacity_tracks_claims_and_consumption(make):
    ring = make(8)
    gate = Sequence()
    ring.add_gating_sequences(gate)
    assert ring.remaining_capacity() == 8
    ring.next(3)
    assert ring.remaining_capacity() == 5
    gate.value = 1
    assert ring.remaining_capacity() == 7


@pytest.mark.parametrize("make", PRODUCERS)
def test_never_wraps_past_slowest_consumer(make):
    ring = make(4)
    fast, slow = Sequence(), Sequence()
    ring.add_gating_sequences(fast, slow)
    for i in range(4):
        ring.put(i)
    fast.value = 3
    claimed = threading.Event()

    def producer() -> None:
        ring.put("wrapped")
        claimed.set()

    t = threading.Thread(target=producer, daemon=True)
    t.start()
    assert not claimed.wait(0.2), "producer overwrote a slot the slowest consumer had not read"
    assert ring.get(0) == 0
    slow.value = 0  # slowest consumer moves on: one slot frees up
    assert claimed.wait(2.0)
    assert ring.get(4) == "wrapped"
    t.join(2.0)


@pytest.mark.parametrize("make", PRODUCERS)
def test_a_claim_that_waits_for_room_is_counted_with_its_time(make):
    ring = make(4)
    consumer = Sequence()
    ring.add_gating_sequences(consumer)
    sequencer = ring.sequencer
    for i in range(4):
        ring.put(i)
    assert (sequencer.producer_waits, sequencer.producer_wait_seconds) == (0, 0.0), "no claim waited yet"
    done = threading.Event()

    def producer() -> None:
        ring.put("fifth")
        done.set()

    t = threading.Thread(target=producer, daemon=True)
    began = time.monotonic()
    t.start()
    eventually(lambda: sequencer.producer_waits == 1, timeout=5.0, message="the blocked claim is not counted")
    # its time shows while it is still blocked, not only once it ends
    eventually(lambda: sequencer.producer_wait_seconds >= 0.05, timeout=5.0, message="the wait's time")
    assert not done.is_set()
    consumer.value = 0  # one slot frees up
    assert done.wait(5.0)
    t.join(5.0)
    assert sequencer.producer_waits == 1
    waited = sequencer.producer_wait_seconds
    assert 0.05 <= waited <= time.monotonic() - began, "no more than the producer's time blocked"
    consumer.value = 4  # room again: a claim that does not wait adds nothing
    ring.put("sixth")
    assert (sequencer.producer_waits, sequencer.producer_wait_seconds) == (1, waited)


@pytest.mark.parametrize("make", PRODUCERS)
def test_a_claim_waiting_at_the_limit_is_counted(make):
    ring = make(8)
    consumer = Sequence()
    ring.add_gating_sequences(consumer)
    ring.sequencer.limit = 2  # a queue-time bound: producers may fill 2 of the 8 slots
    ring.put(0)
    ring.put(1)
    t = threading.Thread(target=ring.put, args=(2,), daemon=True)
    t.start()
    eventually(lambda: ring.sequencer.producer_waits == 1, timeout=5.0, message="a wait at the limit")
    assert ring.cursor == 1, "nothing is published past the limit"
    consumer.value = 0
    t.join(5.0)
    assert not t.is_alive() and ring.sequencer.producer_wait_seconds > 0.0


@pytest.mark.parametrize("make", PRODUCERS)
def test_try_next_on_a_full_ring_is_no_wait(make):
    ring = make(2)
    ring.add_gating_sequences(Sequence())
    ring.put(0)
    ring.put(1)
    with pytest.raises(InsufficientCapacityError):
        ring.sequencer.try_next()
    assert ring.sequencer.producer_waits == 0


@pytest.mark.parametrize("make", PRODUCERS)
@pytest.mark.parametrize(
    ("starts_at", "size"),
    [(-1, 2), (0, 0), (0, -1), (3, 2), (0, 9), (4, 1)],
)
def test_batch_publish_argument_checks_leave_ring_untouched(make, starts_at, size):
    ring = make(4, Slot)
    ring.add_gating_sequences(Sequence())
    args = [("a",), ("b",), ("c",), ("d",)] if size != 9 else [(str(i),) for i in range(9)]
    with pytest.raises(ValueError):
        ring.publish_events(set_value, args, starts_at, size)
    assert ring.cursor == -1
    assert ring.remaining_capacity() == 4
    assert all(slot.value is None for slot in ring.entries)


@pytest.mark.parametrize("make", PRODUCERS)
def test_put_many_checks_before_claiming(make):
    ring = make(4)
    ring.add_gating_sequences(Sequence())
    with pytest.raises(ValueError):
        ring.put_many([])
    with pytest.raises(ValueError):
        ring.put_many(list(range(5)))
    assert ring.cursor == -1 and ring.remaining_capacity() == 4
    assert ring.put_many(["a", "b", "c"]) == 2
    assert [ring.get(i) for i in range(3)] == ["a", "b", "c"]


def test_put_many_wraps_across_the_end_of_the_array():
    ring = RingBuffer.multi_producer(4)
    gate = Sequence()
    ring.add_gating_sequences(gate)
    ring.put_many([0, 1, 2])
    gate.value = 2
    high = ring.put_many([3, 4, 5])  # slots 3, 0, 1
    assert high == 5
    barrier = ring.new_barrier()
    assert barrier.wait_for(3) == 5
    assert [ring.get(s) for s in range(3, 6)] == [3, 4, 5]


def test_publish_events_fills_a_batch_in_order():
    ring = RingBuffer.single_producer(8, Slot)
    ring.add_gating_sequences(Sequence())
    high = ring.publish_events(set_value, [("x",), ("y",), ("z",), ("w",)], 1, 2)
    assert high == 1
    assert [ring.get(0).value, ring.get(1).value] == ["y", "z"]


def test_multi_producer_exposes_only_contiguous_published_prefix():
    ring = RingBuffer.multi_producer(16)
    ring.add_gating_sequences(Sequence())
    barrier = ring.new_barrier()
    sequencer = ring.sequencer
    assert isinstance(sequencer, MultiProducerSequencer)
    first = sequencer.next(3)  # producer A claims 0..2
    second = sequencer.next(3)  # producer B claims 3..5
    assert (first, second) == (2, 5)
    sequencer.publish_range(3, 5)  # B publishes before A
    assert sequencer.highest_published(0, ring.cursor) == -1
    assert not sequencer.is_available(0) and sequencer.is_available(4)
    sequencer.publish(0)  # A publishes only its first slot
    assert sequencer.highest_published(0, ring.cursor) == 0
    assert barrier.wait_for(0) == 0
    sequencer.publish_range(1, 2)
    assert barrier.wait_for(1) == 5


def test_single_producer_is_available_window():
    sequencer = SingleProducerSequencer(4, BlockingWaitStrategy())
    sequencer.add_gating_sequences(Sequence())
    for _ in range(3):
        sequencer.publish(sequencer.next())
    assert sequencer.is_available(2) and sequencer.is_available(0)
    assert not sequencer.is_available(3)


@pytest.mark.parametrize("make", PRODUCERS)
def test_halt_unblocks_waiting_consumer(make):
    ring = make(8)

    class Handler:
        def __init__(self) -> None:
            self.started = self.stopped = False

        def on_start(self) -> None:
            self.started = True

        def on_shutdown(self) -> None:
            self.stopped = True

        def on_event(self, event, sequence, end_of_batch):
            pass

    handler = Handler()
    processor = BatchEventProcessor(ring, ring.new_barrier(), handler)
    ring.add_gating_sequences(processor.sequence)
    thread = processor.start()
    eventually(lambda: handler.started)
    # deliberate: nothing reports "parked", so give the started consumer time to reach its wait
    time.sleep(0.1)
    processor.halt()
    thread.join(2.0)
    assert not thread.is_alive()
    assert handler.started and handler.stopped


@pytest.mark.parametrize("make", PRODUCERS)
def test_halt_unblocks_producer_blocked_on_full_ring(make):
    ring = make(4)
    release = threading.Event()

    class Stuck:
        def on_event(self, event, sequence, end_of_batch):
            release.wait(5)

    processor = BatchEventProcessor(ring, ring.new_barrier(), Stuck())
    ring.add_gating_sequences(processor.sequence)
    processor.start()
    for i in range(4):
        ring.put(i)
    outcome: list[object] = []

    def producer() -> None:
        try:
            for i in range(10):
                ring.put(i)
        except AlertError as exc:
            outcome.append(exc)

    t = threading.Thread(target=producer, daemon=True)
    t.start()
    t.join(0.1)  # deliberate: time in which a producer that did not block would finish its puts
    assert t.is_alive(), "producer should be blocked on the full ring"
    processor.halt()
    t.join(2.0)
    release.set()
    assert not t.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], AlertError)
    assert processor.join(2.0)


#: A parked producer's own look-again time in the tests below: far longer than any test waits,
#: so a producer that gets its slot was woken, not timed out.
NEVER = 600.0


def _park_a_producer(ring: RingBuffer) -> tuple[threading.Thread, threading.Event, list[BaseException]]:
    """A producer putting one more into ``ring`` (full), parked for room; the event is set once
    its put returns, the list holds what the put raised."""
    ring.sequencer.room_wait = NEVER
    done = threading.Event()
    raised: list[BaseException] = []

    def producer() -> None:
        try:
            ring.put("more")
        except AlertError as exc:
            raised.append(exc)
        else:
            done.set()

    t = threading.Thread(target=producer, daemon=True)
    t.start()
    eventually(lambda: ring.sequencer.room_waiters == 1, timeout=10.0, message="the producer never parked")
    assert not done.is_set() and ring.cursor == 3
    return t, done, raised


@pytest.mark.parametrize("make", PRODUCERS)
def test_a_parked_producer_is_woken_when_a_processor_frees_a_slot(make):
    ring = make(4)
    release = threading.Event()
    seen: list[object] = []

    class Held:
        def on_event(self, event, sequence, end_of_batch):
            release.wait(30)
            seen.append(event)

    processor = BatchEventProcessor(ring, ring.new_barrier(), Held())
    ring.add_gating_sequences(processor.sequence)
    processor.start()
    for i in range(4):
        ring.put(i)
    t, done, _ = _park_a_producer(ring)
    release.set()  # the processor handles what it holds and moves its sequence on
    assert done.wait(30.0), "the processor freed slots but did not wake the parked producer"
    t.join(5.0)
    eventually(lambda: seen == [0, 1, 2, 3, "more"], timeout=10.0, message=f"handled {seen}")
    assert ring.sequencer.room_waiters == 0
    processor.halt()
    assert processor.join(5.0)


@pytest.mark.parametrize("make", PRODUCERS)
def test_a_parked_producer_is_woken_when_a_handler_raises(make):
    """The slot of an event whose handler raised is free too: the processor wakes the producer
    before it goes on to the next event, which here holds it for the rest of the test."""
    ring = make(4)
    release, hold = threading.Event(), threading.Event()
    failed: list[object] = []

    class FailsThenHolds:
        def on_event(self, event, sequence, end_of_batch):
            if event == 0:
                release.wait(30)
                raise ValueError("user code failed")
            hold.wait(60)

    class Recorder:
        def handle_event_exception(self, exc, sequence, event):
            failed.append((type(exc).__name__, sequence, event))

        def handle_lifecycle_exception(self, exc, hook):
            raise AssertionError(hook)

    processor = BatchEventProcessor(ring, ring.new_barrier(), FailsThenHolds(), exception_handler=Recorder())
    ring.add_gating_sequences(processor.sequence)
    processor.start()
    for i in range(4):
        ring.put(i)
    t, done, _ = _park_a_producer(ring)
    release.set()
    assert done.wait(30.0), "the handler's failure freed a slot but the producer was not woken"
    assert failed == [("ValueError", 0, 0)] and ring.cursor == 4
    hold.set()
    t.join(5.0)
    processor.halt()
    assert processor.join(5.0)


@pytest.mark.parametrize("make", PRODUCERS)
def test_a_parked_producer_is_woken_when_a_poller_frees_a_slot(make):
    ring = make(4)
    poller = EventPoller(ring, release_slots=True)
    ring.add_gating_sequences(poller.sequence)
    for i in range(4):
        ring.put(i)
    t, done, _ = _park_a_producer(ring)
    seen: list[object] = []
    assert poller.poll(lambda event, sequence, end: seen.append(event)) == 4
    assert done.wait(30.0), "the poller freed slots but did not wake the parked producer"
    t.join(5.0)
    assert poller.poll(lambda event, sequence, end: seen.append(event)) == 1
    assert seen == [0, 1, 2, 3, "more"]


@pytest.mark.parametrize("make", PRODUCERS)
def test_halting_wakes_a_parked_producer_with_alert_error(make):
    ring = make(4)
    ring.add_gating_sequences(Sequence())
    for i in range(4):
        ring.put(i)
    t, done, raised = _park_a_producer(ring)
    ring.sequencer.alert()
    t.join(30.0)
    assert not t.is_alive(), "alert did not wake the parked producer"
    assert not done.is_set() and len(raised) == 1 and isinstance(raised[0], AlertError)
    assert ring.cursor == 3, "nothing was claimed"
