"""The checkpoint coordinator: when checkpoints start, when they commit, and rollbacks."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest

import tuplemesh.state.coordinator as coordinator_module
from examples.stateful_wordcount import ReplayableSentenceSpout, StatefulCountBolt
from tuplemesh.config import Config
from tuplemesh.state import MemoryStore, StoreUnavailable
from tuplemesh.state.coordinator import ATTEMPT_COUNTER, CoordinatorBolt
from tuplemesh.state.protocol import (
    ALIGNMENT_GIVEN_UP,
    CHECKPOINT_NOW,
    COMMIT,
    CONTROL_STREAM,
    COORDINATOR,
    NO_CHECKPOINT,
    REPORT_STREAM,
    ROLLBACK,
    TICK_STREAM,
    TRIGGER,
)
from tuplemesh.topology import Fields, TopologyBuilder, TopologyContext, Tuple
from tuplemesh.worker.plan import WorkerPlan

_names = itertools.count()
TICK = Tuple([], -1, "__system", TICK_STREAM, Fields([]))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class Collector:
    def __init__(self) -> None:
        self.sent: list[tuple[int, list[Any]]] = []

    def emit_direct(self, task: int, values: list[Any], anchors: Any = None, stream: str = "default") -> None:
        assert stream == CONTROL_STREAM
        self.sent.append((task, list(values)))

    def take(self) -> list[tuple[int, list[Any]]]:
        sent, self.sent = self.sent, []
        return sent


class Setup:
    """A coordinator of a topology with spout tasks 4, 5 and stateful count tasks 2, 3."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.name = f"coordinated-{next(_names)}"
        builder = TopologyBuilder(self.name)
        builder.set_spout("sentences", ReplayableSentenceSpout(1), parallelism=2)
        builder.set_bolt("count", StatefulCountBolt(), parallelism=2).shuffle_grouping("sentences")
        conf = Config({"messaging.transport": "local", "topology.state.checkpoint.interval.ms": 100})
        plan = WorkerPlan.build(builder.build(), 0, 1, conf)
        assert plan.assignment.component_tasks == {COORDINATOR: (1,), "count": (2, 3), "sentences": (4, 5)}
        self.clock = Clock()
        monkeypatch.setattr(coordinator_module, "time", self.clock)
        self.store = MemoryStore.from_conf({})
        self.bolt = plan.topology.components[COORDINATOR].new_instance()
        assert isinstance(self.bolt, CoordinatorBolt)
        self.collector = Collector()
        context = TopologyContext(plan.topology, plan.assignment, 1, COORDINATOR, 0, conf)
        self.bolt.prepare(conf, context, self.collector)  # type: ignore[arg-type]

    def tick(self, after: float = 0.0) -> list[tuple[int, list[Any]]]:
        self.clock.now += after
        self.bolt.execute(TICK)
        return self.collector.take()

    def report(self, checkpoint: int, attempt: int, task: int, stored: bool | None = True) -> None:
        fields = Fields(["checkpoint", "attempt", "task", "stored"])
        self.bolt.execute(Tuple([checkpoint, attempt, task, stored], task, "x", REPORT_STREAM, fields))

    def new_attempt(self) -> int:
        return self.store.increment(self.name, ATTEMPT_COUNTER)

    def committed(self) -> int | None:
        return self.store.last_committed(self.name)


@pytest.fixture
def setup(monkeypatch: pytest.MonkeyPatch) -> Setup:
    return Setup(monkeypatch)


def test_the_first_attempt_starts_everyone_from_the_beginning_then_checkpoints_follow(setup: Setup):
    assert setup.tick() == []  # no worker started yet: nothing to do
    setup.new_attempt()
    assert setup.tick() == [(4, [ROLLBACK, NO_CHECKPOINT, 1]), (5, [ROLLBACK, NO_CHECKPOINT, 1])]
    assert setup.tick(0.05) == []  # the interval has not passed
    assert setup.tick(0.06) == [(4, [TRIGGER, 1, 1]), (5, [TRIGGER, 1, 1])]
    assert setup.tick(10.0) == []  # one checkpoint at a time


def test_a_checkpoint_asked_for_by_the_first_tick_of_an_attempt_follows_its_rollback_at_once(setup: Setup):
    """A worker stopped just after it started: the drain pauses the clock, and the stop's
    request for a final checkpoint is the tick that begins the attempt. No other tick comes."""
    setup.new_attempt()
    setup.clock.now += 0.01
    setup.bolt.execute(Tuple([CHECKPOINT_NOW], -1, "__system", TICK_STREAM, Fields(["request"])))
    assert setup.collector.take() == [
        (4, [ROLLBACK, NO_CHECKPOINT, 1]),
        (5, [ROLLBACK, NO_CHECKPOINT, 1]),
        (4, [TRIGGER, 1, 1]),
        (5, [TRIGGER, 1, 1]),
    ]
    for task in (2, 3, 4, 5):
        setup.report(1, 1, task)
    assert setup.committed() == 1


