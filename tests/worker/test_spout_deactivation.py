"""Deactivating spouts waits for a next_tuple call under way: once `Worker.deactivate_spouts`
returns, every tuple the spouts will emit is counted, which is what a drain's idle waves rely on."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from tests.helpers import eventually
from tuplemesh.config import Config
from tuplemesh.topology import Bolt, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple
from tuplemesh.worker.local_cluster import LocalCluster

#: next_tuple blocks on this once asked to (a slow source, a thread the scheduler left behind).
release = threading.Event()
hold = threading.Event()
inside = threading.Event()


class GatedSpout(Spout):
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["n"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        if hold.is_set():
            inside.set()
            release.wait(30)
        self.collector.emit([self.n])
        self.n += 1


class Sink(Bolt):
    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.seen = 0

    def execute(self, tup: Tuple) -> None:
        self.seen += 1


def test_deactivating_spouts_waits_for_the_next_tuple_under_way_and_nothing_is_emitted_after():
    b = TopologyBuilder("deactivation")
    b.set_spout("s", GatedSpout())
    b.set_bolt("sink", Sink()).shuffle_grouping("s")
    cluster = LocalCluster(b.build(), 1, Config({"messaging.transport": "local"}))
    cluster.start()
    try:
        worker = cluster.workers[0]
        spout = worker.spout_executors[0]
        eventually(lambda: spout.counters.emitted >= 100, timeout=30)
        assert worker.snapshot().spouts_quiet is False  # an active spout may emit at any moment
        hold.set()
        inside.wait(30)
        # the spout is inside next_tuple: deactivation cannot be confirmed until it returns
        assert worker.deactivate_spouts(timeout=0.3) is False
        assert worker.snapshot().spouts_quiet is False  # what its status tells draining peers
        emitted_while_blocked = spout.counters.emitted
        release.set()
        assert worker.deactivate_spouts(timeout=30) is True
        assert worker.snapshot().spouts_quiet is True
        after = spout.counters.emitted
        assert after == emitted_while_blocked + 1  # the call under way finished its one emit
        threading.Event().wait(0.3)  # deliberate: time for a spout that were still called to emit
        assert spout.counters.emitted == after
    finally:
        release.set()
        cluster.stop()


class CountingSpout(Spout):
    """Emits one number per next_tuple call; counts its calls (none while the worker holds it)."""

    calls = 0

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["n"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def next_tuple(self) -> None:
        CountingSpout.calls += 1
        self.collector.emit([CountingSpout.calls])


def _held_cluster(name: str) -> LocalCluster:
    b = TopologyBuilder(name)
    b.set_spout("s", CountingSpout())
    b.set_bolt("sink", Sink()).shuffle_grouping("s")
    cluster = LocalCluster(b.build(), 1, Config({"messaging.transport": "local"}))
    CountingSpout.calls = 0
    cluster.workers[0].start(hold_spouts=True)
    return cluster


def test_held_spouts_are_opened_but_not_called_until_released():
    cluster = _held_cluster("held")
    try:
        worker = cluster.workers[0]
        spout = worker.spout_executors[0]
        threading.Event().wait(0.3)  # deliberate: time for a spout that were called to emit
        assert CountingSpout.calls == 0 and spout.counters.emitted == 0
        assert worker.snapshot().spouts_quiet is False  # held, not deactivated: it may emit soon
        worker.release_spouts()
        eventually(lambda: spout.counters.emitted >= 100, timeout=30)
    finally:
        cluster.stop()


def test_a_held_spout_that_is_deactivated_is_quiet_and_is_not_called_when_released():
    cluster = _held_cluster("held-then-deactivated")
    try:
        worker = cluster.workers[0]
        assert worker.deactivate_spouts(timeout=30) is True
        assert worker.snapshot().spouts_quiet is True
        worker.release_spouts()  # a late confirmation must not wake a drained spout
        threading.Event().wait(0.3)  # deliberate: time for a spout that were called to emit
        assert CountingSpout.calls == 0
    finally:
        cluster.stop()
