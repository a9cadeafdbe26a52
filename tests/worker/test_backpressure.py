"""Per-task backpressure: a slow bolt slows only the producers that feed it.

Two branches share two workers: ``fast_src -> fast`` (paced at a rate both workers handle easily)
and ``slow_src -> slow`` (a bolt that takes 2 ms per tuple, fed as fast as it will go). Each
bolt has a task on each worker and shuffle grouping sends half of every spout's tuples across
the one connection between the workers. The fast branch must keep >= 80% of its solo rate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from tests.helpers import eventually
from tuplemesh.config import Config
from tuplemesh.topology import Bolt, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple
from tuplemesh.worker.local_cluster import LocalCluster

# tuples/s per fast spout task: low enough that a loaded 2-core machine still reaches it, so the
# ratio below measures blocking by the slow branch, not CPU starvation
FAST_RATE = 2000.0


class PacedSpout(Spout):
    def __init__(self, rate: float) -> None:
        self.rate = rate

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["n"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.started = time.monotonic()
        self.sent = 0

    def next_tuple(self) -> None:
        if not self.rate:
            return
        due = self.sent + 100 if self.rate < 0 else int((time.monotonic() - self.started) * self.rate)
        for _ in range(min(100, due - self.sent)):
            self.collector.emit([self.sent])
            self.sent += 1


class CountingBolt(Bolt):
    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.count = 0

    def execute(self, tup: Tuple) -> None:
        if self.delay:
            time.sleep(self.delay)  # deliberate: the slow bolt's per-tuple work
        self.count += 1


def topology(slow_branch: bool) -> Any:
    b = TopologyBuilder("branches")
    b.set_spout("fast_src", PacedSpout(FAST_RATE), parallelism=2)
    b.set_bolt("fast", CountingBolt(), parallelism=2).shuffle_grouping("fast_src")
    b.set_spout("slow_src", PacedSpout(-1.0 if slow_branch else 0.0), parallelism=2)  # -1: flat out
    b.set_bolt("slow", CountingBolt(delay=0.002), parallelism=2).shuffle_grouping("slow_src")
    return b.build()


def fast_rate(slow_branch: bool, transport: str) -> tuple[float, int]:
    conf = Config(
        {
            "messaging.transport": transport,
            # small inboxes fill within a second: the test is about what happens after that
            "topology.executor.receive.buffer.size": 64,
        }
    )
    cluster = LocalCluster(topology(slow_branch), 2, conf)
    cluster.start()
    try:
        time.sleep(2.0)  # deliberate: warm-up, and time for the slow branch to fill its queues
        before = cluster.counters()["fast"]["executed"]
        started = time.monotonic()
        time.sleep(4.0)  # deliberate: the measuring window
        executed = cluster.counters()["fast"]["executed"] - before
        rate = executed / (time.monotonic() - started)
        slow_done = cluster.counters()["slow"]["executed"]
    finally:
        for worker in cluster.workers:
            for spout in worker.spout_executors:
                spout.deactivate()
        cluster.stop()
    return rate, slow_done


@pytest.mark.parametrize("transport", ["grpc", "zmq"])
def test_fast_branch_keeps_80_percent_of_its_solo_rate_beside_a_slow_branch(transport: str):
    solo, _ = fast_rate(slow_branch=False, transport=transport)
    shared, slow_done = fast_rate(slow_branch=True, transport=transport)
    assert solo > 0.9 * 2 * FAST_RATE  # the paced rate is reachable alone
    assert slow_done > 1000  # the slow branch really ran, at its own pace
    assert shared >= 0.8 * solo, f"fast branch {shared:.0f}/s beside the slow one, {solo:.0f}/s alone"


def test_congestion_reports_replace_per_peer_and_leases_end():
    from tuplemesh.worker.congestion import CongestionMap

    congestion = CongestionMap(lease=0.05)
    congestion.report("a", [5, 6])
    congestion.report("b", [9])
    assert set(congestion.blocked) == {5, 6, 9}
    congestion.report("a", [6])  # a's full set now: 5 is clear, b's task untouched
    assert set(congestion.blocked) == {6, 9}
    started = time.monotonic()
    congestion.wait(6)  # nobody renews: the lease ends
    assert 0.03 <= time.monotonic() - started < 1.0
    congestion.report("a", [])
    congestion.report("b", [])
    assert congestion.blocked == {}
    congestion.wait(9)  # clear: returns at once


def test_receive_overflow_keeps_order_and_is_bounded():
    from tuplemesh.disruptor import EventPoller, RingBuffer
    from tuplemesh.worker.receive import ReceivePath

    rings: list[RingBuffer[Any]] = [RingBuffer.multi_producer(2), RingBuffer.multi_producer(2)]
    pollers = [EventPoller(r, release_slots=True) for r in rings]
    for ring, poller in zip(rings, pollers, strict=True):
        ring.add_gating_sequences(poller.sequence)
    path = ReceivePath(0, {1: rings[0], 2: rings[1]}, 60.0, overflow_limit=3)
    for i in range(5):  # 2 fit, 3 wait in the overflow; none blocks
        path.on_batch([(1, str(i).encode())])
    path.on_batch([(2, b"other")])  # another inbox is not held up by the full one
    assert path.overflowing == 3
    assert rings[1].remaining_capacity() == 1
    blocked = threading.Thread(target=path.on_batch, args=([(1, b"5")],))
    blocked.start()  # the overflow is full too: this receive thread must wait (bounded memory)
    blocked.join(0.2)
    assert blocked.is_alive() and path.overflowing == 3
    seen: list[bytes] = []

    def drained_all_six() -> bool:
        pollers[0].poll(lambda batch, seq, end: seen.extend(p for _, p in batch))
        path.move_overflow()
        return len(seen) >= 6

    eventually(drained_all_six, timeout=5, interval=0.005, message=lambda: f"drained {seen}")
    blocked.join(2)
    assert not blocked.is_alive()
    assert seen == [str(i).encode() for i in range(6)]  # arrival order, nothing lost
    assert path.overflowing == 0
