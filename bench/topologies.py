"""Benchmark topologies: a constant spout feeding a bolt that does nothing but measure.

``BENCH_RATE`` (tuples/s per spout task, 0 = as fast as possible) paces the spout; the bolt
keeps emit-to-execute latencies (the spout stamps ``time.monotonic()``, which is one clock for
every process on a Linux machine) in a bounded sample.
"""

from __future__ import annotations

import os
import time
from typing import Any

from tuplemesh.topology import BasicBolt, Bolt, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple

PAYLOAD = "x" * 100
SAMPLE_LIMIT = 200_000


class ConstSpout(Spout):
    def __init__(self, rate: float) -> None:
        self.rate = rate

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["sent_at", "payload"])

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.emit = collector.emit
        self.started = time.monotonic()
        self.sent = 0

    def next_tuple(self) -> None:
        emit = self.emit
        now = time.monotonic()
        if self.rate:
            due = int((now - self.started) * self.rate) - self.sent
            if due <= 0:
                return
            count = min(due, 200)
        else:
            count = 100
        for _ in range(count):
            emit([now, PAYLOAD])
        self.sent += count


class NullBolt(Bolt):
    """Samples every 10th tuple's emit-to-execute latency, apart for tuples that crossed from
    another worker process (``latencies``) and tuples from a spout in its own (``local_latencies``)."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.count = 0
        here = context.worker_index
        self.remote_tasks = {t for t, w in context.assignment.worker_of_task().items() if w != here}
        self.latencies: list[float] = []
        self.local_latencies: list[float] = []

    def execute(self, tup: Tuple) -> None:
        self.count += 1
        if self.count % 10 == 0:
            samples = self.latencies if tup.source_task in self.remote_tasks else self.local_latencies
            if len(samples) < SAMPLE_LIMIT:
                samples.append(time.monotonic() - tup.values[0])

    def report(self) -> Any:
        remote, local = sorted(self.latencies), sorted(self.local_latencies)
        self.latencies, self.local_latencies = [], []
        return {
            "count": self.count,
            "latencies": remote[:: max(1, len(remote) // 5000)],
            "local_latencies": local[:: max(1, len(local) // 5000)],
        }


def build() -> Any:
    rate = float(os.environ.get("BENCH_RATE", "0"))
    b = TopologyBuilder("constnull")
    b.set_spout("const", ConstSpout(rate), parallelism=2)
    # shuffle over one bolt task per worker: half of every spout's tuples cross to the other worker
    b.set_bolt("null", NullBolt(), parallelism=2).shuffle_grouping("const")
    return b.build()


class SlowBolt(NullBolt):
    """Ten times slower than the spout can feed it: holds the mesh at full backpressure."""

    def execute(self, tup: Tuple) -> None:
        self.count += 1
        if self.count % 20 == 0:
            time.sleep(0.001)


def build_slow() -> Any:
    b = TopologyBuilder("slowconsumer")
    b.set_spout("const", ConstSpout(0.0), parallelism=2)
    b.set_bolt("slow", SlowBolt(), parallelism=2).shuffle_grouping("const")
    return b.build()


class ReliableConstSpout(ConstSpout):
    """ConstSpout whose tuples are tracked trees when acking is on (message id: a counter)."""

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        super().open(conf, context, collector)
        reliable = conf["topology.acker.executors"] > 0
        emit = collector.emit
        ids = iter(range(1 << 62))
        self.emit = (lambda values: emit(values, msg_id=next(ids))) if reliable else emit


class AckingNullBolt(NullBolt, BasicBolt):
    """NullBolt acked for it by BasicBolt when acking is on."""


def build_reliable() -> Any:
    """build() with guaranteed processing available: on when topology.acker.executors > 0."""
    rate = float(os.environ.get("BENCH_RATE", "0"))
    b = TopologyBuilder("constnull")
    b.set_spout("const", ReliableConstSpout(rate), parallelism=2)
    b.set_bolt("null", AckingNullBolt(), parallelism=2).shuffle_grouping("const")
    return b.build()
