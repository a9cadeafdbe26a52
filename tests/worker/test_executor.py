"""Executors built from a WorkerPlan and their wiring alone; what a halted destination costs."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest

from tests.helpers import ListSpout, RecordingBolt, eventually
from tuplemesh.acking.collectors import TrackedBoltCollector, TrackedSpoutCollector
from tuplemesh.config import Config
from tuplemesh.core.collectors import BoltOutputCollector, SpoutOutputCollector
from tuplemesh.core.feature import ControlledSpout, ExecutorHooks
from tuplemesh.core.markers import Batch
from tuplemesh.disruptor import RingBuffer
from tuplemesh.serialization import frame_rows, load_serializer
from tuplemesh.topology import Fields, TopologyBuilder, Tuple
from tuplemesh.worker.executor import BoltExecutor, SpoutExecutor
from tuplemesh.worker.executor_base import ExecutorWiring
from tuplemesh.worker.plan import WorkerPlan


def topology(items: int) -> Any:
    """Bolt "b" (task 1) runs on worker 0, spout "s" (task 2) on worker 1."""
    builder = TopologyBuilder("t")
    builder.set_spout("s", ListSpout([[i] for i in range(items)], ["n"]))
    builder.set_bolt("b", RecordingBolt()).shuffle_grouping("s")
    return builder.build()


def wiring(plan: WorkerPlan) -> ExecutorWiring:
    inboxes = {e.index: RingBuffer.multi_producer(64) for e in plan.executors}
    return ExecutorWiring(
        plan,
        {task: inboxes[e] for task, e in plan.executor_of_task.items()},
        RingBuffer.multi_producer(64),
        lambda: load_serializer("msgpack"),
        None,
    )


def test_emits_left_in_the_buffers_when_the_transfer_path_halted_are_counted() -> None:
    conf = Config({"topology.producer.batch.size": 100, "topology.batch.flush.interval.millis": 60_000})
    plan = WorkerPlan.build(topology(5), 1, 2, conf)
    assert [e.component for e in plan.executors] == ["s"] and plan.remote_worker_of_task == {1: 0}
    wired = wiring(plan)
    wired.transfer_ring.sequencer.alert()  # the transfer path halted: nothing can leave this worker
    [spec] = plan.executors
    executor = SpoutExecutor(spec, wired)
    executor.start()
    assert executor.join(10.0)  # the finished spout's flush is refused, and the executor stops
    assert executor.counters.emitted == 5
    assert executor.counters.dropped_on_stop == 5
    assert executor.outbox.pending == 0


def test_nothing_is_counted_as_dropped_when_the_final_flush_goes_out() -> None:
    conf = Config({"topology.producer.batch.size": 100, "topology.batch.flush.interval.millis": 60_000})
    plan = WorkerPlan.build(topology(5), 1, 2, conf)
    wired = wiring(plan)
    [spec] = plan.executors
    executor = SpoutExecutor(spec, wired)
    executor.start()
    eventually(executor.finished.is_set, message="spout finished")
    executor.request_stop()
    assert executor.join(10.0)
    assert executor.counters.dropped_on_stop == 0
    ring = wired.transfer_ring
    batches = [ring.get(seq) for seq in range(ring.cursor + 1)]
    assert [(worker, len(batch)) for worker, batch, _ in batches] == [(0, 5)]


def test_collector_variants_are_chosen_when_the_executor_is_built() -> None:
    for ackers, spout_kind, bolt_kind in (
        (0, SpoutOutputCollector, BoltOutputCollector),
        (1, TrackedSpoutCollector, TrackedBoltCollector),
    ):
        plan = WorkerPlan.build(topology(1), 0, 1, Config({"topology.acker.executors": ackers}))
        wired = wiring(plan)
        by_component = {e.component: e for e in plan.executors}
        spout = SpoutExecutor(by_component["s"], wired)
        bolt = BoltExecutor(by_component["b"], wired)
        assert [type(c) for c in spout.collectors.values()] == [spout_kind]
        assert [type(c) for c in bolt.collectors.values()] == [bolt_kind]
        if ackers:  # the ackers report nothing to themselves: plain collectors
            acker = BoltExecutor(by_component["__acker"], wired)
            assert [type(c) for c in acker.collectors.values()] == [BoltOutputCollector]


def test_the_plan_is_the_same_in_every_worker_apart_from_what_is_local() -> None:
    conf = Config({"topology.acker.executors": 2})
    plans = [WorkerPlan.build(topology(1), i, 2, conf) for i in range(2)]
    assert plans[0].assignment == plans[1].assignment
    assert plans[0].stream_ids == plans[1].stream_ids
    assert plans[0].assignment.component_tasks["__acker"] == (1, 2)
    assert set(plans[0].executor_of_task) | set(plans[1].executor_of_task) == {1, 2, 3, 4}
    assert not set(plans[0].executor_of_task) & set(plans[1].executor_of_task)
    s_default = plans[0].streams["s"]["default"]
    assert s_default.targets[0][1] == (3,) and s_default.direct_targets == frozenset()
    assert plans[0].streams["s"]["__acking"].direct_targets == frozenset({1, 2})


def test_a_rows_payload_is_executed_tuple_by_tuple_and_a_garbled_one_is_counted() -> None:
    plan = WorkerPlan.build(topology(1), 0, 2, Config({}))
    [spec] = [e for e in plan.executors if e.component == "b"]
    executor = BoltExecutor(spec, wiring(plan))
    stream_id = plan.stream_ids[("s", "default")]
    body = load_serializer("msgpack").serialize_rows(2, stream_id, [[10], [11], [12]])  # type: ignore[attr-defined]
    good = frame_rows(3, body)
    garbled = frame_rows(4, b"\xc1 not msgpack")
    executor.start()
    executor.inbox.put(Batch([(1, good), (1, garbled)]))
    executor.request_stop()
    assert executor.join(10.0)
    [report] = executor.final_reports.values()
    assert [values for values, *_ in report["seen"]] == [[10], [11], [12]]
    assert report["seen"][0][1:] == ["s", "default", 2]
    counters = executor.counters
    assert counters.received == 7  # every tuple the two payloads carried, decodable or not
    assert counters.executed == 3
    assert counters.deserialize_errors == 1 and counters.failed == 4


class ControlledListSpout(ListSpout):
    """A ListSpout that takes system messages (a ControlledSpout): it records each one, and the
    first rewinds it (True: it has tuples to emit again)."""

    def __init__(self, items: list[list[Any]], fields: list[str]) -> None:
        super().__init__(items, fields)
        self.messages: list[list[Any]] = []

    def on_system_message(self, tup: Tuple) -> bool:
        self.messages.append(list(tup.values))
        return len(self.messages) == 1


def test_only_a_spout_that_declares_on_system_message_is_a_controlled_spout() -> None:
    assert isinstance(ControlledListSpout([], ["n"]), ControlledSpout)
    assert not isinstance(ListSpout([], ["n"]), ControlledSpout)


@pytest.mark.parametrize("taken", [True, False], ids=["controlled", "plain"])
def test_a_system_message_reaches_a_spout_that_takes_them_and_is_counted_and_ignored_by_others(
    taken: bool, caplog: pytest.LogCaptureFixture
) -> None:
    spout = ControlledListSpout([[1]], ["n"]) if taken else ListSpout([[1]], ["n"])
    builder = TopologyBuilder("t")
    builder.set_spout("s", spout)
    builder.set_bolt("b", RecordingBolt()).shuffle_grouping("s")
    plan = WorkerPlan.build(builder.build(), 0, 1, Config({}))
    [spec] = [e for e in plan.executors if e.component == "s"]
    executor = SpoutExecutor(spec, wiring(plan))
    [instance] = executor.tasks.values()
    executor.start()
    eventually(executor.finished.is_set, message="spout finished")
    message = Tuple(["rollback", 3, 2], 99, "__system", "__control", Fields(["kind", "n", "attempt"]))
    with caplog.at_level(logging.WARNING, logger="tuplemesh.worker.executor"):
        executor.inbox.put(Batch([(spec.tasks[0], message)]))
        eventually(lambda: executor.counters.received == 1, message="the message was taken")
        if isinstance(instance, ControlledListSpout):
            eventually(lambda: instance.messages == [["rollback", 3, 2]], message="the spout got it")
            eventually(executor.finished.is_set, message="finished again after the rewind")
        executor.request_stop()
        assert executor.join(10.0)
    ignored = [r for r in caplog.records if "ignored unexpected tuple" in r.getMessage()]
    assert len(ignored) == (0 if taken else 1)


class MessageIdSpout(ListSpout):
    """Emits each item with its first value as the message id; records the ids acked and failed."""

    def __init__(self, items: list[list[Any]]) -> None:
        super().__init__(items, ["n"])
        self.acked: list[Any] = []
        self.failed: list[Any] = []

    def next_tuple(self) -> None:
        item = next(self.mine, None)
        if item is None:
            self.done = True
        else:
            self.collector.emit(item, msg_id=item[0])

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)


def test_a_spout_executor_settles_its_trees_by_the_ackers_verdicts_and_logs_a_malformed_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    builder = TopologyBuilder("t")
    builder.set_spout("s", MessageIdSpout([["a"], ["b"], ["c"]]))
    builder.set_bolt("b", RecordingBolt()).shuffle_grouping("s")
    conf = Config({"topology.acker.executors": 1, "topology.message.timeout.secs": 600})
    plan = WorkerPlan.build(builder.build(), 0, 1, conf)
    [spec] = [e for e in plan.executors if e.component == "s"]
    executor = SpoutExecutor(spec, wiring(plan))  # no acker runs: only these verdicts settle trees
    [spout] = executor.tasks.values()
    assert isinstance(spout, MessageIdSpout)
    executor.start()
    eventually(lambda: executor.open_trees == 3, message="three trees open")
    roots = list(executor.tracker._open)  # the executor's thread no longer touches them: all emitted
    [acker_task] = plan.assignment.component_tasks["__acker"]

    def verdict(values: list[Any]) -> Batch:
        fields = Fields(["acked", "failed"][: len(values)])
        return Batch([(spec.tasks[0], Tuple(values, acker_task, "__acker", "__ack_verdict", fields))])

    with caplog.at_level(logging.WARNING, logger="tuplemesh.worker.executor"):
        executor.inbox.put(verdict([[roots[0]]]))  # one list: not [acked roots, failed roots]
        eventually(lambda: executor.counters.received == 1, message="the malformed verdict was taken")
        executor.inbox.put(verdict([[roots[0]], [roots[2], 12345]]))  # 12345: not a tree of it
        eventually(lambda: executor.open_trees == 1, message="two trees settled")
        executor.request_stop()
        assert executor.join(10.0)
    ignored = [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()]
    assert len(ignored) == 1 and "2 lists (acked roots, failed roots), this one 1" in ignored[0]
    assert spout.acked == ["a"] and spout.failed == ["c"]
    assert (executor.counters.acked, executor.counters.failed, executor.counters.received) == (1, 1, 2)


class _ExitRaises:
    """A feature whose executor hook raises as the loop ends."""

    name = "exit-raises"

    def attach(self, executor: Any) -> ExecutorHooks:
        def on_exit() -> None:
            raise RuntimeError("a feature's hook failed on the way out")

        return ExecutorHooks(on_exit=on_exit)

    def start(self) -> None: ...
    def stopping(self) -> None: ...
    def stop(self) -> None: ...
    def serve(self, where: Any) -> None: ...
    def section(self) -> dict[str, Any]:
        return {}


def test_a_feature_hook_raising_on_the_way_out_cuts_nothing_short(caplog: pytest.LogCaptureFixture) -> None:
    """A spout loop that ends while active (its first flush refused), a feature's exit hook
    raising: logged, and the way out still completes: the tuples the flush could not send are
    counted, and the switch says the loop ended, so no drain waits for it."""
    conf = Config({"topology.producer.batch.size": 100, "topology.batch.flush.interval.millis": 60_000})
    plan = WorkerPlan.build(topology(5), 1, 2, conf)
    wired = wiring(plan)
    wired.transfer_ring.sequencer.alert()  # its first flush is refused: the loop ends, still active
    [spec] = plan.executors
    executor = SpoutExecutor(spec, replace(wired, features=(_ExitRaises(),)))
    assert executor.switch.wait_deactivated(0.0)  # not started: nothing can be under way
    with caplog.at_level(logging.ERROR, logger="tuplemesh.worker.executor_features"):
        executor.start()
        assert executor.join(10.0)
    assert executor.switch.active  # never deactivated
    assert executor.switch.wait_deactivated(0.0) and executor.switch.quiet
    assert executor.counters.dropped_on_stop == 5  # the final flush ran after the hook raised
    [record] = [r for r in caplog.records if "exit-raises" in r.getMessage()]
    assert "on_exit" in record.getMessage() and record.exc_info is not None
