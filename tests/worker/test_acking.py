"""Guaranteed processing: tuple trees tracked by ackers, spout ack/fail, timeouts, replay, limits."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest

from examples import wordcount
from tests.helpers import eventually
from tuplemesh.acking import ACKER
from tuplemesh.config import Config
from tuplemesh.topology import BasicBolt, Bolt, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple
from tuplemesh.worker.local_cluster import LocalCluster

ACKING = {"messaging.transport": "local", "topology.acker.executors": 2}


def run(topology, workers=3, timeout=60.0, **conf: Any):
    cluster = LocalCluster(topology, workers, Config({**ACKING, **conf}))
    summary = cluster.run(timeout)
    assert summary.completed, summary.message
    return summary, cluster.reports()


class ReplayingSpout(Spout):
    """Emits ids 0..n-1 with msg_id = id; re-emits an id whose tree failed; records every verdict."""

    def __init__(self, n: int, per_call: int = 8) -> None:
        self.n = n
        self.per_call = per_call

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["id"])
        declarer.declare_stream("unheard", ["id"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        tasks = context.component_tasks
        self.todo = list(range(context.task_index, self.n, len(tasks)))[::-1]
        self.acked: list[int] = []
        self.failed: list[int] = []
        self.open_ids: set[int] = set()
        self.max_open = 0

    def next_tuple(self) -> None:
        for _ in range(self.per_call):
            if not self.todo:
                return
            i = self.todo.pop()
            self.open_ids.add(i)
            self.max_open = max(self.max_open, len(self.open_ids))
            self.collector.emit([i], msg_id=i)

    def ack(self, msg_id: Any) -> None:
        self.open_ids.discard(msg_id)
        self.acked.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.open_ids.discard(msg_id)
        self.failed.append(msg_id)
        self.todo.append(msg_id)

    def is_finished(self) -> bool:
        return not self.todo

    def report(self) -> Any:
        return {"acked": self.acked, "failed": self.failed, "max_open": self.max_open}


class FanOutBolt(BasicBolt):
    """Emits ``fan`` tuples per input (anchored for it by BasicBolt)."""

    def __init__(self, fan: int) -> None:
        self.fan = fan

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["id", "part"])

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Tuple) -> None:
        for part in range(self.fan):
            self.collector.emit([tup.values[0], part])


class SinkBolt(BasicBolt):
    """Counts (id, part) pairs; raises once for ids in ``fail_once`` (BasicBolt then fails the tuple),
    and swallows (never acks) the first sight of ids in ``drop_once``."""

    def __init__(self, fail_once: frozenset[int] = frozenset(), drop_once: frozenset[int] = frozenset()):
        self.fail_once = fail_once
        self.drop_once = drop_once

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.seen: Counter[int] = Counter()
        self.raised: set[int] = set()
        self.dropped: set[int] = set()

    def execute(self, tup: Tuple) -> None:
        i = tup.values[0]
        if i in self.fail_once and i not in self.raised:
            self.raised.add(i)
            raise ValueError(f"fails {i} once")
        self.seen[i] += 1

    def report(self) -> Any:
        return {"seen": dict(self.seen)}


class DroppingBolt(Bolt):
    """A plain Bolt: acks explicitly, except the first sight of ids in ``drop_once`` (never acked)."""

    def __init__(self, drop_once: frozenset[int]) -> None:
        self.drop_once = drop_once

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.dropped: set[int] = set()
        self.seen: Counter[int] = Counter()

    def execute(self, tup: Tuple) -> None:
        i = tup.values[0]
        if i in self.drop_once and i not in self.dropped:
            self.dropped.add(i)
            return  # neither acked nor failed: the tree can only time out
        self.seen[i] += 1
        self.collector.ack(tup)

    def report(self) -> Any:
        return {"seen": dict(self.seen), "dropped": sorted(self.dropped)}


def spout_reports(reports: Mapping[str, list[Any]]) -> tuple[list[int], list[int]]:
    acked = [i for r in reports["spout"] for i in r["acked"]]
    failed = [i for r in reports["spout"] for i in r["failed"]]
    return acked, failed


def test_every_tree_acked_once_across_workers_with_fan_out():
    b = TopologyBuilder("trees")
    b.set_spout("spout", ReplayingSpout(600), parallelism=2)
    b.set_bolt("fan", FanOutBolt(3), parallelism=3).shuffle_grouping("spout")
    b.set_bolt("sink", SinkBolt(), parallelism=3).fields_grouping("fan", ["id"])
    summary, reports = run(b.build())
    acked, failed = spout_reports(reports)
    assert sorted(acked) == list(range(600)) and failed == []
    seen: Counter[int] = Counter()
    for r in reports["sink"]:
        seen.update({int(k): v for k, v in r["seen"].items()})
    assert seen == Counter({i: 3 for i in range(600)})
    assert summary.components["spout"]["acked"] == 600
    assert summary.components["fan"]["acked"] == 600 and summary.components["sink"]["acked"] == 1800
    ackers = reports[ACKER]
    assert len(ackers) == 2 and sum(a["completed"] for a in ackers) == 600
    assert sum(a["pending"] + a["failed"] + a["expired"] for a in ackers) == 0
    assert summary.transfer["messages"] > 0  # trees crossed workers


def test_a_failed_tuple_fails_its_tree_and_the_spout_replays_it():
    failing = frozenset(range(0, 300, 10))
    b = TopologyBuilder("fails")
    b.set_spout("spout", ReplayingSpout(300))
    b.set_bolt("fan", FanOutBolt(2), parallelism=2).shuffle_grouping("spout")
    b.set_bolt("sink", SinkBolt(fail_once=failing), parallelism=2).fields_grouping("fan", ["id"])
    summary, reports = run(b.build())
    acked, failed = spout_reports(reports)
    assert sorted(failed) == sorted(failing)  # each failing id failed exactly once, then replayed
    assert sorted(acked) == list(range(300))
    assert summary.components["sink"]["errors"] == len(failing)
    assert summary.components["spout"]["failed"] == len(failing)
    assert summary.components["spout"]["timed_out"] == 0
    assert sum(a["failed"] for a in reports[ACKER]) == len(failing)


def test_an_unacked_tuple_times_out_and_is_replayed():
    dropping = frozenset({3, 17, 42})
    b = TopologyBuilder("timeouts")
    b.set_spout("spout", ReplayingSpout(60))
    b.set_bolt("sink", DroppingBolt(dropping)).shuffle_grouping("spout")  # one task: drops each once
    started = time.monotonic()
    summary, reports = run(b.build(), workers=2, **{"topology.message.timeout.secs": 1.0})
    acked, failed = spout_reports(reports)
    assert sorted(failed) == sorted(dropping)
    assert sorted(acked) == list(range(60))
    assert summary.components["spout"]["timed_out"] == 3
    assert time.monotonic() - started >= 1.0  # the replays waited for the timeout


def test_max_spout_pending_bounds_open_trees():
    class SlowSink(BasicBolt):
        def execute(self, tup: Tuple) -> None:
            time.sleep(0.001)  # deliberate: a slow bolt, so open trees pile up at the spout

    b = TopologyBuilder("pending")
    b.set_spout("spout", ReplayingSpout(400, per_call=50))
    b.set_bolt("sink", SlowSink()).shuffle_grouping("spout")
    _, reports = run(b.build(), workers=2, **{"topology.max.spout.pending": 7})
    acked, _ = spout_reports(reports)
    assert sorted(acked) == list(range(400))
    # next_tuple may emit its whole batch once it is allowed to run, so the bound is 7 + per_call - 1
    assert 7 <= reports["spout"][0]["max_open"] <= 7 + 50 - 1


def test_max_spout_pending_with_single_emits_is_exact():
    b = TopologyBuilder("pending1")
    b.set_spout("spout", ReplayingSpout(200, per_call=1))
    b.set_bolt("sink", SinkBolt()).shuffle_grouping("spout")
    _, reports = run(b.build(), workers=2, **{"topology.max.spout.pending": 5})
    assert reports["spout"][0]["max_open"] == 5


class PairingBolt(Bolt):
    """Joins consecutive tuples in pairs: one emit anchored to both, then acks both."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["id"])

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.held: Tuple | None = None

    def execute(self, tup: Tuple) -> None:
        if self.held is None:
            self.held = tup
            return
        first, self.held = self.held, None
        self.collector.emit([first.values[0] * 1000 + tup.values[0]], anchors=[first, tup])
        self.collector.ack(first)
        self.collector.ack(tup)


