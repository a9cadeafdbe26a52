"""The batch API: ``execute_batch`` bolts and ``emit_many``, with acking on and off, local and grpc."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest

from examples import wordcount
from tuplemesh.config import Config
from tuplemesh.core.collectors import SpoutOutputCollector, StreamRoute
from tuplemesh.core.outbox import Outbox
from tuplemesh.core.tracker import SpoutTracker
from tuplemesh.disruptor import RingBuffer
from tuplemesh.serialization import load_serializer
from tuplemesh.topology import BasicBolt, Bolt, Fields, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple
from tuplemesh.topology.groupings import ShuffleGrouping
from tuplemesh.worker.executor_base import ExecutorCounters
from tuplemesh.worker.local_cluster import LocalCluster

IDS = 600
FAN = 3


class IdSpout(Spout):
    """Emits ids 0..n-1 with ``emit_many`` (msg id = id when acking is on); replays failed ids."""

    def __init__(self, n: int) -> None:
        self.n = n

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["id"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.reliable = conf["topology.acker.executors"] > 0
        self.todo = list(range(context.task_index, self.n, len(context.component_tasks)))[::-1]
        self.acked: list[int] = []
        self.failed: list[int] = []

    def next_tuple(self) -> None:
        ids = [self.todo.pop() for _ in range(min(20, len(self.todo)))]
        if ids:
            self.collector.emit_many([[i] for i in ids], msg_ids=ids if self.reliable else None)

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)
        self.todo.append(msg_id)

    def is_finished(self) -> bool:
        return not self.todo

    def report(self) -> Any:
        return {"acked": self.acked, "failed": self.failed}


class FanBolt(BasicBolt):
    """``execute_batch``: FAN (id, part) tuples per input, anchored to it, in one emit_many per input."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["id", "part"])

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute_batch(self, tuples: list[Tuple]) -> None:
        for tup in tuples:
            self.collector.emit_many([[tup.values[0], part] for part in range(FAN)], tup)


class SinkBolt(Bolt):
    """A plain Bolt on ``execute_batch``: records each call and acks every input itself. Raises once,
    before acking, on the first call holding ``raise_on``."""

    def __init__(self, raise_on: int | None = None) -> None:
        self.raise_on = raise_on

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.task = context.task_id
        self.calls: list[list[list[int]]] = []
        self.raised_on: list[int] = []

    def execute_batch(self, tuples: list[Tuple]) -> None:
        self._record(tuples)
        for tup in tuples:
            self.collector.ack(tup)

    def _record(self, tuples: list[Tuple]) -> None:
        pairs = [list(t.values) for t in tuples]
        if self.raise_on is not None and not self.raised_on and [self.raise_on, 0] in pairs:
            self.raised_on = sorted({i for i, _ in pairs})
            raise RuntimeError("fails one batch")
        self.calls.append(pairs)

    def execute(self, tup: Tuple) -> None:
        raise AssertionError("execute is never called on a bolt with execute_batch")

    def report(self) -> Any:
        return {"task": self.task, "calls": self.calls, "raised_on": self.raised_on}


class BasicSinkBolt(BasicBolt, SinkBolt):
    """The same, as a BasicBolt: the runtime acks every input when ``execute_batch`` returns."""

    def execute_batch(self, tuples: list[Tuple]) -> None:
        self._record(tuples)


def build(sink: Bolt) -> Any:
    builder = TopologyBuilder("batches")
    builder.set_spout("ids", IdSpout(IDS), parallelism=2)
    builder.set_bolt("fan", FanBolt(), parallelism=2).shuffle_grouping("ids")
    builder.set_bolt("sink", sink, parallelism=3).fields_grouping("fan", ["id"])
    return builder.build()


def run(topology: Any, transport: str, ackers: int, **extra: Any) -> tuple[Any, dict[str, list[Any]]]:
    conf = Config({"messaging.transport": transport, "topology.acker.executors": ackers, **extra})
    cluster = LocalCluster(topology, 2, conf)
    summary = cluster.run(60.0)
    assert summary.completed, summary.message
    return summary, cluster.reports()


