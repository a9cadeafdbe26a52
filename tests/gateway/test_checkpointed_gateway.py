"""The Gateway's components as checkpointed state: an ExportLog that holds records back until
their checkpoint commits and restores with its epoch and offsets, and an IngestSpout that
acknowledges rows when their checkpoint commits and replays them after a rollback."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from tuplemesh.config import Config
from tuplemesh.core.feature import FeatureContext
from tuplemesh.gateway.components import IngestSpout
from tuplemesh.gateway.export_log import COLUMNS, MARK_FORMAT, ROWS, ExportLog
from tuplemesh.gateway.ticket import PublishTicket
from tuplemesh.gateway.worker_feature import GatewayFeature
from tuplemesh.state.spout import CheckpointedSpout
from tuplemesh.topology import TopologyBuilder

_names = itertools.count()


def held_back(*values: int) -> ExportLog:
    log = ExportLog(100)
    log.hold_back()
    for value in values:
        assert log.append([value])
    return log


def test_records_become_readable_when_the_checkpoint_holding_them_commits():
    log = held_back(0, 1, 2)
    assert log.fetch(0, 10) == ([], 0) and log.end == 0  # nothing committed yet
    part = log.mark(1)
    assert part == [log.epoch, 0, [[ROWS, [[0], [1], [2]], 3]], MARK_FORMAT]
    log.append([3])  # after the barrier: belongs to the next checkpoint
    log.checkpoint_committed(1)
    assert log.fetch(0, 10) == ([[0], [1], [2]], 3)
    assert log.fetch(1, 1) == ([[1]], 3)
    assert log.commit(10) == 3  # a reader cannot commit past what it may read


def test_an_abandoned_checkpoint_never_makes_its_records_readable():
    log = held_back(0)
    log.mark(1)  # abandoned: never commits
    log.append([1])
    log.mark(2)
    log.checkpoint_committed(2)
    assert log.fetch(0, 10) == ([[0], [1]], 2)
    log.checkpoint_committed(1)  # a late notice of an older checkpoint changes nothing
    assert log.end == 2


def test_held_back_records_do_not_count_against_the_retention():
    log = ExportLog(2)
    log.hold_back()
    for i in range(5):  # would block a plain log at 2: here the barrier behind them must pass
        assert log.append([i])
    log.mark(1)
    log.checkpoint_committed(1)
    assert log.end - log.start == 5
    log.close()
    assert log.append([5]) is False  # readable ones do: full, and closed


def test_a_rollback_in_the_same_log_drops_what_the_checkpoint_does_not_hold():
    log = held_back(0, 1)
    part = log.mark(1)
    log.checkpoint_committed(1)
    assert log.commit(1) == 1  # a reader went on past the checkpoint's start
    log.append([2])
    log.append([3])
    epoch = log.epoch
    log.restore(part)
    assert (log.epoch, log.start, log.end, len(log)) == (epoch, 1, 2, 1)
    assert log.fetch(1, 10) == ([[1]], 2)
    log.append(["replayed"])
    log.mark(2)
    log.checkpoint_committed(2)
    assert log.fetch(1, 10) == ([[1], ["replayed"]], 3)


def test_a_new_log_restores_the_checkpoint_with_its_epoch_and_offsets():
    old = held_back(0, 1, 2)
    old.mark(1)
    old.checkpoint_committed(1)
    old.commit(1)
    part = old.mark(2)  # [epoch, 1, [[ROWS, [[1], [2]], 2]], MARK_FORMAT]
    fresh = ExportLog(100)  # the restarted worker's
    fresh.hold_back()
    fresh.restore(part)
    assert (fresh.epoch, fresh.start, fresh.end) == (old.epoch, 1, 3)
    assert fresh.fetch(2, 10) == ([[2]], 3)  # a reader's offset in the old log is valid here


def test_a_rollback_to_no_checkpoint_drops_every_held_back_record():
    log = held_back(0, 1)
    log.restore(None)
    assert (log.start, log.end, len(log)) == (0, 0, 0)


class Collector:
    def __init__(self) -> None:
        self.emitted: list[Any] = []

    def emit(self, values: list[Any], msg_id: Any = None) -> None:
        raise AssertionError("checkpointed: rows go out as columns")

    def emit_columns(self, columns: list[list[Any]], msg_ids: Any = None, batch_id: Any = None) -> None:
        assert msg_ids is None and batch_id is None  # checkpointed: replayed by rollback, not by acking
        assert columns[0], "no empty batches"
        self.emitted.extend(columns[0])

    def take(self) -> list[Any]:
        emitted, self.emitted = self.emitted, []
        return emitted


@pytest.fixture
def ingest() -> Iterator[tuple[IngestSpout, Collector]]:
    topology = f"ingest-{next(_names)}"
    spout = IngestSpout("rows", ["row"], capacity=4, per_call=3)
    builder = TopologyBuilder(topology)
    builder.set_spout("rows", spout)
    conf = Config({"topology.acker.executors": 1})
    gateway = GatewayFeature(FeatureContext(builder.build(), conf, 0, topology))
    # as the worker's executor offers it: a checkpointed topology's spout inside its wrapper
    executor = SimpleNamespace(component="rows", is_bolt=False, tasks={1: CheckpointedSpout(spout)})
    gateway.attach(executor)  # type: ignore[arg-type]
    collector = Collector()
    context = SimpleNamespace(topology_name=topology, worker_index=0)
    spout.open(conf, context, collector)  # type: ignore[arg-type]
    assert gateway.registry.ingest_queues("rows") == [spout.queue]
    spout.rewind(None)  # the runtime's first rollback: the topology is checkpointed
    yield spout, collector
    gateway.stop()


def publish(spout: IngestSpout, *rows: str) -> PublishTicket:
    ticket = PublishTicket(len(rows))
    assert spout.queue.put(ticket, [list(rows)], timeout=1.0)
    return ticket


def test_rows_are_acknowledged_when_the_checkpoint_with_their_effect_commits(ingest):
    spout, collector = ingest
    first = publish(spout, "a", "b")
    spout.next_tuple()
    assert collector.take() == ["a", "b"]
    position = spout.position()  # checkpoint 1 stores it: a and b are before its barrier
    second = publish(spout, "c")
    spout.next_tuple()
    assert collector.take() == ["c"]
    assert not first.settled and not second.settled
    spout.committed(position)
    assert first.held and not second.settled  # c's effect is not in checkpoint 1
    spout.committed(spout.position())
    assert second.held


def test_a_rollback_emits_again_every_row_after_the_checkpoint(ingest):
    spout, collector = ingest
    ticket = publish(spout, "a", "b", "c")
    spout.next_tuple()
    position = spout.position()
    spout.next_tuple()  # nothing new
    more = publish(spout, "d")
    spout.next_tuple()
    assert collector.take() == ["a", "b", "c", "d"]
    spout.rewind(position)  # rolled back to the checkpoint holding a, b, c
    assert ticket.held  # their checkpoint is the committed one resumed from
    assert spout.pending() == 1
    spout.next_tuple()
    assert collector.take() == ["d"]
    assert not more.settled
    spout.rewind(None)  # nothing committed at all: d again
    spout.next_tuple()
    assert collector.take() == ["d"]


def test_a_position_of_another_process_replays_everything_uncommitted(ingest):
    spout, collector = ingest
    publish(spout, "a")
    spout.next_tuple()
    collector.take()
    spout.rewind(["another-process", 10])
    spout.next_tuple()
    assert collector.take() == ["a"]


def test_at_most_capacity_rows_wait_for_a_commit(ingest):
    spout, collector = ingest
    tickets = [publish(spout, f"r{i}") for i in range(4)]
    spout.next_tuple()
    spout.next_tuple()
    assert collector.take() == ["r0", "r1", "r2", "r3"]
    late = publish(spout, "r4")
    spout.next_tuple()
    assert collector.take() == []  # four rows wait for a commit: the fifth stays queued
    assert len(spout.queue) == 1
    spout.committed(spout.position())
    assert all(t.held for t in tickets)
    spout.next_tuple()
    assert collector.take() == ["r4"] and not late.settled


def test_requests_are_split_row_exactly_by_calls_rollbacks_and_commits(ingest):
    spout, collector = ingest  # 3 rows per call, 4 waiting for a commit at most
    first = publish(spout, "a", "b")
    spout.next_tuple()
    second = publish(spout, "c", "d")
    spout.next_tuple()
    assert collector.take() == ["a", "b", "c", "d"]
    spout.rewind(None)  # nothing committed: everything again, 3 rows per call
    spout.next_tuple()
    assert collector.take() == ["a", "b", "c"]  # one batch: a request and part of the next
    inside = spout.position()  # between c and d, inside the second request
    spout.next_tuple()
    assert collector.take() == ["d"]
    spout.committed(inside)
    assert first.held and not second.settled and second.retry().indices == [1]  # c held, d not
    assert spout.report()["uncommitted"] == 1 and spout.pending() == 0
    spout.rewind(inside)  # rolled back to that checkpoint: d alone again
    third = publish(spout, "e", "f", "g")
    spout.next_tuple()
    assert collector.take() == ["d", "e", "f"]
    spout.committed(spout.position())
    assert second.held and third.retry().indices == [2] and len(spout.queue) == 1


def test_a_log_awaiting_its_restore_is_restoring_until_the_checkpoint_restores_it():
    log = ExportLog(100)
    assert not log.restoring  # a log that is no checkpointed state is complete from the start
    log.await_restore()
    assert log.restoring
    log.hold_back()
    log.restore([7, 3, [["a"], ["b"]]])
    assert not log.restoring and (log.epoch, log.start, log.end) == (7, 3, 5)


def test_a_log_of_columnar_batches_restores_from_its_mark_and_the_mark_does_not_change_after():
    old = ExportLog(100)
    old.hold_back()
    old.extend_columns([["a", "b", "c"], [1, 2, 3]], 3)
    old.append(["d", 4])
    part = old.mark(1)
    old.checkpoint_committed(1)
    old.commit(1)
    old.extend_columns([["e"], [5]], 1)  # after the mark: does not join the marked chunks
    assert part == [
        old.epoch,
        0,
        [[COLUMNS, [["a", "b", "c"], [1, 2, 3]], 3], [ROWS, [["d", 4]], 1]],
        MARK_FORMAT,
    ]
    fresh = ExportLog(100)
    fresh.hold_back()
    fresh.restore(part)
    assert (fresh.epoch, fresh.start, fresh.end) == (old.epoch, 0, 4)
    assert fresh.fetch_columns(1, 10) == ([["b", "c", "d"], [2, 3, 4]], 3, 4)
    old.restore(part)  # the same log rolls back: the record after the mark is dropped
    assert (old.start, old.end, len(old)) == (1, 4, 3)
    assert old.fetch(1, 10) == ([("b", 2), ("c", 3), ["d", 4]], 4)


def test_a_rollback_cuts_a_chunk_without_changing_the_mark_that_holds_it():
    log = ExportLog(100)
    log.hold_back()
    log.extend_columns([["a", "b"]], 2)
    first = log.mark(1)
    log.checkpoint_committed(1)
    log.restore(first)
    log.extend_columns([["c", "d"]], 2)
    log.mark(2)  # abandoned
    log.restore(first)  # back to 2 records: the chunk of c and d goes
    assert log.fetch_columns(0, 10) == ([["a", "b"]], 2, 2)
    assert first == [log.epoch, 0, [[COLUMNS, [["a", "b"]], 2]], MARK_FORMAT]


def test_a_mark_taken_by_an_older_release_restores_as_records():
    fresh = ExportLog(100)
    fresh.hold_back()
    fresh.restore([77, 5, [["x", 1], ["y", 2]]])  # [epoch, start, records]
    assert (fresh.epoch, fresh.start, fresh.end) == (77, 5, 7)
    assert fresh.fetch(6, 10) == ([["y", 2]], 7)
