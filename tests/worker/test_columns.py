"""Columnar execution: ``process(batch)`` bolts, ``emit_columns``, columns payloads and groupings
that split a whole batch at once; acking on and off, local and grpc."""

from __future__ import annotations

import array
import random
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest

from examples import wordcount
from examples.stateful_wordcount import ReplayableSentenceSpout, StatefulCountBolt
from tests.helpers import ListSpout, local_and_remote_outbox
from tuplemesh.acking import ACKER
from tuplemesh.acking.collectors import TrackedBoltCollector, TreeIds, TupleEdges
from tuplemesh.acking.mailbox import AckerMailbox
from tuplemesh.config import Config
from tuplemesh.core.collectors import BoltOutputCollector, StreamRoute
from tuplemesh.core.markers import Batch
from tuplemesh.core.outbox import Outbox
from tuplemesh.disruptor import RingBuffer
from tuplemesh.errors import MessageTooLargeError
from tuplemesh.serialization import (
    ANCHORED_COLUMNS_MARKER,
    COLUMNS_MARKER,
    ROWS_HEADER_BYTES,
    anchors_of,
    flat_anchors,
    frame_rows,
    load_serializer,
    rows_count,
    tuples_in,
)
from tuplemesh.state.protocol import COORDINATOR
from tuplemesh.topology import (
    AnchoredTuple,
    BasicBolt,
    Bolt,
    Columns,
    Fields,
    OutputFieldsDeclarer,
    Spout,
    TopologyBuilder,
    Tuple,
)
from tuplemesh.topology.components import entry_point
from tuplemesh.topology.groupings import (
    AllGrouping,
    CustomGrouping,
    FieldsGrouping,
    GlobalGrouping,
    ShuffleGrouping,
    TaskChooser,
)
from tuplemesh.worker.executor import BoltExecutor
from tuplemesh.worker.executor_base import ExecutorCounters, ExecutorWiring
from tuplemesh.worker.local_cluster import LocalCluster
from tuplemesh.worker.plan import WorkerPlan

IDS = 900
FAN = 3


