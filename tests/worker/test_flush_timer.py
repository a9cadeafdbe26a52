"""The flush timer rests while nothing is pending, and an executor that leaves a partial batch
wakes it (so the partial batch is still flushed within the flush interval)."""

from __future__ import annotations

import threading
from typing import Any

from tests.helpers import ListSpout, eventually
from tuplemesh.config import Config
from tuplemesh.core.markers import Batch
from tuplemesh.disruptor import RingBuffer
from tuplemesh.serialization import frame_rows, load_serializer
from tuplemesh.topology import Bolt, OutputFieldsDeclarer, TopologyBuilder, Tuple
from tuplemesh.worker.executor import BoltExecutor
from tuplemesh.worker.executor_base import ExecutorWiring
from tuplemesh.worker.flush_timer import FlushTimer
from tuplemesh.worker.plan import WorkerPlan


def test_each_tick_that_finds_nothing_doubles_the_wait_up_to_the_longest_rest() -> None:
    timer = FlushTimer(0.001, longest_rest=0.008)
    waits = []
    for _ in range(6):
        timer.found(False)
        waits.append(timer._wait)
    assert waits == [0.002, 0.004, 0.008, 0.008, 0.008, 0.008]
    timer.found(True)
    assert timer._wait == 0.001 and not timer.resting


def test_the_timer_says_it_rests_before_it_looks_and_until_it_finds_work() -> None:
    timer = FlushTimer(0.0001)
    assert not timer.resting
    assert timer.next_tick()
    assert timer.resting  # set before the caller looks for work
    timer.found(False)
    assert timer.resting
    timer.found(True)
    assert not timer.resting


def test_a_wake_ends_a_rest_and_stop_ends_the_loop() -> None:
    timer = FlushTimer(0.001, longest_rest=600.0)
    for _ in range(20):
        timer.found(False)
    assert timer._wait == 600.0
    ticked = threading.Event()

    def loop() -> None:
        if timer.next_tick():
            ticked.set()
        timer.found(False)
        if not timer.next_tick():
            ticked.clear()  # stopped: the loop ends

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    timer.wake()
    eventually(ticked.is_set, timeout=60, message="the wake ended the 600 s rest")
    timer.stop()
    thread.join(60)
    assert not thread.is_alive() and not ticked.is_set()


class Forward(Bolt):
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["n"])

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Tuple) -> None:
        self.collector.emit([tup.values[0]])


class Sink(Bolt):
    def execute(self, tup: Tuple) -> None:
        pass


def test_a_bolt_that_leaves_a_partial_batch_wakes_a_resting_timer() -> None:
    builder = TopologyBuilder("t")
    builder.set_spout("s", ListSpout([[1]], ["n"]))
    builder.set_bolt("f", Forward()).shuffle_grouping("s")
    builder.set_bolt("k", Sink()).shuffle_grouping("f")
    # batches of 100 and a flush interval of a minute: the bolt's one emit stays in its buffer
    conf = Config({"topology.producer.batch.size": 100, "topology.batch.flush.interval.millis": 60_000})
    plan = WorkerPlan.build(builder.build(), 0, 1, conf)
    inboxes = {e.index: RingBuffer.multi_producer(64) for e in plan.executors}
    timer = FlushTimer(60.0)
    wired = ExecutorWiring(
        plan,
        {task: inboxes[e] for task, e in plan.executor_of_task.items()},
        RingBuffer.multi_producer(64),
        lambda: load_serializer("msgpack"),
        None,
        flush_timer=timer,
    )
    [spec] = [e for e in plan.executors if e.component == "f"]
    forward = BoltExecutor(spec, wired)
    forward.outbox.flush()  # its last flush is now: the interval has not passed at its batch's end
    forward.start()
    try:
        timer.resting = True  # the timer looked, found nothing and sleeps
        [task] = spec.tasks
        [source] = [e.tasks[0] for e in plan.executors if e.component == "s"]
        stream_id = plan.stream_ids[("s", "default")]
        rows = load_serializer("msgpack").serialize_rows(source, stream_id, [[7]])  # type: ignore[attr-defined]
        forward.inbox.put(Batch([(task, frame_rows(1, rows))]))
        eventually(lambda: forward.counters.executed == 1, message="the bolt executed its tuple")
        assert forward.outbox.pending == 1  # left in its buffer, for the timer
        eventually(timer._wake.is_set, message="the bolt woke the resting timer")
    finally:
        forward.request_stop()
        assert forward.join(10.0)
