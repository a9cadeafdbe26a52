"""Per-task backpressure: a stalled bolt holds up only the producers that feed it.

Two branches share two workers: ``fast_src -> fast`` (a task of each on each worker, shuffle
grouping sends half of its tuples across) and ``slow_src -> slow`` (one task each, on different
workers, so all of its tuples cross the one connection between the workers). The slow bolt
stalls completely until the test releases it, so its inbox fills and its spout is held back.
The fast branch must still deliver every one of its tuples while the slow one is stalled: with
head-of-line blocking on the shared connection it would never finish. No rate or duration is
measured, so load cannot change the outcome.
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

FAST_TUPLES = 3000  # per fast spout task
SLOW_TUPLES = 40000  # from the one slow spout task: many times what the slow branch's queues hold

#: set by the test once the fast branch is done; the slow bolt waits for it (one process: LocalCluster)
RELEASE_SLOW = threading.Event()


class CountedSpout(Spout):
    """Emits ``total`` numbers as fast as the runtime takes them, then finishes."""

    def __init__(self, total: int) -> None:
        self.total = total

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["n"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.sent = 0

    def next_tuple(self) -> None:
        for _ in range(min(100, self.total - self.sent)):
            self.collector.emit([self.sent])
            self.sent += 1


class CountingBolt(Bolt):
    def __init__(self, stall: bool = False) -> None:
        self.stall = stall

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.count = 0

    def execute(self, tup: Tuple) -> None:
        if self.stall:
            RELEASE_SLOW.wait(120.0)  # deliberate: the stalled consumer, until the test releases it
        self.count += 1


def topology() -> Any:
    b = TopologyBuilder("branches")
    b.set_spout("fast_src", CountedSpout(FAST_TUPLES), parallelism=2)
    b.set_bolt("fast", CountingBolt(), parallelism=2).shuffle_grouping("fast_src")
    # one task each, placed round-robin in name order: "slow" on worker 0, "slow_src" on worker 1,
    # so every slow tuple crosses the connection the fast branch also uses
    b.set_spout("slow_src", CountedSpout(SLOW_TUPLES), parallelism=1)
    b.set_bolt("slow", CountingBolt(stall=True), parallelism=1).shuffle_grouping("slow_src")
    return b.build()


@pytest.mark.parametrize("transport", ["local", "grpc", "zmq"])
def test_a_stalled_branch_holds_up_only_its_own_producers(transport: str):
    RELEASE_SLOW.clear()
    conf = Config(
        {
            "messaging.transport": transport,
            # small inboxes fill at once: the test is about what happens after that
            "topology.executor.receive.buffer.size": 64,
            # and batches no larger than an emit's: merged into 10,000-tuple batches, the
            # whole slow branch would fit in a few slots and its spout would never be held
            "topology.transfer.batch.size": 100,
            "messaging.coalesce.ms": 0,  # nor joined into larger stream messages (grpc)
            "topology.transfer.buffer.size": 64,  # nor all queued for the peer before it reports
        }
    )
    cluster = LocalCluster(topology(), 2, conf)
    cluster.start()
    try:
        executed = lambda name: cluster.counters()[name]["executed"]  # noqa: E731

        def slow_spout() -> Any:
            snapshots = cluster.snapshots()
            (spout,) = [e for snap in snapshots for e in snap.executors if e.component == "slow_src"]
            return spout

        eventually(
            lambda: executed("fast") == 2 * FAST_TUPLES,
            timeout=120,
            interval=0.05,
            message=lambda: f"fast executed {executed('fast')} of {2 * FAST_TUPLES} beside a stalled branch",
        )
        # the stalled branch is held back by its congested task, which the executor's snapshot
        # (Admin, /metrics) shows while the hold lasts
        eventually(
            lambda: slow_spout().backpressure_holds >= 1,
            timeout=120,
            interval=0.05,
            message=lambda: f"the slow spout was not held on its congested task: {slow_spout()}",
        )
        # and it is still held back: its bolt has taken at most one tuple
        assert executed("slow") <= 1
        RELEASE_SLOW.set()
        eventually(
            lambda: executed("slow") == SLOW_TUPLES,
            timeout=120,
            interval=0.05,
            message=lambda: f"slow executed {executed('slow')} of {SLOW_TUPLES} once released",
        )
        time.sleep(0.2)  # deliberate: nothing more arrives after the exact counts (no duplicates)
        assert executed("fast") == 2 * FAST_TUPLES
        assert executed("slow") == SLOW_TUPLES
        assert slow_spout().backpressure_hold_seconds > 0.0
    finally:
        RELEASE_SLOW.set()
        cluster.stop()


def test_a_full_local_inbox_holds_its_producer_and_the_wait_is_counted():
    """A bolt in the spout's own worker takes no congestion reports: the spout waits for room
    in its inbox, and the queue counts that wait and its time as it goes."""
    RELEASE_SLOW.clear()
    b = TopologyBuilder("local_stall")
    b.set_spout("src", CountedSpout(2000), parallelism=1)
    b.set_bolt("sink", CountingBolt(stall=True), parallelism=1).shuffle_grouping("src")
    cluster = LocalCluster(b.build(), 1, Config({"topology.executor.receive.buffer.size": 16}))
    cluster.start()
    try:

        def inbox() -> Any:
            (queue,) = [q for q in cluster.snapshots()[0].queues if q.name.startswith("inbox:sink")]
            return queue

        eventually(
            lambda: inbox().producer_waits >= 1,
            timeout=60,
            interval=0.05,
            message=lambda: f"the spout's wait for room in the full inbox is not counted: {inbox()}",
        )
        assert cluster.counters()["sink"]["executed"] <= 1
        RELEASE_SLOW.set()
        eventually(
            lambda: cluster.counters()["sink"]["executed"] == 2000,
            timeout=60,
            interval=0.05,
            message=lambda: f"sink executed {cluster.counters()['sink']['executed']} of 2000 once released",
        )
        assert inbox().producer_wait_seconds > 0.0
        (spout,) = [e for e in cluster.snapshots()[0].executors if e.component == "src"]
        assert spout.backpressure_holds == 0, "no task of another worker was congested"
    finally:
        RELEASE_SLOW.set()
        cluster.stop()


def test_congestion_reports_replace_per_peer_and_leases_end():
    from tuplemesh.core.congestion import CongestionMap

    congestion = CongestionMap(lease=0.05)
    congestion.report("a", [5, 6])
    congestion.report("b", [9])
    assert set(congestion.blocked) == {5, 6, 9}
    reported = time.monotonic()
    congestion.report("a", [6])  # a's full set now: 5 is clear, b's task untouched; 6's lease renewed
    assert set(congestion.blocked) == {6, 9}
    congestion.wait(6)  # nobody renews: the lease ends
    assert time.monotonic() - reported >= 0.05
    congestion.report("a", [])
    congestion.report("b", [])
    assert congestion.blocked == {}
    congestion.wait(9)  # clear: returns at once


def test_a_hold_is_counted_once_with_its_time_and_a_clear_task_is_none():
    from tuplemesh.core.congestion import CongestionMap

    class Holds:
        backpressure_holds = 0
        backpressure_hold_seconds = 0.0

    congestion = CongestionMap(lease=60.0)  # only the clearing report below ends the hold
    holds = Holds()
    congestion.report("a", [7])

    def clear_once_counted() -> None:
        eventually(lambda: holds.backpressure_holds == 1, timeout=30, message="the hold is not counted")
        time.sleep(0.01)  # deliberate: the hold lasts a while after it is counted
        congestion.report("a", [])

    clearer = threading.Thread(target=clear_once_counted, daemon=True)
    began = time.monotonic()
    clearer.start()
    congestion.wait(7, holds)
    clearer.join(30)
    assert holds.backpressure_holds == 1
    assert 0.01 <= holds.backpressure_hold_seconds <= time.monotonic() - began
    congestion.wait(7, holds)  # clear now: returns at once, and no hold is counted
    assert holds.backpressure_holds == 1


def test_a_hold_ends_before_its_lease_once_the_interrupt_says_so():
    """How a spout executor held on a congested task reads a checkpoint's trigger at once: its
    check for such a message ends the hold, the report still standing."""
    from tuplemesh.core.congestion import CongestionMap

    class Holds:
        backpressure_holds = 0
        backpressure_hold_seconds = 0.0

    congestion = CongestionMap(lease=60.0)
    holds = Holds()
    congestion.report("a", [7])
    message = threading.Event()

    def message_once_held() -> None:  # the message comes while the emitter holds
        eventually(lambda: holds.backpressure_holds == 1, timeout=30, message="the hold is not counted")
        message.set()

    threading.Thread(target=message_once_held, daemon=True).start()
    congestion.wait(7, holds, message.is_set)  # returns long before the 60 s lease
    assert message.is_set() and holds.backpressure_holds == 1
    assert 7 in congestion.blocked  # still congested: the next emit to it holds again


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


def test_what_waits_in_the_overflow_at_stop_is_counted_as_undeliverable():
    from tuplemesh.disruptor import EventPoller, RingBuffer
    from tuplemesh.worker.receive import ReceivePath

    ring: RingBuffer[Any] = RingBuffer.multi_producer(2)
    ring.add_gating_sequences(EventPoller(ring, release_slots=True).sequence)  # never polled
    path = ReceivePath(0, {1: ring}, 60.0, overflow_limit=3, max_held_bytes=1 << 20)
    for i in range(4):  # 2 fit, 2 wait in the overflow (nothing consumes the ring)
        path.on_batch([(1, b"x" * 10), (1, str(i).encode())])
    assert path.overflowing == 2 and path.undeliverable == 0
    assert path.abandon_overflow() == 4  # two batches of two messages
    assert path.overflowing == 0 and path.undeliverable == 4
    assert path.abandon_overflow() == 0 and path.undeliverable == 4


def test_local_workers_that_feed_each_other_never_block_in_a_cycle():
    """Three in-process workers whose splits send words to each other's counters, with small
    queues. Were a full inbox to block the local receive thread, each worker's transfer thread
    could wait on another's full mailbox, whose receive thread waits on a full split inbox, whose
    split waits on the full transfer ring behind the first: a cycle no run ever leaves. The
    local transport reports congested tasks instead, as a network one does, so every run ends
    with the exact counts."""
    from examples import wordcount

    conf = Config(
        {
            "messaging.transport": "local",
            "topology.receiver.buffer.size": 1,  # one batch per mailbox
            "topology.executor.receive.buffer.size": 8,
            "topology.transfer.buffer.size": 8,
        }
    )
    for attempt in range(3):
        summary = LocalCluster(wordcount.build(repeat=2000), 3, conf).run(timeout=120)
        assert summary.completed and summary.matched, f"run {attempt}: {summary.message}"
        words = sum(wordcount.expected_counts(2000).values())
        assert summary.components["split"]["emitted"] == words, summary.components["split"]


@pytest.mark.parametrize("workers", [1, 2])
def test_turning_backpressure_off_warns_of_what_a_full_inbox_then_blocks(workers, caplog):
    """With topology.backpressure.enable false a full inbox blocks the receive thread (every
    buffer stays bounded), and workers that send to each other can then block one another for
    good: each worker of a mesh says so as it starts. One worker alone has no receive thread."""
    from examples import wordcount

    conf = Config({"messaging.transport": "local", "topology.backpressure.enable": False})
    with caplog.at_level("WARNING", logger="tuplemesh.worker.worker"):
        summary = LocalCluster(wordcount.build(repeat=5), workers, conf).run(timeout=60)
    assert summary.completed and summary.matched, summary.message
    warned = [r.getMessage() for r in caplog.records if "no per-task backpressure" in r.getMessage()]
    if workers == 1:
        assert warned == []
    else:
        assert warned == [
            f"worker {i}: no per-task backpressure (topology.backpressure.enable is false): a full "
            "inbox blocks the receive thread, holding up every task fed over the same connection, "
            "and workers that send to each other can block one another for good"
            for i in range(workers)
        ]
