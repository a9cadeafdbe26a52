"""Barrier alignment, snapshots and rollbacks inside one bolt task (AlignedInput), without threads.

The task under test is task 10, fed by upstream tasks 1 and 2, sending barriers on to task 20;
the coordinator is task 99. Every batch is handed in as the executor would hand it over.
"""

from __future__ import annotations

import itertools
import logging
import time
from types import SimpleNamespace
from typing import Any

import pytest

from tuplemesh.config import Config
from tuplemesh.core.held_back import HeldBack
from tuplemesh.state import DictState, KeyValueState, MemoryStore, PartKey, StatefulBolt
from tuplemesh.state.alignment import AlignedInput
from tuplemesh.state.protocol import (
    ABANDON,
    ALIGNMENT_GIVEN_UP,
    BARRIER,
    BARRIER_STREAM,
    NO_CHECKPOINT,
    REPORT_STREAM,
    ROLLBACK,
    CheckpointPlan,
)
from tuplemesh.state.settings import StateSettings
from tuplemesh.topology import AnchoredTuple, Fields, Tuple

TASK, OUT, COORDINATOR = 10, 20, 99
_names = itertools.count()


class Recorder(StatefulBolt):
    """Appends every value it executes to the state's "seen" list."""

    def __init__(self) -> None:
        self.inits: list[dict[Any, Any]] = []

    def init_state(self, state: KeyValueState) -> None:
        self.state = state
        self.inits.append(dict(state.items()))

    def execute(self, tup: Tuple) -> None:
        self.state["seen"] = [*self.state.get("seen", []), tup.values[0]]


class Collector:
    def __init__(self) -> None:
        self.sent: list[tuple[int, list[Any], str]] = []
        self.failed: list[Tuple] = []

    def emit_direct(self, task: int, values: list[Any], anchors: Any = None, stream: str = "default") -> None:
        self.sent.append((task, list(values), stream))

    def fail(self, tup: Tuple) -> None:
        self.failed.append(tup)


class Harness:
    def __init__(self, buffer: int = 1000, bolt: Any = None) -> None:
        self.topology = f"align-{next(_names)}"
        self.bolt = Recorder() if bolt is None else bolt
        self.collector = Collector()
        self.counters = SimpleNamespace(received=0, errors=0)
        self.executed: list[Any] = []
        self.store = MemoryStore.from_conf({})
        settings = StateSettings(
            backend="memory",
            interval_seconds=1.0,
            timeout_seconds=1.0,
            alignment_buffer=buffer,
            log_interval_seconds=10.0,
        )
        plan = CheckpointPlan(
            settings=settings,
            topology=self.topology,
            coordinator_task=COORDINATOR,
            aligned=frozenset({"counter"}),
            inputs_of={TASK: frozenset({1, 2})},
            outputs_of={TASK: (OUT,)},
        )
        executor: Any = SimpleNamespace(
            component="counter",
            task_ids=(TASK,),
            tasks={TASK: self.bolt},
            collectors={TASK: self.collector},
            counters=self.counters,
            unpack=lambda entry: None,
        )
        self.held_back = HeldBack()
        aligned = AlignedInput.attach(
            executor, plan, Config({"messaging.transport": "local"}), self.held_back
        )
        assert aligned is not None
        self.aligned = aligned
        self.on_batch = aligned.wrap(self._execute)

    def _execute(self, items: list[tuple[int | None, Any]]) -> None:
        self.counters.received += len(items)
        for _task, tup in items:
            self.executed.append(tup.values[0])
            self.bolt.execute(tup)

    def feed(self, *items: Tuple) -> None:
        self.on_batch([(TASK, item) for item in items])

    @property
    def key(self) -> PartKey:
        return PartKey(self.topology, "counter", TASK)

    def signals(self) -> list[tuple[int, list[Any], str]]:
        sent, self.collector.sent = self.collector.sent, []
        return sent

    def started(self, checkpoint: int = NO_CHECKPOINT, attempt: int = 1) -> Harness:
        self.feed(marker(1, checkpoint, attempt), marker(2, checkpoint, attempt))
        self.signals()
        return self


