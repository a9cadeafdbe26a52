"""End-to-end behaviour of workers in local mode: groupings, streams, errors, flush, backpressure."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

from examples import wordcount
from tests.helpers import GateBolt, ListSpout, RecordingBolt, eventually
from tuplemesh.config import Config
from tuplemesh.errors import MessageTooLargeError, ReceiverStoppedError
from tuplemesh.topology import Bolt, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple
from tuplemesh.worker.local_cluster import LocalCluster

LOCAL = Config({"messaging.transport": "local"})


def run(topology, workers=2, timeout=30.0, **conf: Any):
    cluster = LocalCluster(topology, workers, Config({"messaging.transport": "local", **conf}))
    summary = cluster.run(timeout)
    assert summary.completed, summary.message
    return summary, cluster.reports()


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_wordcount_exact_on_n_workers(workers):
    summary, _ = run(wordcount.build(repeat=50, spouts=2), workers)
    assert summary.matched, summary.message
    assert summary.components["split"]["executed"] == 50 * len(wordcount.CORPUS)
    assert summary.components["count"]["executed"] == sum(wordcount.expected_counts(50).values())
    assert summary.transfer["lost"] == 0 and summary.transfer["unknown_task"] == 0
    if workers > 1:
        assert summary.transfer["messages"] > 0  # tuples really crossed workers


def test_all_global_and_shuffle_groupings():
    items = [[i] for i in range(60)]
    b = TopologyBuilder("g")
    b.set_spout("s", ListSpout(items, ["n"]))
    b.set_bolt("every", RecordingBolt(), parallelism=2, tasks=3).all_grouping("s")
    b.set_bolt("one", RecordingBolt(), parallelism=3).global_grouping("s")
    b.set_bolt("spread", RecordingBolt(), parallelism=3).shuffle_grouping("s")
    _, reports = run(b.build(), workers=3)
    for r in reports["every"]:
        assert sorted(v[0][0] for v in r["seen"]) == list(range(60))
    lowest = min(r["task"] for r in reports["one"])
    assert [len(r["seen"]) for r in reports["one"] if r["task"] == lowest] == [60]
    assert sum(len(r["seen"]) for r in reports["one"]) == 60
    spread = [len(r["seen"]) for r in reports["spread"]]
    assert sum(spread) == 60 and all(n == 20 for n in spread)  # round-robin over whole rounds


def test_fields_grouping_same_key_same_task_across_workers():
    items = [[f"k{i % 17}", i] for i in range(340)]
    b = TopologyBuilder("f")
    b.set_spout("s", ListSpout(items, ["key", "i"]), parallelism=3)
    b.set_bolt("by_key", RecordingBolt(), parallelism=4).fields_grouping("s", ["key"])
    _, reports = run(b.build(), workers=3)
    owner: dict[str, int] = {}
    total = 0
    for r in reports["by_key"]:
        for values, *_ in r["seen"]:
            assert owner.setdefault(values[0], r["task"]) == r["task"]
            total += 1
    assert total == 340 and len(owner) == 17


class Director(Spout):
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare_stream("to", ["n"], direct=True)
        declarer.declare_stream("side", ["label"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.targets = context.tasks_of("sink")
        self.sent = False

    def next_tuple(self):
        if not self.sent:
            for i, task in enumerate(self.targets):
                for _ in range(i + 1):
                    self.collector.emit_direct(task, [task], stream="to")
            self.collector.emit(["hello"], stream="side")
            self.sent = True

    def is_finished(self):
        return self.sent


def test_direct_grouping_and_named_streams():
    b = TopologyBuilder("d")
    b.set_spout("s", Director())
    b.set_bolt("sink", RecordingBolt(), parallelism=3).direct_grouping("s", "to")
    b.set_bolt("side", RecordingBolt()).shuffle_grouping("s", "side")
    _, reports = run(b.build(), workers=2)
    sinks = sorted(reports["sink"], key=lambda r: r["task"])
    for i, r in enumerate(sinks):
        assert [v[0][0] for v in r["seen"]] == [r["task"]] * (i + 1)
        assert all(v[2] == "to" for v in r["seen"])
    assert [v[:3] for v in reports["side"][0]["seen"]] == [[["hello"], "s", "side"]]


class TypeProbe(Bolt):
    def prepare(self, conf, context, collector):
        self.kinds: list[str] = []

    def execute(self, tup: Tuple) -> None:
        self.kinds.append(type(tup.values).__name__)

    def report(self):
        return self.kinds


class TupleSpout(ListSpout):
    def next_tuple(self):
        item = next(self.mine, None)
        if item is None:
            self.done = True
        else:
            self.collector.emit(tuple(item))  # a Python tuple: survives only unserialized


def test_local_deliveries_skip_serialization():
    b = TopologyBuilder("ser")
    b.set_spout("s", TupleSpout([[i] for i in range(40)], ["n"]))
    b.set_bolt("probe", TypeProbe(), parallelism=2).shuffle_grouping("s")
    summary, reports = run(b.build(), workers=2)
    kinds = Counter(k for r in reports["probe"] for k in r)
    # executors: probe[1] -> worker 0, probe[2] -> worker 1, s -> worker 0 (round-robin by name)
    assert kinds == {"tuple": 20, "list": 20}
    assert summary.transfer["messages"] == 20


class Exploding(Bolt):
    def prepare(self, conf, context, collector):
        self.ok = 0

    def execute(self, tup):
        if tup.values[0] % 3 == 0:
            raise RuntimeError(f"bad {tup.values[0]}")
        self.ok += 1

    def report(self):
        return self.ok


def test_bolt_exception_keeps_executor_alive_and_fails_tuple():
    b = TopologyBuilder("x")
    b.set_spout("s", ListSpout([[i] for i in range(30)], ["n"]))
    b.set_bolt("boom", Exploding()).shuffle_grouping("s")
    summary, reports = run(b.build(), workers=2)
    assert reports["boom"] == [20]
    assert summary.components["boom"]["errors"] == 10
    assert summary.components["boom"]["failed"] == 10
    assert summary.components["boom"]["executed"] == 30


class BadEmitter(Bolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["a", "b"])

    def execute(self, tup):
        if tup.values[0] == 0:
            self.collector.emit([1])  # wrong arity
        elif tup.values[0] == 1:
            self.collector.emit([1, 2], stream="nope")
        else:
            self.collector.emit([1, 2])

    def prepare(self, conf, context, collector):
        self.collector = collector


def test_bad_emits_are_errors_naming_the_problem(caplog):
    b = TopologyBuilder("e")
    b.set_spout("s", ListSpout([[0], [1], [2]], ["n"]))
    b.set_bolt("emitter", BadEmitter()).shuffle_grouping("s")
    b.set_bolt("sink", RecordingBolt()).shuffle_grouping("emitter")
    summary, reports = run(b.build(), workers=1, **{"tuplemesh.log.rate.limit.secs": 0})
    assert summary.components["emitter"]["errors"] == 2
    assert len(reports["sink"][0]["seen"]) == 1
    text = caplog.text
    assert "emitted 1 values for 2 declared fields" in text
    assert "undeclared stream 'nope'" in text


def test_flush_interval_delivers_partial_batches():
    """With a huge batch size nothing fills a batch: the flush timer alone must deliver."""
    b = TopologyBuilder("fl")
    b.set_spout("s", ListSpout([[i] for i in range(5)], ["n"]))
    b.set_bolt("mid", RecordingBolt(["n"]), parallelism=2).shuffle_grouping("s")
    b.set_bolt("end", RecordingBolt()).shuffle_grouping("mid")
    _, reports = run(
        b.build(),
        workers=2,
        **{
            "topology.producer.batch.size": 10_000,
            "topology.transfer.batch.size": 10_000,
            "topology.batch.flush.interval.millis": 5,
        },
    )
    assert sorted(v[0][0] for v in reports["end"][0]["seen"]) == [0, 1, 2, 3, 4]


def test_backpressure_bounds_what_a_blocked_bolt_holds():
    GateBolt.gate.clear()
    items = [[i] for i in range(5000)]
    b = TopologyBuilder("bp")
    b.set_spout("s", ListSpout(items, ["n"]))
    b.set_bolt("slow", GateBolt()).shuffle_grouping("s")
    conf = LOCAL.with_overrides(
        {"topology.executor.receive.buffer.size": 8, "topology.producer.batch.size": 10}
    )
    cluster = LocalCluster(b.build(), 1, conf)
    cluster.start()
    try:
        worker = cluster.workers[0]
        spout = worker.spout_executors[0]
        inbox = worker.local_inbox_of_task[worker.assignment.tasks_of("slow")[0]]
        # full: batches, or partial ones the flush timer sent while the spout was slow to emit
        eventually(lambda: inbox.remaining_capacity() == 0, message="the bolt's inbox never filled")
        # deliberate: time in which a spout that ignored the full inbox would emit thousands
        time.sleep(0.5)
        held = spout.outbox.delivered
        # inbox 8 batches x 10 + the batch in hand + one partial buffer: nothing close to 5000
        assert held <= 8 * 10 + 10 + 10, held
        time.sleep(0.3)  # deliberate: nothing more may be accepted while the bolt stays blocked
        assert spout.outbox.delivered == held, "spout kept emitting into a full inbox"
    finally:
        GateBolt.gate.set()
    assert cluster.run_until_done(30)
    cluster.stop()
    assert cluster.reports()["slow"] == [5000]


def test_unknown_task_and_shutdown_notice_on_receive_path(caplog):
    b = TopologyBuilder("u")
    b.set_spout("s", ListSpout([], ["n"]))
    b.set_bolt("sink", RecordingBolt()).shuffle_grouping("s")
    cluster = LocalCluster(b.build(), 1, LOCAL)
    cluster.start()
    worker = cluster.workers[0]
    try:
        sink_task = cluster.workers[0].assignment.tasks_of("sink")[0]
        payload = worker.new_serializer().serialize(2, worker.plan.stream_ids[("s", "default")], [41])
        rejected = worker.receive.on_batch([(999, b"x"), (sink_task, payload), (998, b"y")])
        assert rejected == [999, 998]
        assert worker.receive.unknown == 2
        assert "message(s) for tasks it does not own, e.g. task 999" in caplog.text
        assert not worker.receive.shutdown_notice.is_set()
        worker.receive.on_batch([(-1, b"")])
        assert worker.receive.shutdown_notice.is_set()
        eventually(lambda: worker.bolt_executors[0].counters.executed == 1, timeout=5)
    finally:
        cluster.stop()
    assert cluster.reports()["sink"][0]["seen"] == [[[41], "s", "default", 2]]


def test_undecodable_payload_is_counted_and_executor_survives(caplog):
    b = TopologyBuilder("bad")
    b.set_spout("s", ListSpout([], ["n"]))
    b.set_bolt("sink", RecordingBolt()).shuffle_grouping("s")
    cluster = LocalCluster(b.build(), 1, LOCAL)
    cluster.start()
    worker = cluster.workers[0]
    sink_task = worker.assignment.tasks_of("sink")[0]
    good = worker.new_serializer().serialize(2, worker.plan.stream_ids[("s", "default")], ["fine"])
    worker.receive.on_batch([(sink_task, b"\xc1garbage"), (sink_task, good)])
    executor = worker.bolt_executors[0]
    eventually(lambda: executor.counters.received == 2, timeout=5)
    cluster.stop()
    assert executor.counters.deserialize_errors == 1 and executor.counters.failed == 1
    assert cluster.reports()["sink"][0]["seen"] == [[["fine"], "s", "default", 2]]
    assert "undecodable" in caplog.text


def test_broadcast_message_reaches_every_task_of_the_executor():
    b = TopologyBuilder("bc")
    b.set_spout("s", ListSpout([], ["n"]))
    b.set_bolt("multi", RecordingBolt(), parallelism=1, tasks=3).shuffle_grouping("s")
    cluster = LocalCluster(b.build(), 1, LOCAL)
    cluster.start()
    worker = cluster.workers[0]
    executor = worker.bolt_executors[0]
    fields = b.build().components["s"].streams["default"].fields
    executor.inbox.put([(None, Tuple(["all"], 4, "s", "default", fields))])
    eventually(lambda: executor.counters.executed == 3, timeout=5)
    cluster.stop()
    assert executor.counters.executed == 3 and executor.counters.received == 1
    assert [len(r["seen"]) for r in cluster.reports()["multi"]] == [1, 1, 1]


def test_bad_config_fails_before_anything_starts():
    with pytest.raises(Exception, match=r"topology\.tuple\.serializer"):
        LocalCluster(
            wordcount.build(repeat=1), 2, LOCAL.with_overrides({"topology.tuple.serializer": "nosuch:thing"})
        )


class Forever(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(["n"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.i = 0

    def next_tuple(self):
        self.i += 1
        self.collector.emit([self.i])


def test_infinite_topology_stops_cleanly_on_request():
    b = TopologyBuilder("inf")
    b.set_spout("s", Forever())
    b.set_bolt("sink", RecordingBolt(), parallelism=2).shuffle_grouping("s")
    cluster = LocalCluster(b.build(), 2, LOCAL)
    cluster.start()
    assert not cluster.run_until_done(0.3)
    started = time.monotonic()
    assert cluster.stop()
    assert time.monotonic() - started < 10
    assert not [t for t in threading.enumerate() if t.name.startswith(("executor-", "transfer", "flusher-"))]


class _Signal(Exception):
    pass


def test_a_run_interrupted_mid_flight_drains_every_worker_at_once_and_sums_up():
    """A signal in the middle of a 3-worker word count (small queues: much in flight between
    the workers): the spouts stop, what is in flight drains through every worker, then they
    stop. Stopped one after another instead, a worker would refuse what the others still send
    it (counted undeliverable)."""
    conf = Config(
        {
            "messaging.transport": "local",
            "topology.receiver.buffer.size": 2,
            "topology.executor.receive.buffer.size": 16,
        }
    )
    cluster = LocalCluster(wordcount.build(repeat=200_000), 3, conf)
    polls = 0

    def signal_after_a_while() -> None:
        nonlocal polls
        polls += 1
        if cluster.counters().get("count", {}).get("executed", 0) > 50_000:
            raise _Signal

    with pytest.raises(_Signal):
        cluster.run(120, check=signal_after_a_while)
    summary = cluster.interrupt("SIGTERM")
    assert summary.interrupted and not summary.completed and summary.matched is None
    assert summary.message == "interrupted by SIGTERM; workers stopped"
    components = summary.components
    sentences = components["sentences"]["emitted"]
    assert 0 < sentences < 200_000 * len(wordcount.CORPUS)  # cut short, not run to the end
    assert components["split"]["executed"] == sentences
    assert components["count"]["executed"] == components["split"]["emitted"] > 50_000
    assert summary.transfer["undeliverable"] == 0 and summary.transfer["lost"] == 0
    assert summary.transfer["messages"] > 0  # words crossed workers
    assert not [t for t in threading.enumerate() if t.name.startswith(("executor-", "transfer", "flusher-"))]


@pytest.mark.parametrize("workers", [2, 3])
def test_wordcount_over_grpc_between_in_process_workers(workers):
    """The same runtime with each worker on its own loopback gRPC port inside one process."""
    cluster = LocalCluster(
        wordcount.build(repeat=100, spouts=2), workers, Config({"messaging.transport": "grpc"})
    )
    summary = cluster.run(60)
    assert summary.completed and summary.matched, summary.message
    assert summary.transfer["messages"] > 0 and summary.transfer["lost"] == 0


class BigEmitter(Bolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["blob"])

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.refused: list[str] = []

    def execute(self, tup):
        try:
            self.collector.emit(["x" * tup.values[0]])
        except MessageTooLargeError as exc:
            self.refused.append(str(exc))

    def report(self):
        return self.refused


def test_over_size_tuple_is_an_error_in_the_emitting_code():
    # executors by name: a_emitter -> worker 0, b_sink -> worker 1, s -> worker 0:
    # every emit from the emitter crosses workers and is serialized
    b = TopologyBuilder("big")
    b.set_spout("s", ListSpout([[10], [5000], [20]], ["size"]))
    b.set_bolt("a_emitter", BigEmitter()).shuffle_grouping("s")
    b.set_bolt("b_sink", RecordingBolt()).shuffle_grouping("a_emitter")
    summary, reports = run(b.build(), workers=2, **{"messaging.max.message.bytes": 1000})
    [refused] = reports["a_emitter"]
    assert len(refused) == 1
    assert "'a_emitter' emitted a 50" in refused[0] and "messaging.max.message.bytes is 1000" in refused[0]
    assert sorted(len(v[0][0]) for v in reports["b_sink"][0]["seen"]) == [10, 20]
    assert summary.components["a_emitter"]["errors"] == 0  # the bolt caught it: its choice
    assert summary.transfer["lost"] == 0


def test_halted_inbox_refuses_the_batch_instead_of_acknowledging_it():
    """A stopping worker must not accept (and so let the sender forget) what it cannot run."""
    b = TopologyBuilder("halt")
    b.set_spout("s", ListSpout([], ["n"]))
    b.set_bolt("sink", RecordingBolt()).shuffle_grouping("s")
    cluster = LocalCluster(b.build(), 1, LOCAL)
    cluster.start()
    worker = cluster.workers[0]
    sink_task = worker.assignment.tasks_of("sink")[0]
    worker.bolt_executors[0].halt()
    assert worker.bolt_executors[0].join(5)
    with pytest.raises(ReceiverStoppedError, match="worker 0 is stopping; 1 message"):
        worker.receive.on_batch([(sink_task, b"payload"), (777, b"x")])
    assert worker.receive.undeliverable == 1 and worker.receive.unknown == 1
    cluster.stop()