@pytest.mark.parametrize("transport", ["local", "grpc"])
@pytest.mark.parametrize("ackers", [0, 2])
@pytest.mark.parametrize("sink", [SinkBolt, BasicSinkBolt])
def test_execute_batch_sees_every_tuple_once_in_per_task_batches(transport, ackers, sink):
    summary, reports = run(build(sink()), transport, ackers)
    seen: Counter[tuple[int, int]] = Counter()
    ids_of_task: dict[int, set[int]] = {}
    calls = 0
    biggest = 0
    for report in reports["sink"]:
        for call in report["calls"]:
            calls += 1
            biggest = max(biggest, len(call))
            seen.update((i, part) for i, part in call)
            ids_of_task.setdefault(report["task"], set()).update(i for i, _ in call)
    assert seen == Counter({(i, part): 1 for i in range(IDS) for part in range(FAN)})
    # fields grouping on "id": every call holds only the ids of the task it was made on
    tasks = list(ids_of_task.values())
    assert sum(len(ids) for ids in tasks) == IDS == len(set().union(*tasks))
    assert biggest > 1 and calls < IDS * FAN  # batches, not one call per tuple
    components = summary.components
    assert components["sink"]["executed"] == IDS * FAN
    assert components["fan"]["executed"] == IDS
    assert components["fan"]["emitted"] == IDS * FAN
    acked = sorted(i for r in reports["ids"] for i in r["acked"])
    assert not any(r["failed"] for r in reports["ids"])
    if ackers:
        assert acked == list(range(IDS))  # every tree completed exactly once
        assert components["sink"]["acked"] == IDS * FAN
        assert components["fan"]["acked"] == IDS
    else:
        assert acked == []  # no msg ids without ackers
        assert components["sink"]["acked"] == (IDS * FAN if sink is SinkBolt else 0)


def test_an_execute_batch_call_holds_at_most_the_producer_batch_size():
    summary, reports = run(build(SinkBolt()), "grpc", 0, **{"topology.producer.batch.size": 7})
    sizes = [len(call) for r in reports["sink"] for call in r["calls"]]
    assert sum(sizes) == IDS * FAN and max(sizes) == 7
    assert summary.components["sink"]["executed"] == IDS * FAN


@pytest.mark.parametrize("transport", ["local", "grpc"])
@pytest.mark.parametrize("sink", [SinkBolt, BasicSinkBolt])
def test_a_raising_execute_batch_fails_every_tuple_of_the_call_and_they_replay(transport, sink):
    summary, reports = run(build(sink(raise_on=7)), transport, ackers=2)
    [raised_on] = [r["raised_on"] for r in reports["sink"] if r["raised_on"]]
    assert 7 in raised_on
    failed = [i for r in reports["ids"] for i in r["failed"]]
    assert sorted(failed) == raised_on  # the trees of that call's inputs, each failed once
    assert sorted(i for r in reports["ids"] for i in r["acked"]) == list(range(IDS))
    components = summary.components
    assert components["sink"]["errors"] == 1
    failed_tuples = components["sink"]["failed"]
    assert failed_tuples >= len(raised_on)  # every (id, part) of the call, and a call holds parts
    assert components["sink"]["acked"] == IDS * FAN + len(raised_on) * FAN - failed_tuples


@pytest.mark.parametrize("transport", ["local", "grpc"])
@pytest.mark.parametrize("ackers", [0, 2])
def test_batched_wordcount_is_exact(transport, ackers):
    repeat = 40
    summary, reports = run(wordcount.build(repeat=repeat, spouts=2, batched=True), transport, ackers)
    assert summary.matched, summary.message
    sentences = repeat * len(wordcount.CORPUS)
    assert summary.components["split"]["executed"] == sentences
    assert summary.components["count"]["executed"] == sum(wordcount.expected_counts(repeat).values())
    assert sum(r["emitted"] for r in reports["sentences"]) == sentences
    assert sum(r["acked"] for r in reports["sentences"]) == (sentences if ackers else 0)