def data(source: int, value: Any) -> Tuple:
    return Tuple([value], source, "up", "default", Fields(["v"]))


def barrier(source: int, checkpoint: int, attempt: int = 1) -> Tuple:
    return Tuple([BARRIER, checkpoint, attempt], source, "up", BARRIER_STREAM, Fields(["k", "c", "a"]))


def abandon(source: int, checkpoint: int, attempt: int = 1) -> Tuple:
    return Tuple([ABANDON, checkpoint, attempt], source, "up", BARRIER_STREAM, Fields(["k", "c", "a"]))


def marker(source: int, checkpoint: int, attempt: int) -> Tuple:
    return Tuple([ROLLBACK, checkpoint, attempt], source, "up", BARRIER_STREAM, Fields(["k", "c", "a"]))


def stored_seen(h: Harness, checkpoint: int) -> list[Any]:
    blob = h.store.get_part(h.key, checkpoint)
    assert blob is not None
    return list(DictState.restore(blob).get("seen", []))


def test_nothing_runs_before_a_channel_delivered_the_marker_of_the_tasks_attempt():
    h = Harness()
    h.feed(data(1, "before any marker"))
    assert h.executed == [] and h.aligned.stale_dropped == 1
    h.feed(
        marker(1, NO_CHECKPOINT, 1),
        data(1, "a"),
        data(2, "old attempt"),
        marker(2, NO_CHECKPOINT, 1),
        data(2, "b"),
    )
    assert h.executed == ["a", "b"]
    assert h.bolt.inits == [{}]  # init_state once, with empty state, before the first tuple
    assert h.signals() == [(OUT, [ROLLBACK, NO_CHECKPOINT, 1], BARRIER_STREAM)]  # forwarded once
    assert h.aligned.stale_dropped == 2
    assert h.counters.received == 6  # every inbox entry consumed exactly once


def test_aligned_snapshot_holds_exactly_the_tuples_before_the_barriers():
    h = Harness().started()
    h.feed(data(1, 1), barrier(1, 5), data(1, "after-1"), data(2, 2), data(2, 3))
    assert h.executed == [1, 2, 3]  # channel 1 is held back after its barrier
    assert h.store.get_part(h.key, 5) is None
    h.feed(data(2, 4), barrier(2, 5), data(2, "after-2"))
    assert stored_seen(h, 5) == [1, 2, 3, 4]
    assert h.signals() == [
        (OUT, [BARRIER, 5, 1], BARRIER_STREAM),
        (COORDINATOR, [5, 1, TASK, True], REPORT_STREAM),
    ]
    assert h.executed == [1, 2, 3, 4, "after-1", "after-2"]  # held tuples run after the snapshot
    assert h.counters.received == 2 + 8


def test_a_task_is_marked_holding_back_exactly_while_it_sets_tuples_aside():
    h = Harness(buffer=2).started()
    h.feed(data(1, "a"), barrier(1, 5))
    assert set(h.held_back.since) == set()  # aligning, but nothing set aside yet
    h.feed(data(1, "held"))
    assert set(h.held_back.since) == {TASK}  # a load-aware shuffle in its worker leaves it out now
    h.feed(barrier(2, 5))
    assert set(h.held_back.since) == set() and h.executed == ["a", "held"]  # completed: released
    h.feed(barrier(1, 6), data(1, "x"), data(1, "y"))
    assert set(h.held_back.since) == {TASK}
    h.feed(data(1, "z"))  # over the bound: given up, released
    assert set(h.held_back.since) == set()
    h.feed(barrier(1, 7), data(1, "w"))
    assert set(h.held_back.since) == {TASK}
    h.feed(marker(2, NO_CHECKPOINT, 2))  # a rollback drops what was held
    assert set(h.held_back.since) == set()


