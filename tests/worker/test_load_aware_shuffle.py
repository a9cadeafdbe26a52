"""Load-aware shuffle (Storm 2's default shuffle): a target task that cannot take more is left out
until it has room, so one stalled task does not hold its emitter while the others run dry; below
saturation the spread is the plain round-robin's.

The chooser is checked against a probe the test controls, the probe against real rings and a
real congestion map, and the whole against a stalled bolt task in a real two-worker mesh, in the
spout's worker (its inbox fills) and in the other (its worker reports it congested). No rate or
duration is measured: a stalled task takes nothing until the test releases it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest

from tests.helpers import eventually
from tests.worker.test_backpressure import CountedSpout
from tuplemesh.config import Config
from tuplemesh.core import held_back
from tuplemesh.core.congestion import CongestionMap
from tuplemesh.core.held_back import HeldBack
from tuplemesh.core.target_load import TargetLoad
from tuplemesh.disruptor import EventPoller, RingBuffer
from tuplemesh.topology import Bolt, Fields, TopologyBuilder, Tuple, groupings
from tuplemesh.topology.assignment import Assignment
from tuplemesh.topology.groupings import (
    REVIEW_ROWS,
    LoadAwareShuffle,
    LocalOrShuffleGrouping,
    NoneGrouping,
    ShuffleGrouping,
)
from tuplemesh.worker.local_cluster import LocalCluster

TASKS = (3, 4, 5, 6)


@pytest.fixture(autouse=True)
def looks_by_rows_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The looks a test counts come from rows alone, however slow the machine runs it."""
    monkeypatch.setattr(groupings, "LOOK_SECONDS", float("inf"))


class Probe:
    """A `TargetProbe` whose full and congested tasks the test sets; counts its looks."""

    review_rows = REVIEW_ROWS

    def __init__(self) -> None:
        self.full: set[int] = set()
        self.blocked: dict[int, float] = {}
        self.holding: set[int] = set()
        self.looks = 0

    @property
    def reports(self) -> Probe:  # the test's congestion reports too: ``blocked``
        return self

    def with_room(self, choices: list[tuple[int]]) -> list[tuple[int]]:
        self.looks += 1
        return [c for c in choices if c[0] not in self.full | self.holding and c[0] not in self.blocked]

    def not_holding(self, choices: list[tuple[int]]) -> list[tuple[int]]:
        return [c for c in choices if c[0] not in self.holding]


def chosen(chooser: LoadAwareShuffle, rows: int) -> Counter[int]:
    return Counter(chooser.choose(("x",))[0] for _ in range(rows))


def test_with_no_target_full_it_is_the_plain_even_round_robin():
    probe = Probe()
    chooser = LoadAwareShuffle(TASKS, probe)
    assert chosen(chooser, 40 * REVIEW_ROWS) == {t: 10 * REVIEW_ROWS for t in TASKS}
    assert probe.looks == 40 - 1  # one look every REVIEW_ROWS rows, none per row
    plain = ShuffleGrouping().chooser(TASKS, frozenset(), Fields(["x"]))
    assert Counter(plain.choose(("x",))[0] for _ in range(400)) == {t: 100 for t in TASKS}


def test_a_full_target_is_left_out_until_it_has_room_even_when_nothing_else_has():
    probe = Probe()
    chooser = LoadAwareShuffle(TASKS, probe)
    chosen(chooser, REVIEW_ROWS)  # up to the first look
    probe.full = {4}
    counts = chosen(chooser, 3 * REVIEW_ROWS)  # looks after the first row: task 4 left out
    assert counts[4] == 0 and sum(counts.values()) == 3 * REVIEW_ROWS
    assert {counts[3], counts[5], counts[6]} == {REVIEW_ROWS}  # the rest share evenly
    probe.full = {3, 4, 5, 6}  # nothing has room: those that had at the last look (draining),
    counts = chosen(chooser, 3 * REVIEW_ROWS)  # not the full one too, which may never drain
    assert counts[4] == 0 and {counts[3], counts[5], counts[6]} == {REVIEW_ROWS}
    probe.full = set()
    assert chosen(chooser, 4 * REVIEW_ROWS) == {t: REVIEW_ROWS for t in TASKS}