def _collector() -> tuple[SpoutOutputCollector, Outbox, ExecutorCounters, SpoutTracker]:
    inbox: RingBuffer[Any] = RingBuffer.multi_producer(16)
    outbox = Outbox(
        local_inboxes={1: inbox},
        remote_workers={2: 5},
        transfer_ring=RingBuffer.multi_producer(16),
        serializer=load_serializer("msgpack"),
        batch_size=100,
        send_capacity=1000,
    )
    fields = Fields(["word"])
    chooser = ShuffleGrouping().chooser((1, 2), frozenset({1}), fields)
    route = StreamRoute("default", 0, fields, False, [chooser], frozenset())
    counters = ExecutorCounters()
    tracker = SpoutTracker(30.0, 0)
    collector = SpoutOutputCollector(9, "spout", {"default": route}, outbox, counters, tracker)
    return collector, outbox, counters, tracker


def test_emit_many_checks_every_row_before_delivering_any() -> None:
    collector, outbox, counters, tracker = _collector()
    with pytest.raises(ValueError, match=r"emitted 2 values for 1 declared fields \['word'\]"):
        collector.emit_many([["a"], ["b"], ["c", "extra"]])
    with pytest.raises(ValueError, match="undeclared stream 'other'"):
        collector.emit_many([["a"]], stream="other")
    with pytest.raises(ValueError, match="3 rows but 2 msg_ids"):
        collector.emit_many([["a"], ["b"], ["c"]], msg_ids=[1, 2])
    assert outbox.delivered == 0 and counters.emitted == 0
    collector.emit_many([["a"], ["b"], ["c"], ["d"]], msg_ids=[1, None, 3, None])
    assert outbox.delivered == 4 and outbox.pending == 4 and counters.emitted == 4
    # acking off: a msg id is complete at once, as with emit
    assert tracker.acked_at_once == [(9, 1), (9, 3)]


class CountingBolt(Bolt):
    """A per-tuple bolt: counts every id it executes."""

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.seen: Counter[int] = Counter()

    def execute(self, tup: Tuple) -> None:
        self.seen[tup.values[0]] += 1

    def report(self) -> Any:
        return dict(self.seen)


@pytest.mark.parametrize("transport", ["local", "grpc"])
def test_a_per_tuple_bolt_executes_each_tuple_of_an_emit_many(transport):
    builder = TopologyBuilder("many-to-one")
    builder.set_spout("ids", IdSpout(IDS), parallelism=2)
    builder.set_bolt("count", CountingBolt(), parallelism=3).all_grouping("ids")
    summary, reports = run(builder.build(), transport, 0)
    assert len(reports["count"]) == 3
    for seen in reports["count"]:  # all grouping: every task sees every id once
        assert {int(i): n for i, n in seen.items()} == {i: 1 for i in range(IDS)}
    assert summary.components["count"]["executed"] == 3 * IDS
    assert summary.components["count"]["received"] == 3 * IDS


def test_tuples_in_rows_payloads_count_one_by_one_in_transfer_and_receive():
    """An emit_many to a task in another worker travels as one rows payload; every count of
    tuples sent, received or lost still counts its tuples, so sent and received balance."""
    builder = TopologyBuilder("crossing")
    builder.set_spout("ids", IdSpout(IDS), parallelism=1)  # task 1 on worker 0
    builder.set_bolt("sink", SinkBolt(), parallelism=1).shuffle_grouping("ids")  # task 2 on worker 1
    cluster = LocalCluster(builder.build(), 2, Config({"messaging.transport": "grpc"}))
    summary = cluster.run(60.0)
    assert summary.completed, summary.message
    sender, receiver = (worker.snapshot() for worker in cluster.workers)
    assert sender.transfer.sent_tuples == IDS and sender.transfer.lost_tuples == 0
    assert receiver.binding.received_tuples == IDS
    assert summary.transfer["messages"] == IDS
    assert summary.components["sink"]["executed"] == IDS
