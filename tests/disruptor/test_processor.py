"""BatchEventProcessor: batches, end_of_batch, exceptions, timeouts, dependent consumers."""

from __future__ import annotations

import threading
import time

import pytest

from tests.helpers import ListSpout, RecordingBolt
from tuplemesh.config import Config
from tuplemesh.disruptor import (
    WAIT_STRATEGIES,
    BatchEventProcessor,
    RingBuffer,
    Sequence,
    TimeoutBlockingWaitStrategy,
    make_wait_strategy,
)
from tuplemesh.errors import AlertError, PluginError
from tuplemesh.topology import TopologyBuilder
from tuplemesh.worker.local_cluster import LocalCluster


class Recorder:
    def __init__(self, expect: int) -> None:
        self.events: list[tuple[object, int, bool]] = []
        self.expect = expect
        self.done = threading.Event()

    def on_event(self, event, sequence, end_of_batch):
        self.events.append((event, sequence, end_of_batch))
        if len(self.events) == self.expect:
            self.done.set()


class RecordedErrors:
    """An exception handler that keeps what it is handed: (exception, sequence, event) for an
    event's, (exception, hook) for a lifecycle hook's."""

    def __init__(self) -> None:
        self.events: list[tuple[BaseException, int, object]] = []
        self.hooks: list[tuple[BaseException, str]] = []

    def handle_event_exception(self, exc, sequence, event):
        self.events.append((exc, sequence, event))

    def handle_lifecycle_exception(self, exc, hook):
        self.hooks.append((exc, hook))


def run_processor(ring, handler, *deps):
    processor = BatchEventProcessor(ring, ring.new_barrier(*deps), handler)
    processor.start()
    return processor


@pytest.mark.parametrize("strategy", sorted(WAIT_STRATEGIES))
def test_every_wait_strategy_delivers_in_order(strategy):
    ring = RingBuffer.single_producer(64, wait_strategy=make_wait_strategy(strategy, 0.05))
    rec = Recorder(500)
    processor = run_processor(ring, rec)
    ring.add_gating_sequences(processor.sequence)
    for i in range(500):
        ring.put(i)
    assert rec.done.wait(10)
    processor.halt()
    assert processor.join(2)
    assert [e for e, _, _ in rec.events] == list(range(500))
    assert [s for _, s, _ in rec.events] == list(range(500))
    assert rec.events[-1][2] is True


def test_unknown_wait_strategy_names_the_value_and_known_ones():
    with pytest.raises(PluginError, match=r"'spinny'.*blocking.*busy-spin"):
        make_wait_strategy("spinny")


def test_end_of_batch_marks_last_available_event():
    ring = RingBuffer.single_producer(16)
    rec = Recorder(5)
    processor = BatchEventProcessor(ring, ring.new_barrier(), rec)
    ring.add_gating_sequences(processor.sequence)
    ring.put_many([0, 1, 2, 3, 4])  # published before the consumer starts: one batch
    processor.start()
    assert rec.done.wait(5)
    processor.halt()
    assert [eob for _, _, eob in rec.events] == [False, False, False, False, True]


def test_exception_is_routed_to_handler_and_loop_survives():
    ring = RingBuffer.single_producer(16)
    seen: list[int] = []
    errors = RecordedErrors()
    done = threading.Event()

    class Flaky:
        def on_event(self, event, sequence, end_of_batch):
            if event == 2:
                raise RuntimeError("boom")
            seen.append(event)
            if event == 4:
                done.set()

    processor = BatchEventProcessor(ring, ring.new_barrier(), Flaky(), errors)
    ring.add_gating_sequences(processor.sequence)
    processor.start()
    ring.put_many([0, 1, 2, 3, 4])
    assert done.wait(5)
    processor.halt()
    assert seen == [0, 1, 3, 4]
    assert [(str(exc), sequence, event) for exc, sequence, event in errors.events] == [("boom", 2, 2)]
    assert errors.hooks == []
    assert processor.sequence.value == 4


@pytest.mark.parametrize("release_slots", [True, False])
def test_a_halted_ring_met_by_the_handler_ends_that_event_not_the_next(release_slots):
    """A handler publishing to a halted ring raises AlertError: the event in hand is done with,
    and the loop goes on with the next one (not the same event again, nor its released slot)."""
    ring = RingBuffer.single_producer(16)
    seen: list[object] = []
    errors = RecordedErrors()
    done = threading.Event()

    class MeetsAHaltedRing:
        def on_event(self, event, sequence, end_of_batch):
            seen.append(event)
            if event == 1:
                raise AlertError("downstream ring halted")
            if event == 3:
                done.set()

    processor = BatchEventProcessor(
        ring, ring.new_barrier(), MeetsAHaltedRing(), errors, release_slots=release_slots
    )
    ring.add_gating_sequences(processor.sequence)
    processor.start()
    ring.put_many([0, 1, 2, 3])
    assert done.wait(5)
    processor.halt()
    assert processor.join(2)
    assert seen == [0, 1, 2, 3]
    assert (errors.events, errors.hooks) == ([], [])
    assert processor.sequence.value == 3


def test_lifecycle_hook_exception_does_not_stop_processing():
    ring = RingBuffer.single_producer(8)
    errors = RecordedErrors()

    class Handler(Recorder):
        def on_start(self):
            raise ValueError("start failed")

    rec = Handler(3)
    processor = BatchEventProcessor(ring, ring.new_barrier(), rec, errors)
    ring.add_gating_sequences(processor.sequence)
    processor.start()
    ring.put_many(["a", "b", "c"])
    assert rec.done.wait(5)
    processor.halt()
    assert [(str(exc), hook) for exc, hook in errors.hooks] == [("start failed", "on_start")]
    assert errors.events == []