def test_a_task_reported_congested_gets_no_row_after_the_report_not_only_after_a_look():
    """The emitter would wait on a congested remote task: the report is honoured at once, also
    when no other target had room at that look; a report whose lease ended holds nothing."""
    probe = Probe()
    chooser = LoadAwareShuffle(TASKS, probe)
    chosen(chooser, 10)
    probe.blocked = {5: float("inf")}
    counts = chosen(chooser, REVIEW_ROWS - 10)  # no scheduled look among these rows
    assert counts[5] == 0 and sum(counts.values()) == REVIEW_ROWS - 10
    assert probe.looks == 1  # looked once, when the next row would have gone to task 5
    probe.blocked = {}
    assert chosen(chooser, 2 * REVIEW_ROWS)[5] > 0  # the next look has it back
    probe.full = {3, 4, 6}
    chosen(chooser, REVIEW_ROWS)  # a look: only 5 has room
    probe.full = {3, 4, 5, 6}
    chosen(chooser, REVIEW_ROWS)  # a look with nothing: still 5 alone
    probe.blocked = {5: float("inf")}
    assert set(chosen(chooser, REVIEW_ROWS)) == {5}  # nothing else left: the emitter waits on it
    probe.blocked = {5: 0.0}  # its lease over: a free task, no look
    looks = probe.looks
    assert set(chosen(chooser, 10)) == {5} and probe.looks == looks


def test_a_columnar_emit_splits_over_the_targets_with_room_looking_each_time():
    probe = Probe()
    chooser = LoadAwareShuffle(TASKS, probe)
    probe.full = {3, 6}
    parts = chooser.split([list(range(10))], 10)
    assert probe.looks == 1
    assert sorted(t for t, _ in parts) == [4, 5]
    assert sorted(len(range(10)[s]) for _, s in parts) == [5, 5]  # type: ignore[index]
    probe.full = set()
    parts = chooser.split([list(range(8))], 8)
    assert probe.looks == 2 and sorted(t for t, _ in parts) == list(TASKS)


def test_while_targets_are_left_out_a_look_also_comes_after_a_while(monkeypatch):
    """On a slow stream a task left out is looked at again after ``LOOK_SECONDS``, not after
    ``REVIEW_ROWS`` rows that may take minutes; with nothing left out, no clock is read."""
    monkeypatch.setattr(groupings, "LOOK_SECONDS", 0.0)
    probe = Probe()
    chooser = LoadAwareShuffle(TASKS, probe)
    chosen(chooser, 10)
    assert probe.looks == 0  # nothing left out: rows alone bring a look
    probe.full = {4}
    chosen(chooser, REVIEW_ROWS)  # the look: 4 left out
    looks = probe.looks
    probe.full = set()
    assert chosen(chooser, 4) == {t: 1 for t in TASKS}  # a look before the first row: 4 is back
    assert probe.looks == looks + 1  # and none after it: nothing is left out any more


def test_the_shuffling_groupings_are_load_aware_over_their_own_tasks():
    assert ShuffleGrouping.load_aware and NoneGrouping.load_aware and LocalOrShuffleGrouping.load_aware
    assert ShuffleGrouping().spread_over(TASKS, frozenset({4})) == TASKS
    local_or = LocalOrShuffleGrouping()
    assert local_or.spread_over(TASKS, frozenset({4, 6, 99})) == (4, 6)
    assert local_or.spread_over(TASKS, frozenset({99})) == TASKS  # none local: all of them
    probe = TargetLoad({}, None, 0.5)
    chooser = probe.shuffle(local_or.spread_over(TASKS, frozenset({4, 6})))
    assert isinstance(chooser, LoadAwareShuffle)
    assert Counter(chooser.choose(("x",))[0] for _ in range(100)) == {4: 50, 6: 50}
    assert probe.shuffle((4,)) is None  # one task: nothing to choose
    # a look at least once per emit batch, at most every REVIEW_ROWS rows
    assert TargetLoad({}, None, 0.5, batch_tuples=10).review_rows == 10
    assert TargetLoad({}, None, 0.5, batch_tuples=1000).review_rows == REVIEW_ROWS


def test_with_nothing_having_room_it_never_keeps_to_a_task_that_sets_its_input_aside():
    probe = Probe()
    chooser = LoadAwareShuffle(TASKS, probe)
    assert chosen(chooser, 4 * REVIEW_ROWS) == {t: REVIEW_ROWS for t in TASKS}
    probe.holding, probe.full = {3, 4}, {5, 6}  # 3 and 4 align barriers; 5 and 6 are full
    chooser.review()
    # the full ones, on which the emitter waits (a bound), not the ones that would set all aside
    assert chosen(chooser, 4 * REVIEW_ROWS) == {5: 2 * REVIEW_ROWS, 6: 2 * REVIEW_ROWS}
    probe.full = set()  # 5 and 6 drained: still only they (3 and 4 have no room while they hold)
    assert chosen(chooser, 4 * REVIEW_ROWS) == {5: 2 * REVIEW_ROWS, 6: 2 * REVIEW_ROWS}
    probe.holding = set()  # the alignments ended
    chooser.review()
    assert chosen(chooser, 4 * REVIEW_ROWS) == {t: REVIEW_ROWS for t in TASKS}


