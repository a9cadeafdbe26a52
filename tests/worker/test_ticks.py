"""Tick tuples: per topology and per component, never counted as data, never piling up."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

import pytest

from tests.helpers import eventually
from tuplemesh.errors import TopologyError
from tuplemesh.server.status_proto import snapshot_from_proto, snapshot_to_proto
from tuplemesh.ticks import TICK
from tuplemesh.topology import BasicBolt, Bolt, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple
from tuplemesh.worker.local_cluster import LocalCluster


class Numbers(Spout):
    def __init__(self, count: int) -> None:
        self.count = count

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["n"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.sent = 0

    def next_tuple(self) -> None:
        if self.sent < self.count:
            self.collector.emit([self.sent], msg_id=self.sent)
            self.sent += 1

    def is_finished(self) -> bool:
        return self.sent >= self.count


class TickRecorder(Bolt):
    """Counts ticks and data apart; acks data; emits one tuple per tick (unanchored)."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["ticks"])

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.ticks = 0
        self.data = 0
        self.tick_streams: set[tuple[str, str]] = set()

    def execute(self, tup: Tuple) -> None:
        if tup.is_tick():
            self.ticks += 1
            self.tick_streams.add((tup.source_component, tup.source_stream))
            return
        self.data += 1
        self.collector.ack(tup)

    def report(self) -> Any:
        return {"ticks": self.ticks, "data": self.data, "streams": sorted(self.tick_streams)}


class Blocked(Bolt):
    """Blocks in ``execute`` of its first data tuple until ``release`` is set."""

    release = threading.Event()
    ticks = 0

    def execute(self, tup: Tuple) -> None:
        if tup.is_tick():
            type(self).ticks += 1
            return
        Blocked.release.wait(30)


def ticked_topology(every: float | None, topology_ticks: float | None = None) -> Any:
    builder = TopologyBuilder("ticks")
    builder.set_spout("numbers", Numbers(200))
    declarer = builder.set_bolt("ticked", TickRecorder(), parallelism=2).shuffle_grouping("numbers")
    if every is not None:
        declarer.tick_every(every)
    builder.set_bolt("plain", TickRecorder()).shuffle_grouping("numbers")
    conf = {} if topology_ticks is None else {"topology.tick.tuple.freq.secs": topology_ticks}
    return builder.build(conf)


def run_until_ticks(topology: Any, component: str, at_least: int, conf: Mapping[str, Any]) -> LocalCluster:
    cluster = LocalCluster(topology, 1, conf)
    cluster.start()
    bolts = [
        bolt
        for worker in cluster.workers
        for executor in worker.bolt_executors
        if executor.spec.component == component
        for bolt in executor.bolts.values()
    ]
    eventually(lambda: cluster.run_until_done(0.01) and all(b.ticks >= at_least for b in bolts), 15)
    return cluster


def test_component_ticks_reach_every_task_on_the_system_tick_stream_and_count_as_nothing():
    cluster = run_until_ticks(ticked_topology(0.02), "ticked", 5, {"topology.acker.executors": 1})
    counters = cluster.counters()
    cluster.stop()
    reports = cluster.reports()
    assert [r["streams"] for r in reports["ticked"]] == [[("__system", "__tick")]] * 2
    assert all(r["ticks"] >= 5 for r in reports["ticked"])
    assert reports["plain"] == [{"ticks": 0, "data": 200, "streams": []}]  # no ticks without asking
    assert sum(r["data"] for r in reports["ticked"]) == 200
    # ticks are not data: executed and received count the 200 tuples only; no tick was acked
    assert counters["ticked"]["executed"] == 200
    assert counters["ticked"]["received"] == 200
    assert counters["ticked"]["acked"] == 200
    assert counters["ticked"]["errors"] == 0
    assert counters["numbers"]["acked"] == 200 and counters["numbers"]["failed"] == 0


