"""The feature interface: wrappers see each executed tuple with its task and key, run on every
batch or on a sample of them, and a registry name that does not resolve is refused by name."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from tests.helpers import ListSpout, RecordingBolt
from tests.worker.wiring import wire
from tuplemesh.acking import ACKER
from tuplemesh.acking.mode import TreeAcking
from tuplemesh.config import Config
from tuplemesh.core.acking import NoAcking
from tuplemesh.core.collectors import build_routes
from tuplemesh.core.feature import (
    BatchRun,
    ExecuteFn,
    ExecutorHooks,
    ExecutorView,
    FeatureContext,
    FeatureMetric,
    fields_keys,
)
from tuplemesh.core.feature_spec import FeatureSet, FeatureSpec, registered_features
from tuplemesh.core.markers import Batch
from tuplemesh.core.outbox import Outbox
from tuplemesh.disruptor import RingBuffer
from tuplemesh.serialization import load_serializer
from tuplemesh.topology import BasicBolt, Fields, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple
from tuplemesh.worker.executor import BoltExecutor
from tuplemesh.worker.plan import WorkerPlan

FIELDS = Fields(["word", "n"])


class Words(Spout):
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["word", "n"])
        declarer.declare_stream("other", ["x"])

    def next_tuple(self) -> None:
        pass


class Sink(BasicBolt):
    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.seen: list[Any] = []

    def execute(self, tup: Tuple) -> None:
        self.seen.append(tup.values[0])


class Recording:
    """Wraps every task's call and records (task, key of the fields grouping, values)."""

    name = "recording"

    def __init__(self, context: FeatureContext, every: int = 1) -> None:
        self.context = context
        self.every = every
        self.calls: list[tuple[int, Any, list[Any]]] = []

    def attach(self, executor: ExecutorView) -> ExecutorHooks | None:
        if not executor.is_bolt:
            return None
        keys = fields_keys(self.context.topology, executor.component)

        def wrap(task: int, fn: ExecuteFn) -> ExecuteFn:
            def observed(tup: Tuple) -> None:
                indices = keys.get((tup.source_component, tup.source_stream))
                key = None if indices is None else tuple(tup.values[i] for i in indices)
                self.calls.append((task, key, list(tup.values)))
                fn(tup)

            return observed

        return ExecutorHooks(wrap_execute=wrap, every_batches=self.every)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def section(self) -> Mapping[str, Any]:
        return {"calls": len(self.calls)}

    def metrics(self) -> Sequence[FeatureMetric]:
        return ()


class BatchesAndObservers:
    """Wraps each inbox batch's handling and keeps the executor, to switch its observers."""

    name = "batches"

    def __init__(self) -> None:
        self.handled: list[tuple[int, int]] = []  # (entries, tuples executed) per batch
        self.seen: list[tuple[str, Any]] = []  # ("input", (task, entry)) or ("emit", (task, entry))
        self.executor: ExecutorView | None = None

    def attach(self, executor: ExecutorView) -> ExecutorHooks | None:
        if not executor.is_bolt:
            return None
        self.executor = executor

        def wrap_batch(run: BatchRun) -> BatchRun:
            def handled(batch: list[tuple[int | None, Any]]) -> None:
                before = executor.executed
                run(batch)
                self.handled.append((len(batch), executor.executed - before))

            return handled

        return ExecutorHooks(wrap_batch=wrap_batch)

    def observe_inputs(self, batch: Sequence[tuple[int | None, Any]], now: float) -> None:
        self.seen.extend(("input", entry) for entry in batch)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def section(self) -> Mapping[str, Any]:
        return {}

    def metrics(self) -> Sequence[FeatureMetric]:
        return ()


def sink_executor(every: int, *more: Any) -> tuple[BoltExecutor, Recording]:
    builder = TopologyBuilder("features")
    builder.set_spout("words", Words())
    builder.set_bolt("sink", Sink()).fields_grouping("words", ["word"]).shuffle_grouping("words", "other")
    wired = wire(builder.build(), Config({}), lambda context: (Recording(context, every), *more))
    executor = BoltExecutor(wired.spec("sink"), wired.wiring)
    executor.on_start()
    recording = wired.features[0]
    assert isinstance(recording, Recording)
    return executor, recording


def batch(task: int, *tuples: Tuple) -> Batch:
    out = Batch((task, tup) for tup in tuples)
    out.stamp = 0.0
    return out