def test_when_every_target_sets_its_input_aside_it_spreads_over_all_of_them():
    """Every task of a component aligns the same checkpoint, one after another: kept to the last
    one that began, that one would take everything and reach its alignment bound first."""
    probe = Probe()
    chooser = LoadAwareShuffle(TASKS, probe)
    for task in TASKS:  # they begin to hold one by one, each between two looks
        probe.holding.add(task)
        chooser.review()
    assert chosen(chooser, 4 * REVIEW_ROWS) == {t: REVIEW_ROWS for t in TASKS}


def test_the_probe_leaves_out_a_task_of_its_worker_that_holds_input_back():
    ring: RingBuffer[Any] = RingBuffer.multi_producer(16)
    held = HeldBack()
    probe = TargetLoad({3: ring, 4: ring}, None, 0.5, held_back=held)
    everything = [(3,), (4,), (7,)]
    held.hold(3)
    assert probe.with_room(everything) == [(4,), (7,)]  # its inbox is empty, but it holds input
    assert probe.not_holding(everything) == [(4,), (7,)]
    held.release(3)
    assert probe.with_room(everything) == everything and probe.not_holding(everything) == everything


def test_a_task_holding_back_for_longer_than_an_alignment_takes_is_not_left_out(
    monkeypatch: pytest.MonkeyPatch,
):
    """An input whose barriers never come must not keep a task out of its worker's shuffles."""
    monkeypatch.setattr(held_back, "LEAVE_OUT_SECONDS", 0.0)
    held = HeldBack()
    probe = TargetLoad({}, None, 0.5, held_back=held)
    held.hold(3)
    assert held.since and probe.with_room([(3,), (4,)]) == [(3,), (4,)]


def test_the_probe_reads_a_local_inbox_against_the_watermark_and_a_remote_task_s_congestion():
    local: RingBuffer[Any] = RingBuffer.multi_producer(16)
    poller = EventPoller(local, release_slots=True)
    local.add_gating_sequences(poller.sequence)
    local.sequencer.limit = 4  # the queue-time limit: half of it is the watermark's 2 slots
    congestion = CongestionMap(lease=60.0)
    probe = TargetLoad({3: local}, congestion, 0.5)
    everything = [(3,), (7,), (8,)]  # 3 in this worker; 7 and 8 in peer "b"
    assert probe.with_room(everything) == everything
    local.try_put("a")
    local.try_put("b")
    assert probe.with_room(everything) == everything  # 2 of the 4 slots: at the watermark
    local.try_put("c")
    assert probe.with_room(everything) == [(7,), (8,)]  # above it, with a slot left for a flush
    congestion.report("b", [8])
    assert probe.with_room(everything) == [(7,)]
    poller.poll(lambda item, seq, end: None)  # the consumer takes all three: room again
    assert probe.with_room(everything) == [(3,), (7,)]
    congestion.report("b", [])  # the peer clears it
    assert probe.with_room(everything) == everything
    ended = CongestionMap(lease=0.0)  # a report whose lease is over holds nothing
    ended.report("b", [7, 8])
    time.sleep(0.001)  # deliberate: past the zero lease
    assert TargetLoad({}, ended, 0.5).with_room(everything) == everything
    off = TargetLoad({}, None, 0.5)  # backpressure off: no reports, nothing congested
    assert off.with_room(everything) == everything and not off.reports.blocked


TOTAL = 200_000  # from the one spout task: a quarter is many times what a stalled task can hold
BATCH = 100  # tuples per inbox slot (topology.producer.batch.size)
#: slots of each inbox (and of the receive overflow, and of the transfer ring): what a stalled
#: task can hold. Above half of them it is congested; the other half and the overflow take what
#: is already on its way when the report reaches the spout (a full overflow would hold up the
#: receive thread, and with it every task of that worker).
SLOTS = 64
#: the task that stalls until the test releases it (set before the mesh starts; one process)
STALLED: dict[str, int] = {}
RELEASE = threading.Event()


class SinkBolt(Bolt):
    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.stalls = context.task_id == STALLED["task"]

    def execute(self, tup: Tuple) -> None:
        if self.stalls:
            RELEASE.wait(120.0)  # deliberate: the stalled consumer, until the test releases it


def sink_topology() -> Any:
    b = TopologyBuilder("stalled_target")
    b.set_spout("src", CountedSpout(TOTAL), parallelism=1)  # 100 a call: one batch
    b.set_bolt("sink", SinkBolt(), parallelism=4).shuffle_grouping("src")
    return b.build()


