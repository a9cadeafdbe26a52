"""Per-tuple cost of the in-process hot path, one thread, no waiting: a spout's emit through its
collector and the Outbox into a local inbox (no serialization) or onto the transfer ring
(serialized), one ``emit`` per tuple, 100 rows per ``emit_many``, or 1000 rows per
``emit_columns`` (one column), shuffle-grouped or fields-grouped over a 64-word vocabulary.

Baseline: the same values appended to a list by a plain loop (the CPython floor for touching
each tuple once).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from bench.records import Record, best_rate
from tuplemesh.core.collectors import BoltOutputCollector, StreamRoute
from tuplemesh.core.outbox import Outbox
from tuplemesh.disruptor import EventPoller, RingBuffer
from tuplemesh.serialization import MsgpackSerializer
from tuplemesh.topology import Fields
from tuplemesh.topology.groupings import FieldsGrouping, ShuffleGrouping
from tuplemesh.worker.executor_base import ExecutorCounters

RING_SIZE = 1024
BATCH = 100
FIELDS = Fields(["word"])
#: emits between two drains of the destination ring: far below its capacity in tuples
DRAIN_EVERY = 10_000


COLUMN = 1000
VOCABULARY = [f"word{i}" for i in range(64)]


def _emitter(remote: bool, by_word: bool = False) -> tuple[BoltOutputCollector, Outbox, EventPoller]:
    """A collector whose one stream goes shuffle-grouped (or fields-grouped on "word") to tasks 1
    and 2, in this worker or not."""
    inbox: RingBuffer[Any] = RingBuffer.single_producer(RING_SIZE)
    transfer: RingBuffer[Any] = RingBuffer.single_producer(RING_SIZE)
    drained = transfer if remote else inbox
    poller = EventPoller(drained, release_slots=True)
    drained.add_gating_sequences(poller.sequence)
    outbox = Outbox(
        local_inboxes={} if remote else {1: inbox, 2: inbox},
        remote_workers={1: 1, 2: 1} if remote else {},
        transfer_ring=transfer,
        serializer=MsgpackSerializer(),
        batch_size=BATCH,
        send_capacity=10 * BATCH,
    )
    grouping = FieldsGrouping(("word",)) if by_word else ShuffleGrouping()
    chooser = grouping.chooser((1, 2), frozenset() if remote else frozenset({1, 2}), FIELDS)
    route = StreamRoute("default", 0, FIELDS, False, [chooser], frozenset())
    collector = BoltOutputCollector(0, "spout", {"default": route}, outbox, ExecutorCounters())
    return collector, outbox, poller


def _emit_run(n: int, remote: bool) -> Any:
    def run() -> int:
        collector, outbox, poller = _emitter(remote)
        emit = collector.emit
        drain = poller.poll
        values = ["word"]
        for i in range(n):
            emit(values)
            if i % DRAIN_EVERY == 0:
                drain(_discard)
        outbox.flush()
        drain(_discard)
        return n

    return run


def _calls_run(
    n: int, per_call: int, remote: bool, by_word: bool, call: Callable[[BoltOutputCollector], Any]
) -> Any:
    """``n`` emits made ``per_call`` at a time by ``call(collector)`` (a call with no arguments)."""

    def run() -> int:
        collector, outbox, poller = _emitter(remote, by_word)
        emit = call(collector)
        drain = poller.poll
        for i in range(0, n, per_call):
            emit()
            if i % DRAIN_EVERY == 0:
                drain(_discard)
        outbox.flush()
        drain(_discard)
        return n

    return run


def _emit_many_run(n: int, remote: bool, by_word: bool = False) -> Any:
    """The same emits through ``emit_many``, BATCH rows a call (rows payloads when remote)."""
    rows = [[VOCABULARY[i % len(VOCABULARY)]] for i in range(BATCH)]
    return _calls_run(n, BATCH, remote, by_word, lambda collector: partial(collector.emit_many, rows))


def _emit_columns_run(n: int, remote: bool, by_word: bool = False) -> Any:
    """The same emits through ``emit_columns``, COLUMN rows a call as one column (columns
    payloads when remote)."""
    columns = [[VOCABULARY[i % len(VOCABULARY)] for i in range(COLUMN)]]
    return _calls_run(n, COLUMN, remote, by_word, lambda collector: partial(collector.emit_columns, columns))


def _discard(event: Any, sequence: int, end_of_batch: bool) -> None:
    return None


def _plain_run(n: int) -> Any:
    def run() -> int:
        out: list[Any] = []
        values = ["word"]
        for i in range(n):
            out.append((i & 1, values))
            if len(out) == BATCH:
                out = []
        return n

    return run


def run(quick: bool = False) -> list[Record]:
    n = 200_000 if quick else 1_000_000
    repeats = 1 if quick else 3
    plain = {"a plain loop appending (task, values)": best_rate(_plain_run(n), repeats)}
    rows_rate = best_rate(_emit_many_run(n, remote=True, by_word=True), repeats)
    by_rows = {"the same through emit_many(100 rows)": rows_rate}
    return [
        Record("hotpath", "emit -> outbox -> local inbox (batches of 100)", "tuples",
               best_rate(_emit_run(n, remote=False), repeats), plain),
        Record("hotpath", "emit -> serialize -> outbox -> transfer ring (batches of 100)", "tuples",
               best_rate(_emit_run(n, remote=True), repeats), plain),
        Record("hotpath", "emit_many(100 rows) -> outbox -> local inbox", "tuples",
               best_rate(_emit_many_run(n, remote=False), repeats), plain),
        Record("hotpath", "emit_many(100 rows) -> rows payloads -> transfer ring", "tuples",
               best_rate(_emit_many_run(n, remote=True), repeats), plain),
        Record("hotpath", "emit_columns(1000 rows) -> outbox -> local inbox", "tuples",
               best_rate(_emit_columns_run(n, remote=False), repeats), plain),
        Record("hotpath", "emit_columns(1000 rows) -> columns payloads -> transfer ring", "tuples",
               best_rate(_emit_columns_run(n, remote=True), repeats), plain),
        Record("hotpath", "fields grouping: emit_columns(1000 rows) -> payloads -> transfer ring", "tuples",
               best_rate(_emit_columns_run(n, remote=True, by_word=True), repeats), by_rows),
    ]  # fmt: skip
