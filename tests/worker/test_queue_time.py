"""What waits in a ring is bounded in time: its consumer's measured time per batch sets how many
slots producers may fill (`topology.backpressure.target.ms`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.helpers import eventually
from tests.worker.wiring import wire
from tuplemesh.config import Config
from tuplemesh.core.markers import Batch
from tuplemesh.disruptor import EventPoller, RingBuffer
from tuplemesh.errors import InsufficientCapacityError
from tuplemesh.metrics import WorkerCollector
from tuplemesh.topology import Bolt, Fields, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple
from tuplemesh.worker.debloat import MIN_SLOTS, QueueTimeLimit
from tuplemesh.worker.executor import BoltExecutor
from tuplemesh.worker.local_cluster import LocalCluster


@pytest.mark.parametrize("make", [RingBuffer.single_producer, RingBuffer.multi_producer])
def test_producers_fill_only_the_slots_of_the_limit(make):
    ring: RingBuffer[Any] = make(16)
    poller = EventPoller(ring, release_slots=True)
    ring.add_gating_sequences(poller.sequence)
    ring.sequencer.limit = 3
    for i in range(3):
        ring.try_put(i)
    with pytest.raises(InsufficientCapacityError):
        ring.try_put(3)
    ring.sequencer.limit = 5  # raised: room at once, without a consumer moving
    ring.try_put(3)
    ring.try_put(4)
    with pytest.raises(InsufficientCapacityError):
        ring.try_put(5)
    taken: list[int] = []
    poller.poll(lambda item, seq, end: taken.append(item))
    assert taken == [0, 1, 2, 3, 4]
    ring.sequencer.limit = 1
    ring.try_put(5)
    with pytest.raises(InsufficientCapacityError):
        ring.try_put(6)


def test_the_limit_is_the_slots_drained_in_the_target_time_within_bounds():
    ring: RingBuffer[Any] = RingBuffer.multi_producer(1024)
    limit = QueueTimeLimit(ring.sequencer, 0.010)
    assert ring.sequencer.limit == 1024  # nothing measured yet: every slot
    limit.observe(0.001)
    assert ring.sequencer.limit == 10
    for _ in range(200):  # the moving average follows a slower consumer
        limit.observe(0.004)
    assert ring.sequencer.limit == MIN_SLOTS  # 2.5 slots in 10 ms: never below the minimum
    for _ in range(5_000):
        limit.observe(0.000_001)
    assert ring.sequencer.limit == 1024  # 10,000 slots in 10 ms: never above the ring


def test_a_consumer_that_blocks_now_and_then_is_measured_by_its_mean_time_per_slot():
    """A transfer thread spends microseconds on most slots and waits 50 ms for its send window
    on one in a hundred: 0.5 ms a slot on average, 20 slots in 10 ms, and the limit stays near
    that instead of swinging to the whole ring after each run of fast slots."""
    ring: RingBuffer[Any] = RingBuffer.multi_producer(1024)
    limit = QueueTimeLimit(ring.sequencer, 0.010)
    seen = []
    for _ in range(100):
        for _ in range(99):
            limit.observe(0.000_001)
            seen.append(ring.sequencer.limit)
        limit.observe(0.050)
        seen.append(ring.sequencer.limit)
    steady = seen[len(seen) // 2 :]
    assert max(steady) <= 60 and min(steady) >= MIN_SLOTS, (min(steady), max(steady))


def test_batches_taken_while_a_task_sets_tuples_aside_do_not_set_the_limit():
    """While a task aligns checkpoint barriers it sets tuples aside nearly for free, and the
    batch that ends it runs them all: neither is the executor's pace."""
    builder = TopologyBuilder("paced")
    builder.set_spout("s", EndlessSpout())
    builder.set_bolt("b", SleepBolt()).shuffle_grouping("s")
    conf = Config({"messaging.transport": "local", "topology.backpressure.target.ms": 10})
    wired = wire(builder.build(), conf, slots=1024)
    executor = BoltExecutor(wired.spec("b"), wired.wiring)
    executor.on_start()
    limit = executor.queue_limit
    assert limit is not None and executor.inbox.sequencer.limit == 1024  # nothing measured
    [task] = wired.spec("b").tasks
    one = Tuple([1], 99, "s", "default", Fields(["n"]))
    wired.wiring.held_back.hold(task)
    for sequence in range(100):
        executor.on_event(Batch([(task, one)]), sequence, True)
    assert limit.seconds_per_slot == 0.0 and executor.inbox.sequencer.limit == 1024
    wired.wiring.held_back.release(task)
    executor.on_event(Batch([(task, one)]), 100, True)
    assert limit.seconds_per_slot >= 0.002  # the first batch measured: a sleep of 2 ms
    assert executor.counters.executed == 101