def test_a_wrapper_sees_each_executed_tuple_with_its_task_and_the_grouping_key():
    executor, recording = sink_executor(every=1)
    task = executor.task_ids[0]
    executor.on_event(
        batch(
            task,
            Tuple(["a", 1], 1, "words", "default", FIELDS),
            Tuple([7], 1, "words", "other", Fields(["x"])),
            Tuple(["b", 2], 1, "words", "default", FIELDS),
        ),
        0,
        True,
    )
    assert recording.calls == [(task, ("a",), ["a", 1]), (task, None, [7]), (task, ("b",), ["b", 2])]
    assert executor.bolts[task].seen == ["a", 7, "b"]  # type: ignore[attr-defined]
    assert executor.counters.executed == 3


def test_sampled_wrappers_run_on_some_batches_and_every_batch_executes():
    executor, recording = sink_executor(every=3)
    task = executor.task_ids[0]
    for n in range(30):
        executor.on_event(batch(task, Tuple([f"w{n}", n], 1, "words", "default", FIELDS)), n, True)
    assert executor.counters.executed == 30
    assert len(executor.bolts[task].seen) == 30  # type: ignore[attr-defined]
    # the first batch, then gaps drawn from 1..5 (3 on average): at least 7 of 30 wrapped
    assert 7 <= len(recording.calls) < 30


def test_a_registry_name_that_does_not_resolve_is_refused_naming_it():
    with pytest.raises(ImportError, match=re.escape("feature 'tuplemesh.nothing:FEATURE' does not resolve")):
        registered_features(["tuplemesh.nothing:FEATURE"])
    with pytest.raises(
        ImportError, match=re.escape("feature 'tuplemesh.ticks.feature:nothing' does not resolve")
    ):
        registered_features(["tuplemesh.ticks.feature:nothing"])
    with pytest.raises(
        TypeError, match=re.escape("'tuplemesh.ticks.feature:feature' is a function, not a FeatureSpec")
    ):
        registered_features(["tuplemesh.ticks.feature:feature"])


def test_every_feature_is_registered_once_and_one_provides_acking():
    features = registered_features()
    names = [spec.name for spec in features.specs]
    assert names == ["checkpoints", "acking", "ticks", "hotkeys", "sampling", "tracing", "gateway"]
    assert [spec.name for spec in features.specs if spec.acking is not None] == ["acking"]
    # the coordinator is added before the ackers, so that they track its trees too
    assert [spec.name for spec in features.specs if spec.topology_part is not None] == [
        "checkpoints",
        "acking",
    ]
    assert [spec.name for spec in features.specs if spec.run_resource is not None] == ["checkpoints"]
    # every one but acking runs a part in each worker
    assert [spec.name for spec in features.specs if spec.build is None] == ["acking"]


def test_a_feature_set_refuses_two_of_a_name_or_two_ackings():
    first = FeatureSpec("a", acking=lambda topology, assignment: NoAcking)  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match="feature name\\(s\\) registered twice: a"):
        FeatureSet((first, FeatureSpec("a")))
    with pytest.raises(ValueError, match="more than one feature provides acking: a, b"):
        FeatureSet((first, replace(first, name="b")))


def test_without_an_acking_feature_no_executor_is_tracked():
    builder = TopologyBuilder("untracked")
    builder.set_spout("words", ListSpout([["a"]], ["word"]))
    builder.set_bolt("sink", RecordingBolt()).shuffle_grouping("words")
    conf = Config({"topology.acker.executors": 2})
    tracked = WorkerPlan.build(builder.build(), 0, 1, conf)
    assert ACKER in tracked.topology.components
    others = FeatureSet(tuple(s for s in registered_features().specs if s.name != "acking"))
    # ackers asked for, no acking feature to track them: refused, naming both, not run untracked
    with pytest.raises(
        ValueError, match=r"topology 'untracked' needs the acking feature \(topology\.acker\.executors is 2\)"
    ):
        WorkerPlan.build(builder.build(), 0, 1, conf, features=others)
    untracked = WorkerPlan.build(
        builder.build(), 0, 1, Config({"topology.acker.executors": 0}), features=others
    )
    assert ACKER not in untracked.topology.components  # no topology part added the ackers
    # given routes that report to ackers (the tracked plan's), the tracked plan's port tracks and
    # the untracked one's does not
    (sink,) = tracked.assignment.component_tasks["sink"]
    routes = build_routes(tracked.streams["sink"], tracked.local_tasks)
    local = tracked.local_tasks
    inboxes = {task: RingBuffer.single_producer(8) for task in local}
    serializer = load_serializer("msgpack")
    outbox = Outbox(
        local_inboxes=inboxes,
        remote_workers={},
        transfer_ring=RingBuffer.single_producer(8),
        serializer=serializer,
        batch_size=8,
        send_capacity=8,
    )
    assert isinstance(tracked.acking(outbox, "sink", sink, routes, local), TreeAcking)
    assert isinstance(untracked.acking(outbox, "sink", sink, routes, local), NoAcking)