def test_timeout_strategy_calls_on_timeout():
    ring = RingBuffer.single_producer(8, wait_strategy=TimeoutBlockingWaitStrategy(0.01))
    timeouts: list[int] = []
    fired = threading.Event()

    class Handler:
        def on_event(self, event, sequence, end_of_batch):
            pass

        def on_timeout(self, sequence):
            timeouts.append(sequence)
            if len(timeouts) >= 3:
                fired.set()

    processor = BatchEventProcessor(ring, ring.new_barrier(), Handler())
    ring.add_gating_sequences(processor.sequence)
    processor.start()
    assert fired.wait(5)
    processor.halt()
    assert set(timeouts) == {-1}


def test_timeout_must_be_positive():
    with pytest.raises(ValueError):
        TimeoutBlockingWaitStrategy(0)


def test_dependent_consumer_never_overtakes_upstream():
    ring = RingBuffer.single_producer(32)
    upstream_seen: list[int] = []
    overtakes: list[int] = []
    done = threading.Event()

    class Upstream:
        def on_event(self, event, sequence, end_of_batch):
            time.sleep(0.0005)  # deliberate: a slow upstream gives the downstream room to overtake
            upstream_seen.append(sequence)

    first = BatchEventProcessor(ring, ring.new_barrier(), Upstream())

    class Downstream:
        def on_event(self, event, sequence, end_of_batch):
            if first.sequence.value < sequence:
                overtakes.append(sequence)
            if sequence == 199:
                done.set()

    second = BatchEventProcessor(ring, ring.new_barrier(first.sequence), Downstream())
    ring.add_gating_sequences(second.sequence)
    first.start()
    second.start()
    for i in range(200):
        ring.put(i)
    assert done.wait(10)
    first.halt()
    second.halt()
    assert overtakes == []
    assert upstream_seen == list(range(200))


def test_processor_cannot_run_twice():
    ring = RingBuffer.single_producer(8)
    processor = BatchEventProcessor(ring, ring.new_barrier(), Recorder(1))
    ring.add_gating_sequences(processor.sequence)
    processor.start()
    with pytest.raises(RuntimeError):
        processor.run()
    processor.halt()


class _NeverAlerted:
    def check_alert(self) -> None:
        return None


def _wait_parked(strategy, cursor: Sequence, sequence: int, monkeypatch) -> list[float]:
    """Wait for ``sequence``, published by another thread once the wait parked; the yields
    (``time.sleep(0)`` calls of this thread) it made first."""
    yielded: list[float] = []
    waiting_thread = threading.get_ident()
    real_sleep = time.sleep

    def counting_sleep(seconds: float) -> None:
        if threading.get_ident() == waiting_thread:
            yielded.append(seconds)  # a yield: the GIL given away, nothing to wait for here
        else:
            real_sleep(seconds)  # any other thread of the process sleeps as it asked

    def publish_once_parked() -> None:
        deadline = time.monotonic() + 10
        while not strategy.waiters and time.monotonic() < deadline:  # parked: counted a waiter
            threading.Event().wait(0.001)
        cursor.set(sequence)
        strategy.signal_all_when_blocking()

    publisher = threading.Thread(target=publish_once_parked, daemon=True)
    monkeypatch.setattr(time, "sleep", counting_sleep)
    publisher.start()
    try:
        assert strategy.wait_for(sequence, cursor, [], _NeverAlerted()) == sequence
    finally:
        monkeypatch.undo()
    publisher.join(5)
    assert strategy.waiters == 0
    return yielded


@pytest.mark.parametrize("yields", [0, 3])
def test_a_blocking_wait_gives_the_lock_away_the_configured_times_then_parks(yields, monkeypatch):
    strategy = make_wait_strategy("blocking", yield_tries=yields)
    assert _wait_parked(strategy, Sequence(-1), 0, monkeypatch) == [0] * yields


def test_a_blocking_wait_parks_at_once_after_yields_that_did_not_pay_until_the_ring_is_busy(monkeypatch):
    strategy = make_wait_strategy("blocking", yield_tries=3)
    cursor = Sequence(-1)
    assert _wait_parked(strategy, cursor, 0, monkeypatch) == [0, 0, 0]  # the yields saw nothing
    assert _wait_parked(strategy, cursor, 1, monkeypatch) == []  # so the next wait parks at once
    assert _wait_parked(strategy, cursor, 2, monkeypatch) == []
    cursor.set(3)  # published before the consumer asks for it: the ring is busy
    assert strategy.wait_for(3, cursor, [], _NeverAlerted()) == 3
    assert _wait_parked(strategy, cursor, 4, monkeypatch) == [0, 0, 0]  # yields again


def test_a_workers_rings_wait_with_the_configured_yields():
    def yields_of(conf: dict[str, object]) -> set[int]:
        b = TopologyBuilder("yields")
        b.set_spout("s", ListSpout([], ["x"]))
        b.set_bolt("r", RecordingBolt()).shuffle_grouping("s")
        cluster = LocalCluster(b.build(), 1, Config({"messaging.transport": "local", **conf}))
        try:
            worker = cluster.workers[0]
            rings = [*worker.local_inbox_of_task.values(), worker.transfer_ring]
            return {ring.sequencer.wait_strategy.yield_tries for ring in rings}
        finally:
            cluster.stop()

    assert yields_of({}) == {5}
    assert yields_of({"topology.disruptor.wait.yields": 4}) == {4}
    timeout_blocking = {"topology.disruptor.wait.strategy": "timeout-blocking"}
    assert yields_of({**timeout_blocking, "topology.disruptor.wait.yields": 2}) == {2}
