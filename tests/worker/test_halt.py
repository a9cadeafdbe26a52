"""A halted bolt executor stops after the tuple in hand, not after the rest of its batch (a slow
bolt would run past the shutdown timeout), and every tuple it leaves is counted as lost."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from tests.helpers import eventually
from tuplemesh.config import Config
from tuplemesh.topology import Bolt, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple
from tuplemesh.worker.local_cluster import LocalCluster

TUPLES = 200
#: the bolt's first execute blocks on this: the rest of the tuples queue behind it
gate = threading.Event()
inside = threading.Event()


class Numbers(Spout):
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["n"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        if self.n < TUPLES:
            self.collector.emit([self.n])
            self.n += 1

    def is_finished(self) -> bool:
        return self.n >= TUPLES


class SlowSink(Bolt):
    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.seen = 0

    def execute(self, tup: Tuple) -> None:
        inside.set()
        gate.wait(30)
        self.seen += 1


def test_a_halt_stops_after_the_tuple_in_hand_and_counts_the_rest_as_abandoned():
    b = TopologyBuilder("halt")
    b.set_spout("numbers", Numbers())
    b.set_bolt("sink", SlowSink()).shuffle_grouping("numbers")
    cluster = LocalCluster(b.build(), 1, Config({"messaging.transport": "local"}))
    cluster.start()
    try:
        worker = cluster.workers[0]
        [spout] = worker.spout_executors
        [sink] = worker.bolt_executors
        inside.wait(30)
        # every tuple emitted and handed to the sink's inbox while its first execute blocks
        eventually(lambda: spout.outbox.delivered == TUPLES, timeout=30)
        sink.halt()
        gate.set()
        assert sink.join(30)
        counters = sink.counters
        assert counters.executed == 1  # the tuple in hand, and none after it
        assert counters.abandoned_on_halt == TUPLES - 1
        [snapshot] = [e for e in worker.snapshot().executors if e.component == "sink"]
        assert (snapshot.executed, snapshot.abandoned_on_halt) == (1, TUPLES - 1)
    finally:
        gate.set()
        cluster.stop()