def test_a_task_setting_tuples_aside_is_closed_to_the_inputs_whose_barrier_it_has():
    """Its worker's emitters all of whose tasks feeding it have passed the barrier on wait
    before they send it more (`Outbox.held_back`); the mark goes with the alignment."""
    h = Harness().started()
    h.feed(barrier(1, 5))
    assert not h.held_back.closed_to(TASK, frozenset({1}), time.monotonic())  # nothing set aside
    h.feed(data(1, "held"))
    now = time.monotonic()
    assert h.held_back.closed_to(TASK, frozenset({1}), now)
    assert not h.held_back.closed_to(TASK, frozenset({2}), now)  # its barrier has not come
    assert not h.held_back.closed_to(TASK, frozenset({1, 2}), now)  # one executor running both
    h.feed(barrier(2, 5))
    assert h.held_back.closed == {} and h.executed == ["held"]


def test_a_task_holding_more_than_the_buffer_gives_the_checkpoint_up_and_runs_on(
    caplog: pytest.LogCaptureFixture,
):
    h = Harness(buffer=2).started()
    h.feed(barrier(1, 5), data(1, "x"), data(1, "y"))
    assert h.executed == []
    with caplog.at_level(logging.WARNING, logger="tuplemesh.state.alignment"):
        h.feed(data(1, "z"))  # a third held tuple: over the bound
    [warning] = [r.getMessage() for r in caplog.records]
    assert f"{h.key}: alignment given up: more than 2 tuples held back" in warning
    assert "checkpoint 5" in warning and "not a store error" in warning
    assert "topology.state.alignment.buffer.size" in warning
    assert h.executed == ["x", "y", "z"] and h.aligned.alignments_given_up == 1
    assert h.signals() == [
        (OUT, [ABANDON, 5, 1], BARRIER_STREAM),  # in place of the barrier: downstream gives up too
        (COORDINATOR, [5, 1, TASK, ALIGNMENT_GIVEN_UP], REPORT_STREAM),
    ]
    h.feed(barrier(2, 5), data(1, "w"))  # checkpoint 5 is over here: its late barrier changes nothing
    assert h.executed == ["x", "y", "z", "w"] and h.signals() == []
    assert h.store.get_part(h.key, 5) is None


def test_a_newer_barrier_gives_up_the_older_checkpoint_and_aligns_the_newer():
    h = Harness().started()
    h.feed(barrier(1, 5), data(1, "held"), barrier(2, 6))
    assert h.signals() == [
        (OUT, [ABANDON, 5, 1], BARRIER_STREAM),
        (COORDINATOR, [5, 1, TASK, ALIGNMENT_GIVEN_UP], REPORT_STREAM),
    ]
    assert h.executed == ["held"]
    h.feed(barrier(1, 6))
    assert stored_seen(h, 6) == ["held"]
    assert h.signals()[0] == (OUT, [BARRIER, 6, 1], BARRIER_STREAM)


def test_an_upstream_give_up_ends_the_alignment_at_once_and_is_passed_on():
    h = Harness().started()
    h.feed(data(1, "a"), barrier(1, 5), data(1, "held"), data(2, "b"))
    assert h.executed == ["a", "b"] and h.signals() == []
    h.feed(abandon(2, 5), data(2, "c"))  # task 2 gave 5 up: its barrier never comes
    assert h.signals() == [
        (OUT, [ABANDON, 5, 1], BARRIER_STREAM),
        (COORDINATOR, [5, 1, TASK, ALIGNMENT_GIVEN_UP], REPORT_STREAM),
    ]
    assert h.executed == ["a", "b", "held", "c"]  # what was held runs now, in its order
    assert h.store.get_part(h.key, 5) is None
    assert h.aligned.alignments_given_up == 0  # this task held nothing past its bound
    h.feed(barrier(2, 5), abandon(1, 5), data(1, "d"))  # 5 is over here: nothing more about it
    assert h.signals() == [] and h.executed[-1] == "d"
    h.feed(barrier(1, 6), data(1, "held 6"), barrier(2, 6))  # the next checkpoint aligns as usual
    assert stored_seen(h, 6) == ["a", "b", "held", "c", "d"]
    assert h.signals()[0] == (OUT, [BARRIER, 6, 1], BARRIER_STREAM)
    assert h.executed[-1] == "held 6"