def test_a_checkpoint_commits_only_once_every_spout_and_stateful_task_stored_its_part(setup: Setup):
    setup.new_attempt()
    setup.tick()
    setup.tick(0.2)
    for task in (2, 3, 4):
        setup.report(1, 1, task)
    assert setup.committed() is None
    setup.report(1, 1, 5)
    assert setup.committed() == 1 and setup.bolt.report()["committed"] == 1
    # every task that stored a part hears of the commit
    assert setup.collector.take() == [(task, [COMMIT, 1, 1]) for task in (2, 3, 4, 5)]
    assert setup.tick(0.05) == []  # the next one waits an interval from the end of this one
    assert setup.tick(0.06) == [(4, [TRIGGER, 2, 1]), (5, [TRIGGER, 2, 1])]


def test_a_checkpoint_interrupted_by_a_death_is_never_committed(setup: Setup):
    setup.new_attempt()
    setup.tick()
    setup.tick(0.2)
    for task in (2, 3, 4, 5):
        setup.report(1, 1, task)
    setup.tick(0.2)  # checkpoint 2 starts; only some parts are stored when a worker dies
    setup.report(2, 1, 2)
    setup.report(2, 1, 4)
    setup.new_attempt()  # the restarted worker counts itself in
    assert setup.tick() == [(4, [ROLLBACK, 1, 2]), (5, [ROLLBACK, 1, 2])]  # back to checkpoint 1
    setup.report(2, 1, 3)  # late parts of the interrupted checkpoint, from the old attempt
    setup.report(2, 1, 5)
    assert setup.committed() == 1
    assert setup.bolt.report()["restored_from"] == 1


def test_a_part_that_could_not_be_stored_abandons_the_checkpoint_and_the_next_one_follows(setup: Setup):
    setup.new_attempt()
    setup.tick()
    setup.tick(0.2)
    setup.report(1, 1, 2, stored=False)
    for task in (3, 4, 5):
        setup.report(1, 1, task)
    assert setup.committed() is None and setup.bolt.report()["abandoned"] == 1
    assert setup.tick(0.2) == [(4, [TRIGGER, 2, 1]), (5, [TRIGGER, 2, 1])]


def test_a_task_that_gave_up_aligning_abandons_the_checkpoint_with_a_warning_not_a_store_error(
    setup: Setup, caplog: pytest.LogCaptureFixture
):
    setup.new_attempt()
    setup.tick()
    setup.tick(0.2)
    with caplog.at_level(logging.WARNING):
        setup.report(1, 1, 3, stored=ALIGNMENT_GIVEN_UP)
    assert setup.committed() is None
    report = setup.bolt.report()
    assert (report["abandoned"], report["abandoned_alignments"]) == (1, 1)
    assert setup.bolt.snapshot().abandoned == 1
    [record] = [r for r in caplog.records if "abandoned" in r.getMessage()]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert "checkpoint 1 abandoned: task 3 gave up aligning" in message
    assert "more than 100000 tuples" in message and "Not a store error" in message
    assert "topology.state.alignment.buffer.size" in message and "could not store" not in message
    # a part the store refused still reads as a store error, and is not counted as alignment
    setup.tick(0.2)
    with caplog.at_level(logging.WARNING):
        setup.report(2, 1, 2, stored=False)
    assert setup.bolt.report()["abandoned_alignments"] == 1 and setup.bolt.report()["abandoned"] == 2


def test_a_restarted_coordinator_reports_the_last_checkpoint_the_store_committed(setup: Setup):
    setup.store.commit(setup.name, 7)  # committed by the coordinator of an earlier start
    assert setup.bolt.snapshot().last_committed == NO_CHECKPOINT  # nothing read yet
    setup.new_attempt()
    assert setup.tick() == [(4, [ROLLBACK, 7, 1]), (5, [ROLLBACK, 7, 1])]
    assert setup.bolt.snapshot().last_committed == 7
    assert setup.bolt.report()["last_committed"] == 7 and setup.bolt.snapshot().committed == 0


def test_a_checkpoint_past_its_timeout_is_abandoned(setup: Setup):
    setup.new_attempt()
    setup.tick()
    setup.tick(0.2)
    assert setup.tick(61.0) == []  # the default timeout is 60 s
    assert setup.bolt.report()["abandoned"] == 1
    assert setup.tick(0.2) == [(4, [TRIGGER, 2, 1]), (5, [TRIGGER, 2, 1])]


class DownStore(MemoryStore):
    def counter(self, topology: str, counter: str) -> int:
        raise StoreUnavailable("connection refused")


def test_an_unavailable_store_is_counted_and_logged_and_processing_goes_on(
    setup: Setup, caplog: pytest.LogCaptureFixture
):
    setup.bolt._store = DownStore()  # the coordinator's connection goes down
    with caplog.at_level(logging.ERROR):
        assert setup.tick() == []
        assert setup.tick(0.2) == []
    assert setup.bolt.report()["store_errors"] == 2
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "connection refused" in errors[0]  # rate-limited: one line
    assert setup.name in errors[0]