class ColumnSpout(Spout):
    """Emits ids 0..n-1 as one column per call (``emit_columns``; with acking on, msg id = id, or
    with ``whole`` one batch id per call: the tuple of its ids); replays failed ids."""

    def __init__(self, n: int, per_call: int = 50, whole: bool = False) -> None:
        self.n = n
        self.per_call = per_call
        self.whole = whole

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["id"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.reliable = conf["topology.acker.executors"] > 0
        self.todo = list(range(context.task_index, self.n, len(context.component_tasks)))[::-1]
        self.acked: list[int] = []
        self.failed: list[int] = []

    def next_tuple(self) -> None:
        ids = [self.todo.pop() for _ in range(min(self.per_call, len(self.todo)))]
        if not ids:
            return
        if self.whole:
            self.collector.emit_columns([ids], batch_id=tuple(ids) if self.reliable else None)
        else:
            self.collector.emit_columns([ids], msg_ids=ids if self.reliable else None)

    def ack(self, msg_id: Any) -> None:
        self.acked.extend(msg_id if type(msg_id) is tuple else [msg_id])

    def fail(self, msg_id: Any) -> None:
        ids = list(msg_id) if type(msg_id) is tuple else [msg_id]
        self.failed.extend(ids)
        self.todo.extend(ids)

    def is_finished(self) -> bool:
        return not self.todo

    def report(self) -> Any:
        return {"acked": self.acked, "failed": self.failed}


class FanBolt(BasicBolt):
    """``process``: FAN (id, part) rows per input id, as two columns; with acking on, one
    emit_columns per input, anchored to it."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["id", "part"])

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.reliable = conf["topology.acker.executors"] > 0

    def process(self, batch: Columns) -> None:
        assert isinstance(batch, Columns) and batch.source_component == "ids"
        if self.reliable and batch.anchors is not None:  # tracked as a whole: anchor to the batch
            ids = batch.column("id")
            self.collector.emit_columns(
                [[i for i in ids for _ in range(FAN)], [p for _ in ids for p in range(FAN)]], batch
            )
            return
        if self.reliable:
            for tup in batch:
                self.collector.emit_columns([[tup.values[0]] * FAN, list(range(FAN))], tup)
            return
        ids = batch.column("id")
        self.collector.emit_columns(
            [[i for i in ids for _ in range(FAN)], [p for _ in ids for p in range(FAN)]]
        )

    def execute(self, tup: Tuple) -> None:
        raise AssertionError("execute is never called on a bolt with process")


class SinkBolt(Bolt):
    """``process``: records each call's rows and source, acks every row itself; raises once,
    before acking, on the first call holding id ``raise_on``."""

    def __init__(self, raise_on: int | None = None) -> None:
        self.raise_on = raise_on

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.task = context.task_id
        self.calls: list[list[list[int]]] = []
        self.sources: list[list[Any]] = []
        self.raised_on: list[int] = []

    def process(self, batch: Columns) -> None:
        pairs = [[i, p] for i, p in zip(batch.column("id"), batch.column("part"), strict=True)]
        assert len(batch) == len(pairs) and [list(t.values) for t in batch] == pairs
        if self.raise_on is not None and not self.raised_on and [self.raise_on, 0] in pairs:
            self.raised_on = sorted({i for i, _ in pairs})
            raise RuntimeError("fails one batch")
        self.calls.append(pairs)
        self.sources.append([batch.source_component, batch.source_stream, batch.source_task])
        for tup in batch:
            self.collector.ack(tup)

    def report(self) -> Any:
        return {"task": self.task, "calls": self.calls, "sources": self.sources, "raised_on": self.raised_on}


def build(sink: Bolt, spout_per_call: int = 50, whole: bool = False) -> Any:
    builder = TopologyBuilder("columns")
    builder.set_spout("ids", ColumnSpout(IDS, spout_per_call, whole), parallelism=2)
    builder.set_bolt("fan", FanBolt(), parallelism=2).shuffle_grouping("ids")
    builder.set_bolt("sink", sink, parallelism=3).fields_grouping("fan", ["id"])
    return builder.build()


def run(topology: Any, transport: str, ackers: int, **extra: Any) -> tuple[Any, LocalCluster]:
    conf = Config({"messaging.transport": transport, "topology.acker.executors": ackers, **extra})
    cluster = LocalCluster(topology, 2, conf)
    summary = cluster.run(60.0)
    assert summary.completed, summary.message
    return summary, cluster


@pytest.mark.parametrize("transport", ["local", "grpc"])
@pytest.mark.parametrize(("ackers", "whole"), [(0, False), (2, False), (2, True)])
def test_process_sees_every_row_once_in_batches_of_one_source(transport, ackers, whole):
    summary, cluster = run(build(SinkBolt(), whole=whole), transport, ackers)
    reports = cluster.reports()
    fan_tasks = set(cluster.workers[0].plan.assignment.tasks_of("fan"))
    seen: Counter[tuple[int, int]] = Counter()
    ids_of_task: dict[int, set[int]] = {}
    biggest = 0
    calls = 0
    for report in reports["sink"]:
        for call, source in zip(report["calls"], report["sources"], strict=True):
            calls += 1
            biggest = max(biggest, len(call))
            seen.update((i, p) for i, p in call)
            ids_of_task.setdefault(report["task"], set()).update(i for i, _ in call)
            assert source[:2] == ["fan", "default"] and source[2] in fan_tasks  # one source per call
    assert seen == Counter({(i, p): 1 for i in range(IDS) for p in range(FAN)})
    # fields grouping on "id": each id's rows all went to one task
    tasks = list(ids_of_task.values())
    assert sum(len(ids) for ids in tasks) == IDS == len(set().union(*tasks))
    assert biggest > 1 and calls < IDS  # batches, not a call per row
    components = summary.components
    assert components["sink"]["executed"] == components["sink"]["received"] == IDS * FAN
    assert components["fan"]["executed"] == IDS and components["fan"]["emitted"] == IDS * FAN
    assert components["ids"]["emitted"] == IDS
    assert components["sink"]["acked"] == IDS * FAN and components["sink"]["failed"] == 0
    acked = sorted(i for r in reports["ids"] for i in r["acked"])
    assert not any(r["failed"] for r in reports["ids"])
    if ackers:
        assert acked == list(range(IDS))  # every tree completed exactly once
        assert components["fan"]["acked"] == IDS  # a BasicBolt's rows are acked when process returns
        trees = sum(r["completed"] for r in reports["__acker"])
        assert trees == (IDS // 50 if whole else IDS)  # one tree per spout batch, or per row
    else:
        assert acked == []
        assert components["fan"]["acked"] == 0


def test_a_process_call_holds_at_most_the_producer_batch_size():
    summary, cluster = run(
        build(SinkBolt(), spout_per_call=100), "grpc", 0, **{"topology.producer.batch.size": 7}
    )
    sizes = [len(call) for r in cluster.reports()["sink"] for call in r["calls"]]
    assert sum(sizes) == IDS * FAN and max(sizes) == 7
    assert summary.components["sink"]["executed"] == IDS * FAN


@pytest.mark.parametrize("transport", ["local", "grpc"])
@pytest.mark.parametrize("whole", [False, True])
def test_a_raising_process_fails_every_row_of_the_call_and_they_replay(transport, whole):
    summary, cluster = run(build(SinkBolt(raise_on=7), whole=whole), transport, ackers=2)
    reports = cluster.reports()
    [raised_on] = [r["raised_on"] for r in reports["sink"] if r["raised_on"]]
    assert 7 in raised_on
    failed = [i for r in reports["ids"] for i in r["failed"]]
    if whole:  # the whole spout batch(es) those rows came from, each failed once, then replayed
        assert set(raised_on) <= set(failed) and len(failed) == len(set(failed))
    else:
        assert sorted(failed) == raised_on  # the trees of that call's rows, each failed once
    assert sorted(i for r in reports["ids"] for i in r["acked"]) == list(range(IDS))
    components = summary.components
    assert components["sink"]["errors"] == 1
    failed_rows = components["sink"]["failed"]
    assert failed_rows >= len(raised_on)
    if not whole:
        assert components["sink"]["acked"] == IDS * FAN + len(raised_on) * FAN - failed_rows
    [error] = [s.first_error for w in cluster.workers for s in w.snapshot().executors if s.first_error]
    assert error.method == "process" and "fails one batch" in error.message


@pytest.mark.parametrize("transport", ["local", "grpc", "zmq"])
@pytest.mark.parametrize("ackers", [0, 2])
def test_columnar_wordcount_is_exact(transport, ackers):
    repeat = 40
    summary, cluster = run(wordcount.build(repeat=repeat, spouts=2, columnar=True), transport, ackers)
    assert summary.matched, summary.message
    sentences = repeat * len(wordcount.CORPUS)
    words = sum(wordcount.expected_counts(repeat).values())
    assert summary.components["split"]["executed"] == sentences
    assert summary.components["count"]["executed"] == words
    reports = cluster.reports()
    assert sum(r["emitted"] for r in reports["sentences"]) == sentences
    assert sum(r["acked"] for r in reports["sentences"]) == (sentences if ackers else 0)


class RowBolt(BasicBolt):
    """Counts ids on the per-tuple entry point."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["id", "part"])

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.seen: Counter[int] = Counter()

    def execute(self, tup: Tuple) -> None:
        assert isinstance(tup, Tuple) and tup.source_component == "ids"
        self.seen[tup.values[0]] += 1

    def report(self) -> Any:
        return dict(self.seen)


class BatchRowBolt(RowBolt):
    """The same on ``execute_batch``."""

    def execute_batch(self, tuples: list[Tuple]) -> None:
        for tup in tuples:
            self.execute(tup)


@pytest.mark.parametrize("transport", ["local", "grpc"])
@pytest.mark.parametrize("bolt", [RowBolt, BatchRowBolt])
@pytest.mark.parametrize(("ackers", "whole"), [(0, False), (2, True)])
def test_bolts_without_process_get_a_row_view_of_each_column_row(transport, bolt, ackers, whole):
    """With acking on, a batch tracked as a whole becomes rows tracked one by one for a bolt that
    acks per tuple: every tree still completes exactly once."""
    builder = TopologyBuilder("columns-to-rows")
    builder.set_spout("ids", ColumnSpout(IDS, whole=whole), parallelism=2)
    builder.set_bolt("count", bolt(), parallelism=3).all_grouping("ids")
    summary, cluster = run(builder.build(), transport, ackers)
    ids = cluster.reports()["ids"]
    assert sorted(i for r in ids for i in r["acked"]) == (list(range(IDS)) if ackers else [])
    assert not any(r["failed"] for r in ids)
    assert summary.components["count"]["acked"] == (3 * IDS if ackers else 0)  # a BasicBolt acks when on
    reports = cluster.reports()["count"]
    assert len(reports) == 3
    for seen in reports:  # all grouping: every task sees every id once
        assert {int(i): n for i, n in seen.items()} == {i: 1 for i in range(IDS)}
    assert summary.components["count"]["executed"] == summary.components["count"]["received"] == 3 * IDS


class WholeSinkBolt(SinkBolt):
    """Records each call's rows from its columns (no row views) and acks the batch in one call."""

    def process(self, batch: Columns) -> None:
        self.calls.append([[i, p] for i, p in zip(batch.column("id"), batch.column("part"), strict=True)])
        self.sources.append([batch.source_component, batch.source_stream, batch.source_task])
        self.collector.ack(batch)


def test_a_batch_tracked_as_a_whole_split_to_fit_the_message_size_still_completes():
    """A part too large for messaging.max.message.bytes is sent in halves, each its own node of
    the tree: the tree completes once, with nothing failed."""
    extra = {"messaging.max.message.bytes": 1200}
    summary, cluster = run(build(WholeSinkBolt(), spout_per_call=300, whole=True), "grpc", 2, **extra)
    reports = cluster.reports()
    assert sorted(i for r in reports["ids"] for i in r["acked"]) == list(range(IDS))
    assert not any(r["failed"] for r in reports["ids"])
    assert summary.components["sink"]["executed"] == summary.components["sink"]["acked"] == IDS * FAN
    assert (
        sum(r["completed"] for r in reports["__acker"]) == 2 * 2
    )  # one tree per spout batch: 300 + 150 ids each
    sizes = [len(call) for r in reports["sink"] for call in r["calls"]]
    assert max(sizes) < 300  # the parts were split to fit


class PairSpout(Spout):
    """Emits (id, part) rows one by one with ``emit``: what a process bolt gets from per-tuple emitters."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["id", "part"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.todo = [(i, p) for i in range(context.task_index, IDS, 2) for p in range(FAN)][::-1]

    def next_tuple(self) -> None:
        for _ in range(min(10, len(self.todo))):
            self.collector.emit(list(self.todo.pop()))

    def is_finished(self) -> bool:
        return not self.todo


@pytest.mark.parametrize("transport", ["local", "grpc"])
def test_process_gets_per_tuple_emits_joined_into_batches(transport):
    builder = TopologyBuilder("rows-to-columns")
    builder.set_spout("pairs", PairSpout(), parallelism=2)
    builder.set_bolt("sink", SinkBolt(), parallelism=2).fields_grouping("pairs", ["id"])
    summary, cluster = run(builder.build(), transport, 0)
    seen: Counter[tuple[int, int]] = Counter()
    calls = 0
    for report in cluster.reports()["sink"]:
        for call, (component, _, _) in zip(report["calls"], report["sources"], strict=True):
            calls += 1
            seen.update((i, p) for i, p in call)
            assert component == "pairs"
    assert seen == Counter({(i, p): 1 for i in range(IDS) for p in range(FAN)})
    assert calls < IDS * FAN  # single tuples of one source in an inbox batch are joined
    assert summary.components["sink"]["executed"] == IDS * FAN


# -- the pieces, one at a time ------------------------------------------------------------------


def test_columns_views() -> None:
    fields = Fields(["word", "n"])
    batch = Columns([["a", "b", "c"], [1, 2, 3]], 3, fields, 4, "split", "default")
    assert len(batch) == 3 and batch.column("word") == ["a", "b", "c"] and batch.column("n") == [1, 2, 3]
    with pytest.raises(KeyError, match=r"no field 'count'; declared fields are \['word', 'n'\]"):
        batch.column("count")
    rows = list(batch)
    assert [list(t.values) for t in rows] == [["a", 1], ["b", 2], ["c", 3]]
    first = rows[0]
    assert (first.source_component, first.source_task, first.source_stream, first.get("n")) == (
        "split",
        4,
        "default",
        1,
    )
    assert batch.row(1) is rows[1] and batch.tuples() is batch.tuples()  # made once
    part = batch.slice(1, 9)
    assert len(part) == 2 and part.column("word") == ["b", "c"] and part.source_task == 4
    joined = Columns.join([batch, part])
    assert len(joined) == 5 and joined.column("n") == [1, 2, 3, 2, 3]
    assert batch.column("n") == [1, 2, 3]  # joining copies: the pieces are shared, never extended
    mixed = Columns.join([part, [Tuple(["z", 9], 4, "split", "default", fields)]])
    assert mixed.column("word") == ["b", "c", "z"] and len(mixed.tuples()) == 3
    empty = Columns([], 2, Fields([]))
    assert len(empty) == 2 and [t.values for t in empty] == [(), ()]


@pytest.mark.parametrize("seed", range(3))
def test_a_fields_grouping_splits_a_column_as_it_chooses_row_by_row(seed) -> None:
    rng = random.Random(seed)
    words = [rng.choice(["the", "cow", "jumped", "über", "", "moon"]) for _ in range(500)]
    keys: list[Any] = words + [rng.randrange(-(2**40), 2**40) for _ in range(200)]
    keys += [b"raw", 1.5, True, 1, None, ("t", 1), [1, 2]] * 3
    rng.shuffle(keys)
    fields = Fields(["key", "n"])
    for count in (1, 3, 7):
        tasks = tuple(range(10, 10 + count))
        splitter = FieldsGrouping(("key",)).chooser(tasks, frozenset(), fields)
        chooser = FieldsGrouping(("key",)).chooser(tasks, frozenset(), fields)
        columns = [keys, list(range(len(keys)))]
        expected: dict[int, list[int]] = {}
        for index, key in enumerate(keys):
            [task] = chooser.choose([key, index])
            expected.setdefault(task, []).append(index)
        parts = splitter.split(columns, len(keys))
        assert {task: list(selection) for task, selection in parts} == expected  # type: ignore[arg-type]
        again = splitter.split(columns, len(keys))  # the memo gives the same answer
        assert {task: list(selection) for task, selection in again} == expected  # type: ignore[arg-type]
    two_keys = FieldsGrouping(("key", "n")).chooser((1, 2, 3), frozenset(), fields)
    rows = [["a", 1], ["a", 2], ["b", 1]]
    split = dict(two_keys.split([[r[0] for r in rows], [r[1] for r in rows]], 3))
    for index, row in enumerate(rows):
        [task] = two_keys.choose(row)
        assert index in split[task]  # type: ignore[operator]


def test_shuffle_splits_in_slices_as_even_as_its_round_robin() -> None:
    fields = Fields(["n"])
    tasks = (1, 2, 3)
    chooser = ShuffleGrouping().chooser(tasks, frozenset(), fields)
    given: Counter[int] = Counter()
    for count in (10, 1, 2, 5, 3, 0, 9):
        parts = chooser.split([list(range(count))], count)
        covered = []
        for task, selection in parts:
            assert isinstance(selection, slice)
            covered.extend(range(count)[selection])
            given[task] += len(range(count)[selection])
        assert covered == list(range(count))  # contiguous, in order, each row once
    assert sum(given.values()) == 30 and set(given.values()) == {10}  # whole rounds: even
    everyone = AllGrouping().chooser(tasks, frozenset(), fields).split([[1, 2]], 2)
    assert everyone == [(1, None), (2, None), (3, None)]
    assert GlobalGrouping().chooser(tasks, frozenset(), fields).split([[1, 2]], 2) == [(1, None)]
    assert AllGrouping().chooser(tasks, frozenset(), fields).split([[]], 0) == []


class Parity:
    """A custom grouping: even ids to the first task, odd to the last."""

    def prepare(self, target_tasks: Any) -> None:
        self.tasks = list(target_tasks)

    def choose_tasks(self, values: Any) -> list[int]:
        return [self.tasks[0] if values[0] % 2 == 0 else self.tasks[-1]]


def test_a_custom_grouping_splits_row_by_row() -> None:
    chooser: TaskChooser = CustomGrouping(Parity()).chooser((4, 5), frozenset(), Fields(["id"]))
    assert sorted(chooser.split([[0, 1, 2, 3, 4]], 5)) == [(4, [0, 2, 4]), (5, [1, 3])]


def _bolt_collector(serializer: str = "msgpack") -> tuple[BoltOutputCollector, Outbox, ExecutorCounters, Any]:
    """A bolt collector on stream (word, n): tasks 1-2 local, 3-4 on worker 5; fields on word."""
    inbox: RingBuffer[Any] = RingBuffer.multi_producer(16)
    transfer: RingBuffer[Any] = RingBuffer.multi_producer(16)
    outbox = Outbox(
        local_inboxes={1: inbox, 2: inbox},
        remote_workers={3: 5, 4: 5},
        transfer_ring=transfer,
        serializer=load_serializer(serializer),
        batch_size=1000,
        send_capacity=10_000,
    )
    fields = Fields(["word", "n"])
    chooser = FieldsGrouping(("word",)).chooser((1, 2, 3, 4), frozenset({1, 2}), fields)
    route = StreamRoute("default", 0, fields, False, [chooser], frozenset())
    direct = StreamRoute("direct", 1, fields, True, [], frozenset({1}))
    counters = ExecutorCounters()
    collector = BoltOutputCollector(9, "split", {"default": route, "direct": direct}, outbox, counters)
    return collector, outbox, counters, (inbox, transfer)


def test_emit_columns_checks_every_column_before_delivering_any() -> None:
    collector, outbox, counters, _ = _bolt_collector()
    with pytest.raises(ValueError, match=r"emit_columns got 1 columns for 2 declared fields \['word', 'n'\]"):
        collector.emit_columns([["a", "b"]])
    with pytest.raises(ValueError, match="column 'n' has 1 values, column 'word' has 2"):
        collector.emit_columns([["a", "b"], [1]])
    with pytest.raises(ValueError, match="undeclared stream 'other'"):
        collector.emit_columns([["a"], [1]], stream="other")
    with pytest.raises(ValueError, match="use emit_direct for this stream"):
        collector.emit_columns([["a"], [1]], stream="direct")
    assert outbox.delivered == 0 and counters.emitted == 0
    collector.emit_columns([[], []])  # nothing to emit
    assert outbox.delivered == 0 and counters.emitted == 0


@pytest.mark.parametrize("serializer", ["msgpack", "json"])
def test_an_emit_columns_goes_to_local_tasks_as_columns_and_to_remote_ones_as_columns_payloads(
    serializer,
) -> None:
    collector, outbox, counters, (inbox, transfer) = _bolt_collector(serializer)
    words = [f"w{i % 37}" for i in range(400)]
    collector.emit_columns([words, list(range(400))])
    assert counters.emitted == 400 and outbox.delivered == 400
    outbox.flush()
    by_task: dict[int, list[tuple[str, int]]] = {}
    local = [inbox.get(seq) for seq in range(inbox.cursor + 1)]
    for batch in local:
        for task, entry in batch:
            assert type(entry) is Columns and entry.source_task == 9 and entry.source_component == "split"
            by_task.setdefault(task, []).extend(zip(entry.column("word"), entry.column("n"), strict=True))
    local_rows = sum(len(rows) for rows in by_task.values())
    codec = load_serializer(serializer)
    [(worker, messages, _)] = [transfer.get(seq) for seq in range(transfer.cursor + 1)]
    assert worker == 5 and 0 < local_rows < 400 and tuples_in(messages) == 400 - local_rows
    for task, payload in messages:
        assert payload[0] == COLUMNS_MARKER
        source_task, stream_id, columns = codec.deserialize_rows(payload[5:])  # type: ignore[attr-defined]
        assert (source_task, stream_id) == (9, 0) and len(columns[0]) == rows_count(payload)
        by_task.setdefault(task, []).extend(zip(columns[0], columns[1], strict=True))
    assert sorted(n for rows in by_task.values() for _, n in rows) == list(range(400))  # each row once
    owner: dict[str, int] = {}
    for task, rows in by_task.items():
        assert [n for _, n in rows] == sorted(n for _, n in rows)  # order kept per task
        for word, _ in rows:
            assert owner.setdefault(word, task) == task  # one task per key


def _sink_of_n(conf: Mapping[str, Any] | None = None) -> tuple[BoltExecutor, WorkerPlan]:
    """A ``SinkOfN`` executor (task 1, stream (n) from spout task 2), built from its plan alone."""
    executor, plan, _ = _sink_of_n_with_inboxes(conf)
    return executor, plan


def _sink_of_n_with_inboxes(
    conf: Mapping[str, Any] | None = None,
) -> tuple[BoltExecutor, WorkerPlan, dict[int, RingBuffer[Any]]]:
    builder = TopologyBuilder("t")
    builder.set_spout("s", ListSpout([[i] for i in range(1)], ["n"]))
    builder.set_bolt("b", SinkOfN(), parallelism=1).shuffle_grouping("s")
    config = Config(dict(conf or {}))
    workers = 1 if config.get("topology.acker.executors") else 2  # acking: the acker here too
    plan = WorkerPlan.build(builder.build(), 0, workers, config)
    [spec] = [e for e in plan.executors if e.component == "b"]
    inboxes = {e.index: RingBuffer.multi_producer(64) for e in plan.executors}
    by_task = {task: inboxes[e] for task, e in plan.executor_of_task.items()}
    wiring = ExecutorWiring(
        plan, by_task, RingBuffer.multi_producer(64), lambda: load_serializer("msgpack"), None
    )
    return BoltExecutor(spec, wiring), plan, by_task


def test_a_columns_payload_is_executed_and_a_mismatched_one_is_counted() -> None:
    executor, plan = _sink_of_n()
    stream_id = plan.stream_ids[("s", "default")]
    codec = load_serializer("msgpack")
    good = frame_rows(3, codec.serialize_rows(2, stream_id, [[10, 11, 12]]), COLUMNS_MARKER)  # type: ignore[attr-defined]
    short = frame_rows(4, codec.serialize_rows(2, stream_id, [[1, 2, 3]]), COLUMNS_MARKER)  # type: ignore[attr-defined]
    wide = frame_rows(2, codec.serialize_rows(2, stream_id, [[1, 2], [3, 4]]), COLUMNS_MARKER)  # type: ignore[attr-defined]
    garbled = frame_rows(5, b"\xc2 not msgpack at all", COLUMNS_MARKER)
    executor.start()
    executor.inbox.put(Batch([(1, good), (1, short), (1, wide), (1, garbled)]))
    executor.request_stop()
    assert executor.join(10.0)
    [report] = executor.final_reports.values()
    assert report == [[10, 11, 12]]
    counters = executor.counters
    assert counters.received == 3 + 4 + 2 + 5  # every tuple the payloads said they carried
    assert counters.executed == 3
    assert counters.deserialize_errors == 3 and counters.failed == 4 + 2 + 5


class SinkOfN(Bolt):
    """``process`` on stream (n): records each call's n column."""

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.calls: list[list[int]] = []

    def process(self, batch: Columns) -> None:
        self.calls.append(list(batch.column("n")))

    def report(self) -> Any:
        return self.calls


def test_columns_payloads_count_their_rows_in_transfer_and_receive():
    """An emit_columns to a task in another worker travels as one columns payload; every count of
    tuples sent, received or lost still counts its rows, so sent and received balance."""
    builder = TopologyBuilder("crossing")
    builder.set_spout("ids", ColumnSpout(IDS), parallelism=1)  # task 1 on worker 0
    builder.set_bolt("sink", RowBolt(), parallelism=1).shuffle_grouping("ids")  # task 2 on worker 1
    cluster = LocalCluster(builder.build(), 2, Config({"messaging.transport": "grpc"}))
    summary = cluster.run(60.0)
    assert summary.completed, summary.message
    sender, receiver = (worker.snapshot() for worker in cluster.workers)
    assert sender.transfer.sent_tuples == IDS and sender.transfer.lost_tuples == 0
    assert receiver.binding.received_tuples == IDS
    assert summary.transfer["messages"] == IDS
    assert summary.components["sink"]["executed"] == IDS


def test_an_emitter_may_reuse_its_column_lists_once_emit_columns_returns() -> None:
    inbox: RingBuffer[Any] = RingBuffer.multi_producer(16)
    outbox = Outbox(
        local_inboxes={1: inbox, 2: inbox},
        remote_workers={},
        transfer_ring=RingBuffer.multi_producer(16),
        serializer=load_serializer("msgpack"),
        batch_size=1000,
        send_capacity=10_000,
    )
    fields = Fields(["n"])
    for grouping in (AllGrouping(), GlobalGrouping(), ShuffleGrouping()):
        chooser = grouping.chooser((1, 2), frozenset({1, 2}), fields)
        route = StreamRoute("default", 0, fields, False, [chooser], frozenset())
        collector = BoltOutputCollector(9, "b", {"default": route}, outbox, ExecutorCounters())
        column = [1, 2, 3, 4]
        collector.emit_columns([column])
        column.clear()  # the emitter's buffer, reused for its next batch
        column.append(99)
        outbox.flush()
        seen = sorted(n for task, batch in inbox.get(inbox.cursor) for n in batch.column("n"))
        assert seen == ([1, 1, 2, 2, 3, 3, 4, 4] if isinstance(grouping, AllGrouping) else [1, 2, 3, 4])
        # a buffer whose slices are views of it (as an array's are), overwritten in place
        buffer = array.array("q", [5, 6, 7, 8])
        collector.emit_columns([memoryview(buffer)])
        buffer[:] = array.array("q", [0, 0, 0, 0])
        outbox.flush()
        seen = sorted(n for task, batch in inbox.get(inbox.cursor) for n in batch.column("n"))
        assert seen == ([5, 5, 6, 6, 7, 7, 8, 8] if isinstance(grouping, AllGrouping) else [5, 6, 7, 8])


class StatefulColumnarCount(StatefulCountBolt):
    """The example's checkpointed count, on columns."""

    def process(self, batch: Columns) -> None:
        counts = self.counts
        for word in batch.column("word"):
            counts[word] = counts.get(word, 0) + 1


@pytest.mark.parametrize("transport", ["local", "grpc"])
def test_checkpointed_state_takes_columnar_batches_through_barriers_exactly(transport):
    """Aligned checkpoints with columnar bolts: barriers pass the batches, checkpoints commit
    while they flow, and the checkpointed counts are exact."""
    repeat = 300
    builder = TopologyBuilder("stateful-columns")
    builder.set_spout("sentences", ReplayableSentenceSpout(repeat), parallelism=2)
    builder.set_bolt("split", wordcount.ColumnarSplitBolt(), parallelism=2).shuffle_grouping("sentences")
    builder.set_bolt("count", StatefulColumnarCount(), parallelism=2).fields_grouping("split", ["word"])
    topology = builder.build(check=wordcount.make_check(repeat))
    conf = {"topology.state.checkpoint.interval.ms": 30, "wordcount.rate": 2000}
    summary, cluster = run(topology, transport, 0, **conf)
    assert summary.matched, summary.message
    [coordinator] = cluster.reports()[COORDINATOR]
    assert coordinator["committed"] >= 3 and coordinator["abandoned"] == 0


def test_a_batch_tracked_as_a_whole_keeps_its_place_among_its_sources_batches() -> None:
    """Pieces of one source are joined into one call, but not across a batch tracked as a whole
    (a call of its own): the source's order holds."""
    executor, _ = _sink_of_n()
    fields = Fields(["n"])

    def piece(values: list[int], anchors: dict[int, int] | None = None) -> Columns:
        return Columns([values], len(values), fields, 2, "s", "default", None, anchors)

    executor.start()
    executor.inbox.put(
        Batch([(1, piece([1, 2])), (1, piece([3])), (1, piece([4, 5], {7: 8})), (1, piece([6]))])
    )
    executor.request_stop()
    assert executor.join(10.0)
    [report] = executor.final_reports.values()
    assert report == [[1, 2, 3], [4, 5], [6]]
    assert executor.counters.executed == executor.counters.received == 6


def test_shuffle_goes_on_where_a_columnar_split_left_it() -> None:
    chooser = ShuffleGrouping().chooser((1, 2, 3), frozenset(), Fields(["n"]))
    given: Counter[int] = Counter()
    for _ in range(2):
        given.update(chooser.choose([0]))
    for task, selection in chooser.split([[0, 0]], 2):  # ends past the last task: wraps around
        given[task] += len(range(2)[selection])  # type: ignore[index]
    for _ in range(5):
        given.update(chooser.choose([0]))
    assert sum(given.values()) == 9 and set(given.values()) == {3}  # three whole rounds: even


def test_an_emit_anchored_to_a_batch_that_raises_leaves_its_tree_as_it_was() -> None:
    """The parts' edges join the anchoring batch only once every part went out: an emit that
    raised (a part over messaging.max.message.bytes) sent nothing, so it adds nothing to ack."""
    outbox, _, _ = local_and_remote_outbox(1000, 10_000, max_payload=200)
    fields = Fields(["word"])
    chooser = AllGrouping().chooser((1, 2), frozenset({1}), fields)
    route = StreamRoute("default", 0, fields, False, [chooser], frozenset())
    mailbox = AckerMailbox(outbox, 9, "b", 1, Fields(["box"]))
    trees = TreeIds((3,), frozenset({3}), mailbox, seed=1)
    collector = TrackedBoltCollector(9, "b", {"default": route}, outbox, ExecutorCounters(), trees)
    batch = Columns([["a"]], 1, fields, 4, "s", "default", None, {11: 12})
    with pytest.raises(MessageTooLargeError):
        collector.emit_columns([["x" * 500, "y"]], batch)  # the remote part's row cannot fit
    assert batch.ack_val == 0 and outbox.delivered == 0
    collector.emit_columns([["a", "b"]], batch)  # one local part, one remote part
    assert batch.ack_val != 0 and outbox.delivered == 4


class HandleBolt(Bolt):
    """Keeps a handle named ``process`` (not callable): it is not the columnar entry point."""

    def __init__(self) -> None:
        self.process = object()  # set before the executor is built, which chooses the entry point

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.seen: list[int] = []

    def execute(self, tup: Tuple) -> None:
        self.seen.append(tup.values[0])

    def report(self) -> Any:
        return self.seen


def test_an_attribute_named_process_that_is_not_callable_is_not_the_entry_point() -> None:
    assert entry_point(HandleBolt()) == "execute" and entry_point(SinkOfN()) == "process"
    assert entry_point(RowBolt()) == "execute" and entry_point(BatchRowBolt()) == "execute_batch"
    builder = TopologyBuilder("handles")
    builder.set_spout("ids", ColumnSpout(IDS), parallelism=1)
    builder.set_bolt("h", HandleBolt(), parallelism=1).shuffle_grouping("ids")
    summary, cluster = run(builder.build(), "local", 0)
    assert sorted(cluster.reports()["h"][0]) == list(range(IDS))
    assert summary.components["h"]["executed"] == IDS and summary.errors == 0


def test_a_tracked_columns_payload_that_does_not_fit_its_stream_fails_its_trees_at_once() -> None:
    """Its anchors decoded, so its trees fail now instead of at the message timeout."""
    executor, plan, inboxes = _sink_of_n_with_inboxes({"topology.acker.executors": 1})
    [acker_task] = [t for t, c in plan.assignment.component_of_task().items() if c == ACKER]
    stream_id = plan.stream_ids[("s", "default")]
    codec = load_serializer("msgpack")
    anchors = {1234: 99, 5678: 77}
    # three rows announced, two in the column, its anchors after the columns
    body = codec.serialize_rows(2, stream_id, [[1, 2], flat_anchors(anchors)])  # type: ignore[attr-defined]
    executor.start()
    executor.inbox.put(Batch([(1, frame_rows(3, body, ANCHORED_COLUMNS_MARKER))]))
    executor.request_stop()
    assert executor.join(10.0)
    assert executor.counters.deserialize_errors == 1 and executor.counters.failed == 3
    assert executor.counters.executed == 0
    acker_inbox = inboxes[acker_task]
    [batch] = [acker_inbox.get(sequence) for sequence in range(acker_inbox.cursor + 1)]
    [(task, message)] = batch
    inits, acks, fails = message.values
    assert task == acker_task
    assert (inits, acks, sorted(fails)) == ([], [], [1234, 5678])


class FanAnchoredToTheBatch(BasicBolt):
    """``process``: FAN (id, part) rows per input id in one emit_columns anchored to the whole
    batch, whatever its rows' tracking."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["id", "part"])

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def process(self, batch: Columns) -> None:
        ids = batch.column("id")
        self.collector.emit_columns(
            [[i for i in ids for _ in range(FAN)], [p for _ in ids for p in range(FAN)]], batch
        )


@pytest.mark.parametrize("transport", ["local", "grpc"])
def test_an_emit_anchored_to_a_batch_of_rows_tracked_one_by_one_completes_every_tree(transport):
    """Rows tracked one by one (a msg id per spout row) anchoring one emit: each part is one node
    of all their trees; every tree completes once, nothing fails."""
    builder = TopologyBuilder("columns")
    builder.set_spout("ids", ColumnSpout(IDS, 50, whole=False), parallelism=2)
    builder.set_bolt("fan", FanAnchoredToTheBatch(), parallelism=2).shuffle_grouping("ids")
    builder.set_bolt("sink", SinkBolt(), parallelism=3).fields_grouping("fan", ["id"])
    summary, cluster = run(builder.build(), transport, 2)
    reports = cluster.reports()
    seen = Counter((i, p) for r in reports["sink"] for call in r["calls"] for i, p in call)
    assert seen == Counter({(i, p): 1 for i in range(IDS) for p in range(FAN)})
    assert sorted(i for r in reports["ids"] for i in r["acked"]) == list(range(IDS))
    assert not any(r["failed"] for r in reports["ids"])
    assert sum(r["completed"] for r in reports["__acker"]) == IDS  # one tree per spout row
    assert summary.components["sink"]["failed"] == 0


def test_tuple_edges_give_each_part_one_edge_per_anchoring_tuple_and_the_trees_balance() -> None:
    """N anchors and P parts: N x P edge ids whatever the row count; per root, the anchors'
    ack_vals and the parts' values XOR to zero once every node acks."""
    outbox, inbox, transfer = local_and_remote_outbox(1000, 10_000, max_payload=1 << 20)
    fields = Fields(["word"])
    chooser = AllGrouping().chooser((1, 2), frozenset({1}), fields)
    route = StreamRoute("default", 0, fields, False, [chooser], frozenset())
    mailbox = AckerMailbox(outbox, 9, "b", 1, Fields(["box"]))
    trees = TreeIds((3,), frozenset({3}), mailbox, seed=7)
    drawn: list[int] = []

    def new_id(bits: int) -> int:
        drawn.append(trees.new_id(bits))
        return drawn[-1]

    collector = TrackedBoltCollector(9, "b", {"default": route}, outbox, ExecutorCounters(), trees)
    anchors = [
        AnchoredTuple([f"in{j}"], 4, "s", "default", fields, {1000 + j: 5000 + j, 77: 3}) for j in range(40)
    ]
    before = {id(a): a.ack_val for a in anchors}
    edges = TupleEdges(new_id, anchors)
    collector._emit_columns([[f"w{i}" for i in range(300)]], "default", edges)  # what emit_columns does
    edges.commit()
    assert edges.parts == 2 and len(drawn) == 40 * 2  # per part and anchor, not per row
    outbox.flush()
    local = [inbox.get(s) for s in range(inbox.cursor + 1)]
    [(task, part)] = [entry for batch in local for entry in batch]
    assert task == 1 and isinstance(part, Columns) and len(part) == 300 and part.tracked_whole
    # the remote part's anchors: the same roots, its own edges
    [(worker, [(remote_task, payload)], *_)] = [transfer.get(s) for s in range(transfer.cursor + 1)]
    assert (worker, remote_task, payload[0]) == (5, 2, ANCHORED_COLUMNS_MARKER)
    *_, lists = load_serializer("msgpack").deserialize_rows(payload[ROWS_HEADER_BYTES:])  # type: ignore[attr-defined]
    values = [part.anchors, anchors_of(lists[-1])]
    assert len(values) == 2 and all(set(v) == {77, *range(1000, 1040)} for v in values)
    for j, anchor in enumerate(anchors):
        root = 1000 + j
        assert anchor.ack_val ^ before[id(anchor)] ^ values[0][root] ^ values[1][root] == 0
    shared = 0  # root 77 anchors every input: its edges are the XOR of all of them
    for anchor in anchors:
        shared ^= anchor.ack_val ^ before[id(anchor)]
    assert shared ^ values[0][77] ^ values[1][77] == 0