def test_multi_anchored_tuple_fails_both_roots():
    # 0 and 1 are joined into 1 (0*1000+1) which fails once: both spout tuples fail and replay.
    b = TopologyBuilder("pairs")
    b.set_spout("spout", ReplayingSpout(10, per_call=1))
    b.set_bolt("pair", PairingBolt()).global_grouping("spout")
    b.set_bolt("sink", SinkBolt(fail_once=frozenset({1}))).shuffle_grouping("pair")
    _, reports = run(b.build(), workers=2)
    acked, failed = spout_reports(reports)
    assert sorted(failed) == [0, 1]
    assert sorted(acked) == list(range(10))


def test_no_subscriber_acks_at_once_and_acking_off_acks_every_msg_id():
    class SideSpout(ReplayingSpout):
        def next_tuple(self) -> None:
            while self.todo:
                i = self.todo.pop()
                self.collector.emit([i], stream="unheard", msg_id=i)

    b = TopologyBuilder("unheard")
    b.set_spout("spout", SideSpout(20))
    b.set_bolt("sink", SinkBolt()).shuffle_grouping("spout")
    summary, reports = run(b.build(), workers=1)
    assert sorted(spout_reports(reports)[0]) == list(range(20))
    assert sum(a["completed"] for a in reports[ACKER]) == 0  # no tree was ever opened

    b = TopologyBuilder("off")
    b.set_spout("spout", ReplayingSpout(50))
    b.set_bolt("sink", SinkBolt()).shuffle_grouping("spout")
    summary, reports = run(b.build(), workers=2, **{"topology.acker.executors": 0})
    assert sorted(spout_reports(reports)[0]) == list(range(50))
    assert ACKER not in summary.components  # no acker tasks, no system streams
    assert summary.components["sink"]["acked"] == 0  # a BasicBolt acks nothing with acking off