@pytest.mark.parametrize(
    ("transport", "where"), [("local", "beside"), ("grpc", "beside"), ("grpc", "across"), ("zmq", "across")]
)
def test_a_stalled_target_task_gets_nothing_more_while_the_others_take_every_tuple(transport, where):
    """With a plain round-robin the spout would be held once the stalled task's buffers were full,
    every other task having taken no more than that task's share; here they take all the rest."""
    topology = sink_topology()
    assignment = Assignment.compute(topology, 2)
    of_worker = assignment.worker_of_task()
    (spout_task,) = assignment.tasks_of("src")
    sinks = assignment.tasks_of("sink")
    beside = [t for t in sinks if of_worker[t] == of_worker[spout_task]]
    across = [t for t in sinks if of_worker[t] != of_worker[spout_task]]
    assert beside and across, f"the test needs sink tasks in both workers: {of_worker}"
    STALLED["task"] = (beside if where == "beside" else across)[0]
    RELEASE.clear()
    conf = Config(
        {
            "messaging.transport": transport,
            "topology.executor.receive.buffer.size": SLOTS,
            "topology.producer.batch.size": BATCH,
            "topology.transfer.batch.size": BATCH,
            "topology.transfer.buffer.size": SLOTS,
            "messaging.coalesce.ms": 0,  # stream messages of one batch each, as the inbox's
        }
    )
    cluster = LocalCluster(topology, 2, conf)
    cluster.start()
    try:

        def executed_by_task() -> dict[int, int]:
            return {
                t: e.executed
                for snap in cluster.snapshots()
                for e in snap.executors
                if e.component == "sink"
                for t in e.tasks
            }

        def spout() -> Any:
            (executor,) = [e for snap in cluster.snapshots() for e in snap.executors if e.component == "src"]
            return executor

        # the spout emits every tuple while one of its targets takes none: with an even spread it
        # would wait on that task once its inbox, the receive overflow and the transfer path
        # held the task's quarter; here the task gets nothing more once it is full or congested
        eventually(
            lambda: spout().emitted == TOTAL,
            timeout=120,
            interval=0.05,
            message=lambda: (
                f"the spout emitted {spout().emitted} of {TOTAL} beside a stalled task "
                f"{STALLED['task']} ({where}); the sink tasks took {executed_by_task()}"
            ),
        )
        eventually(
            lambda: sum(executed_by_task().values()) > TOTAL // 2,
            timeout=120,
            interval=0.05,
            message=lambda: (
                f"the other sink tasks took {executed_by_task()} beside a stalled "
                f"task {STALLED['task']} ({where}), more than {TOTAL // 2} of {TOTAL} expected"
            ),
        )
        assert executed_by_task()[STALLED["task"]] <= 1  # it is still stalled
        RELEASE.set()
        eventually(
            lambda: sum(executed_by_task().values()) == TOTAL,
            timeout=120,
            interval=0.05,
            message=lambda: f"sink executed {executed_by_task()} once released; {TOTAL} expected",
        )
        time.sleep(0.2)  # deliberate: nothing more arrives after the exact count (no duplicates)
        assert sum(executed_by_task().values()) == TOTAL
    finally:
        RELEASE.set()
        cluster.stop()


def test_turned_off_a_shuffle_spreads_evenly_whatever_the_load():
    """``topology.disable.loadaware.messaging``: every task its even share, the stalled one too,
    so the spout waits on it (Storm's shuffle before load awareness)."""
    topology = sink_topology()
    assignment = Assignment.compute(topology, 1)
    STALLED["task"] = assignment.tasks_of("sink")[0]
    RELEASE.clear()
    conf = Config(
        {
            "topology.disable.loadaware.messaging": True,
            "topology.executor.receive.buffer.size": SLOTS,
            "topology.producer.batch.size": BATCH,
        }
    )
    cluster = LocalCluster(topology, 1, conf)
    cluster.start()
    try:
        (spout,) = [e for e in cluster.snapshots()[0].executors if e.component == "src"]
        eventually(
            lambda: any(
                q.producer_waits for q in cluster.snapshots()[0].queues if q.name.startswith("inbox:sink")
            ),
            timeout=60,
            interval=0.05,
            message=lambda: "the spout never waited on the stalled task's inbox",
        )
        RELEASE.set()
        eventually(
            lambda: cluster.counters()["sink"]["executed"] == TOTAL,
            timeout=120,
            interval=0.05,
            message=lambda: f"sink executed {cluster.counters()['sink']['executed']} of {TOTAL}",
        )
        counts = {
            t: e.executed for e in cluster.snapshots()[0].executors if e.component == "sink" for t in e.tasks
        }
        assert counts == {t: TOTAL // 4 for t in assignment.tasks_of("sink")}
        del spout
    finally:
        RELEASE.set()
        cluster.stop()
