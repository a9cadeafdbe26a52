"""Flood topologies: 1 MiB tuples faster than the bolt takes them. Shared by the flow benchmark
(``bench.flow``, worker RSS under a flood) and the flood fault tests (``tests/fault/test_flood.py``).

Two floods: from a peer (a hand-framed sender into ``topology``'s sink, whose spout emits nothing)
and from a spout (``big_topology``: a spout on worker 0 emitting 1 MiB tuples to a sink on
worker 1). Environment (read by the worker processes): ``FLOOD_GATE``, a file the sink waits for
before it takes its first tuple (a flood is then sure to meet the ceiling, whatever the machine's
speed); ``FLOOD_START``, a file the big spout waits for before it emits (so the caller can measure
the workers idle first); ``FLOOD_BIG_TUPLES``, how many tuples the big spout emits."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from tuplemesh.config import Config
from tuplemesh.topology import Bolt, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple
from tuplemesh.v1 import admin_pb2

MIB = 1024 * 1024
CEILING = Config({})["topology.receive.max.bytes"]  # the default: the flood meets default settings
TUPLES_PER_BATCH = 15  # of 1 MiB each: 15 MiB batches, near the largest message a transport takes
#: The sink task on worker 0: components are numbered in name order ("idle" 1, "sink" 2 and 3)
#: and executors placed round-robin (idle -> 0, sink task 2 -> 1, sink task 3 -> 0).
SINK_TASK = 3
#: The big spout's tuples unless $FLOOD_BIG_TUPLES says; it is on worker 0 and its sink on
#: worker 1 (names in order: "big", "sink"; round-robin)
BIG_TUPLES = 600


class IdleSpout(Spout):
    """Emits nothing: the flood comes from outside."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["blob"])

    def next_tuple(self) -> None:
        return None


class SlowSink(Bolt):
    """Stalls until the file named by $FLOOD_GATE exists (if set), then takes a millisecond per
    tuple: the flood is sure to meet the ceiling, whatever the machine's speed."""

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.count = 0
        self.gate = os.environ.get("FLOOD_GATE")

    def execute(self, tup: Tuple) -> None:
        while self.gate and not os.path.exists(self.gate):
            time.sleep(0.01)  # deliberate: stalled until the caller opens the gate
        self.gate = None
        time.sleep(0.001)  # deliberate: the slow consumer
        self.count += 1


def topology() -> Any:
    b = TopologyBuilder("flood")
    b.set_spout("idle", IdleSpout())
    b.set_bolt("sink", SlowSink(), parallelism=2).shuffle_grouping("idle")
    return b.build()


class BigSpout(Spout):
    """Emits $FLOOD_BIG_TUPLES (default ``BIG_TUPLES``) numbered tuples of 1 MiB each as fast as
    the runtime takes them, once the file named by $FLOOD_START exists (if set)."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["n", "blob"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.sent = 0
        self.total = int(os.environ.get("FLOOD_BIG_TUPLES", BIG_TUPLES))
        self.start = os.environ.get("FLOOD_START")
        self.blob = "x" * MIB

    def next_tuple(self) -> None:
        if self.start:
            if not os.path.exists(self.start):
                return  # not yet: the caller measures the idle workers meanwhile
            self.start = None
        if self.sent < self.total:
            self.collector.emit([self.sent, self.blob])
            self.sent += 1


class NumberSink(SlowSink):
    """SlowSink that also counts each number it saw (exactly once each, checked by the test)."""

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.seen: dict[int, int] = {}

    def execute(self, tup: Tuple) -> None:
        super().execute(tup)
        self.seen[tup.values[0]] = self.seen.get(tup.values[0], 0) + 1

    def report(self) -> dict[str, Any]:
        return {"distinct": len(self.seen), "twice": sum(1 for c in self.seen.values() if c > 1)}


def big_topology() -> Any:
    b = TopologyBuilder("bigflood")
    b.set_spout("big", BigSpout())
    b.set_bolt("sink", NumberSink()).shuffle_grouping("big")
    return b.build()


def sink_executed(status: admin_pb2.WorkerStatus) -> int:
    return sum(e.executed for e in status.executors if e.component == "sink")