def encode(executor: BoltExecutor, values: list[Any]) -> bytes:
    """``values`` on the spout's "other" stream, as a payload from another worker."""
    stream_id = executor.contexts[executor.task_ids[0]].topology.stream_ids()[("words", "other")]
    return load_serializer("msgpack").serialize(1, stream_id, values, None)


def test_a_batch_wrapper_runs_around_each_inbox_batch_and_reads_what_it_executed():
    batches = BatchesAndObservers()
    executor, _ = sink_executor(1, batches)
    task = executor.task_ids[0]
    encoded = encode(executor, [9])
    executor.on_event(batch(task, Tuple(["a", 1], 1, "words", "default", FIELDS)), 0, True)
    executor.on_event(
        Batch([(task, Tuple(["b", 2], 1, "words", "default", FIELDS)), (task, encoded)]), 1, True
    )
    assert batches.handled == [(1, 1), (2, 2)]
    assert executor.bolts[task].seen == ["a", "b", 9]  # type: ignore[attr-defined]


class Nesting:
    """Wraps each inbox batch's handling and logs when it enters and leaves; ``holds`` declares
    it holds input back (as barrier alignment does)."""

    def __init__(self, name: str, holds: bool, log: list[str]) -> None:
        self.name = name
        self.holds = holds
        self.log = log

    def attach(self, executor: ExecutorView) -> ExecutorHooks | None:
        if not executor.is_bolt:
            return None

        def wrap_batch(run: BatchRun) -> BatchRun:
            def nested(batch: list[tuple[int | None, Any]]) -> None:
                self.log.append(f"{self.name} in")
                run(batch)
                self.log.append(f"{self.name} out")

            return nested

        return ExecutorHooks(wrap_batch=wrap_batch, holds_input=self.holds)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def section(self) -> Mapping[str, Any]:
        return {}

    def metrics(self) -> Sequence[FeatureMetric]:
        return ()


@pytest.mark.parametrize("holder_first", [True, False], ids=["holder-attached-first", "holder-attached-last"])
def test_a_wrapper_that_holds_input_back_is_innermost_whatever_the_order_features_attach_in(
    holder_first: bool,
):
    log: list[str] = []
    holder, first, second = (
        Nesting("holder", True, log),
        Nesting("first", False, log),
        Nesting("second", False, log),
    )
    executor, _ = sink_executor(1, *((holder, first, second) if holder_first else (first, second, holder)))
    task = executor.task_ids[0]
    executor.on_event(batch(task, Tuple(["a", 1], 1, "words", "default", FIELDS)), 0, True)
    assert log == ["second in", "first in", "holder in", "holder out", "first out", "second out"]
    assert executor.bolts[task].seen == ["a"]  # type: ignore[attr-defined]


def test_two_wrappers_that_hold_input_back_are_refused_when_the_executor_is_built():
    log: list[str] = []
    with pytest.raises(TypeError, match=r"executor sink.*: 2 features hold its input back; at most one may"):
        sink_executor(1, Nesting("one", True, log), Nesting("two", True, log))


def test_without_a_batch_wrapper_the_executor_runs_the_plain_handling():
    executor, _ = sink_executor(1)
    assert executor._take_batch == executor._run_batch


def test_observers_switch_on_and_off_while_the_executor_runs_and_peek_decodes_payloads():
    batches = BatchesAndObservers()
    executor, _ = sink_executor(1, batches)
    task = executor.task_ids[0]
    view = batches.executor
    assert view is executor and executor.input_observer is None and executor.outbox.watch is None
    encoded = encode(executor, [9])
    executor.on_event(batch(task, Tuple(["a", 1], 1, "words", "default", FIELDS)), 0, True)
    view.observe(batches.observe_inputs, None)
    executor.on_event(Batch([(task, encoded)]), 1, True)
    view.observe(None, None)
    executor.on_event(batch(task, Tuple(["c", 3], 1, "words", "default", FIELDS)), 2, True)
    assert batches.seen == [("input", (task, encoded))]  # only while switched on
    assert executor.input_observer is None
    assert view.tuples_in(encoded) == 1
    (peeked,) = view.peek(encoded)
    assert (peeked.values, peeked.source_component, peeked.source_stream) == ([9], "words", "other")
    assert view.peek(b"not msgpack") == []
    assert executor.counters.executed == 3 and executor.counters.deserialize_errors == 0


class FillsSnapshot:
    """Fills the executor snapshot fields it is given (a feature's ``snapshot_fields`` hook)."""

    name = "fills"

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self.fields = fields

    def attach(self, executor: ExecutorView) -> ExecutorHooks | None:
        return ExecutorHooks(snapshot_fields=lambda: self.fields) if executor.is_bolt else None