def test_an_upstream_give_up_before_any_barrier_gives_up_without_holding_anything():
    h = Harness().started()
    h.feed(abandon(1, 5), data(1, "x"), data(2, "y"), barrier(2, 5), data(2, "z"))
    assert h.executed == ["x", "y", "z"]  # never aligning 5: channel 2's barrier holds nothing
    assert h.signals() == [
        (OUT, [ABANDON, 5, 1], BARRIER_STREAM),
        (COORDINATOR, [5, 1, TASK, ALIGNMENT_GIVEN_UP], REPORT_STREAM),
    ]


class Relay:
    """A stateless bolt: it has no part in a checkpoint, but it aligns (its output must not mix
    tuples from both sides of a barrier)."""

    def execute(self, tup: Tuple) -> None:
        pass


def test_a_stateless_task_that_gives_up_tells_the_tasks_downstream_not_the_coordinator():
    h = Harness(buffer=1, bolt=Relay()).started()
    h.feed(barrier(1, 5), data(1, "x"), data(1, "y"))
    assert h.aligned.alignments_given_up == 1 and h.executed == ["x", "y"]
    # the stateful tasks below learn from the notice (and report to the coordinator themselves)
    assert h.signals() == [(OUT, [ABANDON, 5, 1], BARRIER_STREAM)]


def test_an_abandon_older_than_the_checkpoint_aligned_now_changes_nothing():
    h = Harness().started()
    h.feed(barrier(1, 5), barrier(2, 5))  # 5 completes
    h.signals()
    h.feed(barrier(1, 7), data(1, "held"), abandon(2, 6))  # channel 1 never had a 6
    assert h.executed == [] and h.signals() == []  # still aligning 7, "held" still held
    h.feed(barrier(2, 7))
    assert stored_seen(h, 7) == [] and h.executed == ["held"]


def test_an_abandon_of_an_earlier_attempt_changes_nothing():
    h = Harness().started()
    h.feed(barrier(1, 5), data(1, "held"), abandon(2, 5, attempt=0))
    assert h.executed == [] and h.signals() == []


def test_a_rollback_drops_held_and_stale_tuples_and_restores_the_checkpoint():
    h = Harness().started()
    h.store.put_part(h.key, 3, DictState({"seen": ["restored"]}).snapshot())
    h.feed(data(1, "a"), barrier(1, 7), data(1, "held"))
    h.feed(marker(2, 3, 2))  # attempt 2 begins on channel 2: resume from checkpoint 3
    assert h.bolt.inits[-1] == {"seen": ["restored"]}
    assert h.signals() == [(OUT, [ROLLBACK, 3, 2], BARRIER_STREAM)]
    in_a_tree = AnchoredTuple(["old attempt"], 1, "up", "default", Fields(["v"]), {7: 9})
    h.feed(in_a_tree, data(2, "new"), marker(1, 3, 2), data(1, "new too"))
    assert h.executed == ["a", "new", "new too"]
    assert dict(h.bolt.state.items()) == {"seen": ["restored", "new", "new too"]}
    assert h.aligned.stale_dropped == 2  # "held" and "old attempt"
    assert h.collector.failed == [in_a_tree]  # its tree fails now: an at-least-once spout replays it
    h.feed(marker(1, 1, 1))  # a marker of an older attempt changes nothing
    assert h.signals() == [] and h.bolt.state["seen"][-1] == "new too"


def test_a_missing_part_stops_the_task_with_an_error_naming_it():
    h = Harness().started()
    h.feed(marker(1, 4, 2), data(1, "x"))
    task = h.aligned.tasks()[TASK]
    assert task.restore_error is not None
    assert f"topology {h.topology!r}, component 'counter', task {TASK}" in task.restore_error
    assert h.executed == [] and h.aligned.stale_dropped == 1


def test_tuples_from_tasks_that_are_not_inputs_run_at_once():
    h = Harness().started()
    h.feed(barrier(1, 5), data(1, "held"), data(42, "Admin.Emit"))
    assert h.executed == ["Admin.Emit"]