def test_the_ticks_feature_reports_each_timer_in_the_worker_status():
    cluster = run_until_ticks(ticked_topology(0.02), "ticked", 3, {})
    try:
        worker = cluster.workers[0]
        timers = worker.features["ticks"].timers
        snapshot = worker.snapshot()
        section = snapshot.feature_sections["ticks"]
        assert sorted(section) == sorted(timers) and len(section) == 2  # the two "ticked" executors
        for timer in section.values():
            assert set(timer) == {"period_seconds", "queued", "skipped"}
            assert timer["period_seconds"] == 0.02 and timer["queued"] >= 3
            assert isinstance(timer["skipped"], int)  # the timers run on: no exact count to hold
        # the same section in Admin's status, as JSON
        status = snapshot_to_proto(snapshot)
        assert json.loads(status.feature_sections_json)["ticks"] == section
        assert snapshot_from_proto(status).feature_sections == snapshot.feature_sections
    finally:
        cluster.stop()


def test_topology_ticks_reach_every_bolt_and_a_component_setting_overrides_them():
    cluster = run_until_ticks(ticked_topology(0.0, topology_ticks=0.02), "plain", 3, {})
    cluster.stop()
    reports = cluster.reports()
    assert reports["plain"][0]["ticks"] >= 3
    assert [r["ticks"] for r in reports["ticked"]] == [0, 0]  # tick_every(0): none for this one


def test_tick_every_rejects_negative_seconds():
    builder = TopologyBuilder("bad")
    builder.set_spout("numbers", Numbers(1))
    with pytest.raises(TopologyError, match="tick_every"):
        builder.set_bolt("b", TickRecorder()).shuffle_grouping("numbers").tick_every(-1)


def test_a_backpressured_bolt_never_has_more_than_one_tick_pending():
    Blocked.release.clear()
    Blocked.ticks = 0
    builder = TopologyBuilder("blocked")
    builder.set_spout("numbers", Numbers(100_000))
    builder.set_bolt("blocked", Blocked()).shuffle_grouping("numbers").tick_every(0.005)
    conf = {"topology.executor.receive.buffer.size": 8, "topology.producer.batch.size": 1}
    cluster = LocalCluster(builder.build(), 1, conf)
    cluster.start()
    try:
        executor = next(e for e in cluster.workers[0].bolt_executors if e.spec.component == "blocked")
        timer = cluster.workers[0].features["ticks"].timers[executor.name]
        assert timer is not None
        inbox = executor.inbox

        def ticks_in_inbox() -> int:
            consumed = executor.processor.sequence.value
            return sum(1 for seq in range(consumed + 1, inbox.cursor + 1) if inbox.get(seq) is TICK)

        # the inbox fills behind the blocked bolt; periods go by without queuing another tick
        eventually(lambda: inbox.remaining_capacity() == 0 and timer.skipped >= 50, 15)
        assert ticks_in_inbox() <= 1
        assert timer.queued - Blocked.ticks <= 1  # at most one queued tick not yet run
        Blocked.release.set()
        eventually(lambda: Blocked.ticks >= 3, 15)  # ticks flow again once the bolt moves
        assert ticks_in_inbox() <= 1
    finally:
        Blocked.release.set()
        cluster.stop()


class BatchTicks(BasicBolt):
    """A batch bolt: ticks come as one-tuple batches; acked for it (its data only) by BasicBolt."""

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.ticks = 0
        self.data = 0

    def execute_batch(self, tuples: list[Tuple]) -> None:
        for tup in tuples:
            if tup.is_tick():
                assert len(tuples) == 1
                self.ticks += 1
            else:
                self.data += 1

    def report(self) -> Any:
        return {"ticks": self.ticks, "data": self.data}


def test_a_batch_bolt_gets_ticks_as_batches_and_ticks_are_never_acked():
    builder = TopologyBuilder("batch-ticks")
    builder.set_spout("numbers", Numbers(200))
    builder.set_bolt("batched", BatchTicks()).shuffle_grouping("numbers").tick_every(0.02)
    cluster = run_until_ticks(builder.build(), "batched", 3, {"topology.acker.executors": 1})
    counters = cluster.counters()
    cluster.stop()
    assert cluster.reports()["batched"][0]["data"] == 200
    assert counters["batched"]["acked"] == 200 and counters["batched"]["executed"] == 200
    assert counters["numbers"]["acked"] == 200