def test_an_executor_snapshot_field_a_feature_may_not_fill_is_refused_when_the_executor_is_built():
    builder = TopologyBuilder("fills")
    builder.set_spout("words", Words())
    builder.set_bolt("sink", Sink()).shuffle_grouping("words")
    topology = builder.build()
    fine = wire(topology, Config({}), lambda context: (FillsSnapshot({"alignment": None}),))
    executor = BoltExecutor(fine.spec("sink"), fine.wiring)
    assert executor.features.fields() == {"alignment": None}
    for field in ("executed", "name"):  # a counter, and a field the worker fills
        wired = wire(topology, Config({}), lambda context, f=field: (FillsSnapshot({f: 1}),))  # type: ignore[misc]
        with pytest.raises(
            TypeError,
            match=re.escape(f"fills snapshot fields ['{field}']; features may fill only ['alignment']"),
        ):
            BoltExecutor(wired.spec("sink"), wired.wiring)


def test_a_stateful_topology_is_refused_by_features_without_checkpoints():
    from examples.stateful_wordcount import StatefulCountBolt

    builder = TopologyBuilder("counts")
    builder.set_spout("words", ListSpout([["a"]], ["word"]))
    builder.set_bolt("count", StatefulCountBolt()).fields_grouping("words", ["word"])
    acking_only = FeatureSet(tuple(s for s in registered_features().specs if s.name == "acking"))
    with pytest.raises(ValueError) as refused:
        WorkerPlan.build(builder.build(), 0, 1, Config(), features=acking_only)
    assert str(refused.value) == (
        "topology 'counts' needs the checkpoints feature (stateful bolt(s) count), which this "
        "worker's features leave out (they are: acking)"
    )
    # a topology needing neither runs with any set, an empty one too
    builder = TopologyBuilder("plain")
    builder.set_spout("words", ListSpout([["a"]], ["word"]))
    builder.set_bolt("sink", RecordingBolt()).shuffle_grouping("words")
    plan = WorkerPlan.build(builder.build(), 0, 1, Config(), features=FeatureSet(()))
    assert sorted(plan.topology.components) == ["sink", "words"]


def test_admin_finds_sampling_and_restoring_by_their_interfaces_not_by_name():
    from tuplemesh.core.feature import RestoringFeature, WatchingFeature
    from tuplemesh.sampling.feature import feature as sampling
    from tuplemesh.state.feature import Checkpoints

    builder = TopologyBuilder("watched")
    builder.set_spout("words", ListSpout([["a"]], ["word"]))
    builder.set_bolt("sink", RecordingBolt()).shuffle_grouping("words")
    plan = WorkerPlan.build(builder.build(), 0, 1, Config())
    built = sampling(FeatureContext(plan.topology, plan.conf, 0, "watched", plan.assignment))
    assert isinstance(built, WatchingFeature) and not isinstance(built, RestoringFeature)
    assert issubclass(Checkpoints, RestoringFeature) and not issubclass(Checkpoints, WatchingFeature)


def test_a_running_part_is_found_under_its_specs_name_and_must_carry_it():
    from tests.hotkeys.test_hotkeys_panel import Executor as View
    from tuplemesh.hotkeys.feature import HotKeys

    builder = TopologyBuilder("named")
    builder.set_spout("words", ListSpout([["a"]], ["word"]))
    builder.set_bolt("sink", RecordingBolt()).fields_grouping("words", ["word"])
    plan = WorkerPlan.build(builder.build(), 0, 1, Config())
    context = FeatureContext(plan.topology, plan.conf, 0, "named", plan.assignment)
    built = registered_features().build(context)
    assert list(built) == ["ticks", "hotkeys", "sampling", "gateway"]  # tracing: no provider set
    hot = built["hotkeys"]
    assert isinstance(hot, HotKeys) and not hot.counting and hot.metrics() == ()
    assert hot.attach(View("sink", "sink-0", (1,))) is None  # counting off: no executor wrapped

    def misnamed(context: FeatureContext) -> HotKeys:
        return HotKeys(context, 1)

    with pytest.raises(TypeError, match="'keys' built a running part named 'hotkeys': they must match"):
        FeatureSet((FeatureSpec("keys", build=misnamed),)).build(context)


def test_panels_are_listed_in_registry_order_with_their_features_names():
    from tuplemesh.hotkeys.panel import PANEL

    assert registered_features().panels() == [("hotkeys", PANEL)]
    assert FeatureSet((FeatureSpec("a"), FeatureSpec("b", panel=PANEL))).panels() == [("b", PANEL)]