class EndlessSpout(Spout):
    """Emits increasing integers for as long as it runs."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["n"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        for _ in range(100):
            self.collector.emit([self.n])
            self.n += 1


class SleepBolt(Bolt):
    """Takes at least 2 ms per tuple."""

    def execute(self, tup: Tuple) -> None:
        time.sleep(0.002)


def _slow_bolt_cluster(name: str, target_ms: int) -> LocalCluster:
    """A started one-worker cluster: an endless spout into a bolt taking >= 2 ms per tuple, one
    tuple per inbox slot, with ``target_ms`` of queue time allowed (0: the bound off)."""
    b = TopologyBuilder(name)
    b.set_spout("s", EndlessSpout())
    b.set_bolt("slow", SleepBolt()).shuffle_grouping("s")
    conf = Config(
        {
            "messaging.transport": "local",
            "topology.producer.batch.size": 1,  # a slot per tuple: >= 2 ms per slot
            "topology.executor.receive.buffer.size": 1024,
            "topology.backpressure.target.ms": target_ms,
        }
    )
    cluster = LocalCluster(b.build(), 1, conf)
    cluster.start()
    return cluster


def _most_slots_in_use(target_ms: int) -> int:
    """The most slots of the slow bolt's inbox in use over 100 samples, once the backlog from
    before its first measured batch has drained (or after 3 s when it never does)."""
    cluster = _slow_bolt_cluster("queue-time", target_ms)
    try:
        worker = cluster.workers[0]
        inbox = worker.local_inbox_of_task[worker.assignment.tasks_of("slow")[0]]

        def in_use() -> int:
            return inbox.buffer_size - inbox.remaining_capacity()

        if target_ms:  # the limit drains what the spout queued before the bolt measured anything
            eventually(lambda: in_use() <= 10, timeout=60.0, interval=0.01)
        else:  # no limit: the spout fills the ring
            eventually(lambda: in_use() >= 1000, timeout=60.0, interval=0.01)
        most = 0
        for _ in range(100):
            most = max(most, in_use())
            time.sleep(0.005)  # deliberate: samples spread over the bolt's work
        return most
    finally:
        worker.spout_executors[0].switch.deactivate()
        cluster.stop()


def test_a_slow_bolt_holds_only_the_batches_it_drains_in_the_target_time():
    # >= 2 ms per slot and 10 ms of queue: at most 5 slots (4 at the least), where without the
    # bound the spout keeps all 1024 slots full
    assert _most_slots_in_use(10) <= 5
    assert _most_slots_in_use(0) >= 1000


def _limit_gauge_of_the_slow_inbox(target_ms: int) -> tuple[float, float]:
    """(tuplemesh_queue_limit_slots, tuplemesh_queue_capacity_slots) of the slow bolt's inbox,
    read from the worker's collector once the bolt has executed 20 tuples (and, with the bound
    on, once its first measurement set the limit)."""
    cluster = _slow_bolt_cluster("queue-limit", target_ms)
    worker = cluster.workers[0]
    try:
        (slow,) = [e for e in worker.bolt_executors if e.spec.component == "slow"]
        registry = CollectorRegistry()
        registry.register(WorkerCollector(worker))
        queue = {"worker": "0", "queue": f"inbox:{slow.name}"}

        def sample(name: str, **labels: str) -> float:
            value = registry.get_sample_value(name, labels or queue)
            assert value is not None, name
            return value

        executed = {"worker": "0", "component": "slow"}
        eventually(lambda: sample("tuplemesh_tuples_executed_total", **executed) >= 20, timeout=20.0)
        if target_ms:
            eventually(lambda: sample("tuplemesh_queue_limit_slots") < 1024, timeout=10.0)
        return sample("tuplemesh_queue_limit_slots"), sample("tuplemesh_queue_capacity_slots")
    finally:
        worker.spout_executors[0].switch.deactivate()
        cluster.stop()


def test_the_limit_gauge_shows_the_time_bound_at_work():
    # >= 2 ms per slot and 10 ms of queue: at most 5 slots of 1024, never fewer than MIN_SLOTS
    limit, capacity = _limit_gauge_of_the_slow_inbox(10)
    assert capacity == 1024 and MIN_SLOTS <= limit <= 5
    # the bound off: producers may fill every slot, and the gauge says so
    assert _limit_gauge_of_the_slow_inbox(0) == (1024, 1024)