@pytest.mark.parametrize("transport", ["local", "grpc"])
def test_wordcount_with_acking_is_exact_and_fully_acked(transport):
    summary, reports = run(
        wordcount.build(repeat=30, spouts=2), workers=3, **{"messaging.transport": transport}
    )
    assert summary.matched, summary.message
    sentences = 30 * len(wordcount.CORPUS)
    assert sum(r["acked"] for r in reports["sentences"]) == sentences
    assert sum(r["failed"] for r in reports["sentences"]) == 0
    assert summary.components["split"]["acked"] == sentences


def test_user_ack_and_fail_exceptions_are_contained():
    class Grumpy(ReplayingSpout):
        def ack(self, msg_id: Any) -> None:
            super().ack(msg_id)
            raise RuntimeError("ack handler broke")

    b = TopologyBuilder("grumpy")
    b.set_spout("spout", Grumpy(30))
    b.set_bolt("sink", SinkBolt()).shuffle_grouping("spout")
    summary, reports = run(b.build(), workers=2)
    assert sorted(spout_reports(reports)[0]) == list(range(30))
    assert summary.components["spout"]["spout_errors"] == 30  # spout code, counted apart
    assert summary.components["spout"]["errors"] == 0


def test_shutdown_while_trees_are_open_does_not_hang():
    gate = threading.Event()

    class Stuck(BasicBolt):
        def execute(self, tup: Tuple) -> None:
            gate.wait(5)

    b = TopologyBuilder("stuck")
    b.set_spout("spout", ReplayingSpout(10))
    b.set_bolt("sink", Stuck()).shuffle_grouping("spout")
    cluster = LocalCluster(b.build(), 1, Config(ACKING))
    cluster.start()
    spout = cluster.workers[0].spout_executors[0]
    eventually(lambda: spout.open_trees == 10, message=lambda: f"open trees {spout.open_trees}, not 10")
    gate.set()
    assert cluster.stop()


class CorruptingSerializer:
    """msgpack, except that the first spout tuple that crosses workers is garbled on the wire."""

    corrupted = threading.Event()
    victim: int | None = None

    def __init__(self) -> None:
        from tuplemesh.serialization import MsgpackSerializer

        self._inner = MsgpackSerializer()
        self.deserialize = self._inner.deserialize

    def serialize(self, source_task: int, stream_id: int, values: Any, anchors: Any = None) -> bytes:
        payload = self._inner.serialize(source_task, stream_id, values, anchors)
        one_id = len(values) == 1 and type(values[0]) is int
        if one_id and anchors is not None and not self.corrupted.is_set():
            type(self).victim = values[0]
            type(self).corrupted.set()
            return b"\xc1" + payload  # 0xc1 is never valid msgpack
        return payload


def test_an_undecodable_tracked_tuple_times_out_and_is_replayed():
    b = TopologyBuilder("garbled")
    b.set_spout("spout", ReplayingSpout(20, per_call=1))
    b.set_bolt("sink", SinkBolt(), parallelism=2).shuffle_grouping("spout")
    summary, reports = run(
        b.build(),
        workers=2,
        **{
            "topology.tuple.serializer": "tests.worker.test_acking:CorruptingSerializer",
            "topology.message.timeout.secs": 1.0,
        },
    )
    acked, failed = spout_reports(reports)
    assert CorruptingSerializer.corrupted.is_set()
    assert summary.components["sink"]["deserialize_errors"] == 1
    assert failed == [CorruptingSerializer.victim] and summary.components["spout"]["timed_out"] == 1
    assert sorted(acked) == list(range(20))
