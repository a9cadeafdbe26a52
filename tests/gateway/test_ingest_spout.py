"""IngestSpout on its own (not checkpointed): columns with acking off, a tree per row with acking
on, and what fails when the runtime refuses a row partway."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from tuplemesh.config import Config
from tuplemesh.core.feature import FeatureContext
from tuplemesh.gateway.components import IngestSpout
from tuplemesh.gateway.ticket import PublishTicket
from tuplemesh.gateway.worker_feature import GatewayFeature
from tuplemesh.topology import TopologyBuilder

_names = itertools.count()


class Collector:
    """Records what the spout emits; raises on the row (or batch) holding ``refuse``."""

    def __init__(self, refuse: str | None = None) -> None:
        self.refuse = refuse
        self.rows: list[tuple[str, Any]] = []  # (value, msg id)
        self.batches: list[list[str]] = []

    def emit(self, values: list[Any], msg_id: Any = None) -> None:
        if values[0] == self.refuse:
            raise ValueError(f"refused {values[0]}")
        self.rows.append((values[0], msg_id))

    def emit_columns(self, columns: list[list[Any]], msg_ids: Any = None, batch_id: Any = None) -> None:
        assert msg_ids is None and batch_id is None
        if self.refuse in columns[0]:
            raise ValueError(f"refused {self.refuse}")
        self.batches.append(list(columns[0]))


def open_spout(
    ackers: int, collector: Collector, per_call: int = 100, max_pending: int = 0
) -> Iterator[IngestSpout]:
    topology = f"ingest-spout-{next(_names)}"
    spout = IngestSpout("rows", ["row"], capacity=100, per_call=per_call)
    builder = TopologyBuilder(topology)
    builder.set_spout("rows", spout)
    conf = Config({"topology.acker.executors": ackers, "topology.max.spout.pending": max_pending})
    gateway = GatewayFeature(FeatureContext(builder.build(), conf, 0, topology))
    gateway.attach(SimpleNamespace(component="rows", is_bolt=False, tasks={1: spout}))  # type: ignore[arg-type]
    spout.open(conf, SimpleNamespace(topology_name=topology, worker_index=0), collector)  # type: ignore[arg-type]
    try:
        yield spout
    finally:
        gateway.stop()


def publish(spout: IngestSpout, *rows: str) -> PublishTicket:
    ticket = PublishTicket(len(rows))
    assert spout.queue.put(ticket, [list(rows)], timeout=1.0)
    return ticket


def test_acking_off_each_requests_rows_go_out_as_one_batch_of_columns():
    collector = Collector()
    for spout in open_spout(0, collector, per_call=4):
        first, second = publish(spout, "a", "b", "c"), publish(spout, "d", "e")
        spout.next_tuple()  # four rows: all of the first request, one of the second
        assert collector.batches == [["a", "b", "c"], ["d"]] and not collector.rows
        assert first.held and not second.settled
        spout.next_tuple()
        assert collector.batches[-1] == ["e"] and second.held
        assert spout.emitted == 5


def test_acking_off_a_refused_batch_fails_with_the_batches_after_it():
    collector = Collector(refuse="d")
    for spout in open_spout(0, collector):
        first, second, third = publish(spout, "a"), publish(spout, "b", "d"), publish(spout, "e")
        with pytest.raises(ValueError, match="refused d"):
            spout.next_tuple()
        assert first.held
        assert second.settled and second.failures == 2 and second.retry().indices == [0, 1]
        assert third.settled and third.failures == 1
        assert spout.emitted == 1


def test_acking_on_every_row_is_a_tree_and_a_refused_row_fails_only_from_there():
    collector = Collector(refuse="c")
    for spout in open_spout(1, collector):
        ticket, later = publish(spout, "a", "b", "c", "d"), publish(spout, "e")
        with pytest.raises(ValueError, match="refused c"):
            spout.next_tuple()
        assert [value for value, _ in collector.rows] == ["a", "b"] and not collector.batches
        assert [msg_id for _, msg_id in collector.rows] == [(ticket, 0), (ticket, 1)]
        assert not ticket.settled and ticket.failures == 2 and later.failures == 1  # c, d and e
        for _, msg_id in collector.rows:  # a and b went out: their trees decide for them
            spout.ack(msg_id)
        assert ticket.settled and ticket.retry().indices == [2, 3]  # a and b are not published again
        assert spout.emitted == 2


def test_acking_on_a_call_takes_no_more_rows_than_max_spout_pending_leaves_room_for():
    collector = Collector()
    for spout in open_spout(1, collector, per_call=100, max_pending=3):
        ticket = publish(spout, *"abcdefg")
        spout.next_tuple()
        assert [value for value, _ in collector.rows] == ["a", "b", "c"] and spout.open_trees == 3
        spout.next_tuple()  # no room: nothing taken, nothing failed
        assert len(collector.rows) == 3 and ticket.failures == 0
        spout.ack(collector.rows[0][1])
        spout.fail(collector.rows[1][1])  # a failed tree frees its room too
        spout.next_tuple()
        assert [value for value, _ in collector.rows] == ["a", "b", "c", "d", "e"] and spout.open_trees == 3
        for _, msg_id in collector.rows[2:]:
            spout.ack(msg_id)
        spout.next_tuple()
        assert [value for value, _ in collector.rows[5:]] == ["f", "g"] and spout.open_trees == 2
        assert len(spout.queue) == 0 and spout.emitted == 7
