"""The bolt executor's runs, driven directly: what each entry point is handed from one inbox
batch of mixed entries, exact counts, failures, a halt mid-batch, and how often a sampled run
takes its wrapped calls."""

from __future__ import annotations

import itertools
import logging
import random
from types import SimpleNamespace
from typing import Any

import pytest

from tuplemesh.logutil import RateLimitedLog
from tuplemesh.serialization import COLUMNS_MARKER, frame_rows, load_serializer
from tuplemesh.topology import Columns, Fields, Tuple
from tuplemesh.worker.bolt_input import BoltFailures, Halt, SampledRun, bolt_run
from tuplemesh.worker.inbox_reader import InboxReader

STREAM = 7
FIELDS = Fields(["word", "n"])
CODEC = load_serializer("msgpack")


def tup(word: str, n: int, source: int = 2) -> Tuple:
    return Tuple([word, n], source, "split", "default", FIELDS)


def payload(word: str, n: int) -> bytes:
    return CODEC.serialize(2, STREAM, [word, n])


def rows(*values: list[Any]) -> bytes:
    return frame_rows(len(values), CODEC.serialize_rows(2, STREAM, [list(v) for v in values]))


def columns_payload(words: list[str], ns: list[int]) -> bytes:
    return frame_rows(len(words), CODEC.serialize_rows(2, STREAM, [words, ns]), COLUMNS_MARKER)


class Collector:
    def __init__(self) -> None:
        self.failed: list[Any] = []

    def fail(self, item: Any) -> None:
        self.failed.append(item)


class Setup:
    """One executor's parts around a run of tasks 1 and 2, recording every call by task."""

    def __init__(
        self, entry: str, limit: int = 100, raise_on: str | None = None, halt_after: Any = None
    ) -> None:
        self.counters = SimpleNamespace(
            executed=0, received=0, abandoned_on_halt=0, deserialize_errors=0, failed=0, errors=0
        )
        self.reader = InboxReader(
            "count[1]",
            CODEC,
            {STREAM: ("split", "default", FIELDS)},
            self.counters,
            RateLimitedLog(logging.getLogger("test"), 0.0),
        )
        self.halt = Halt()
        self.collectors = {1: Collector(), 2: Collector()}
        self.errors: list[tuple[str, int]] = []
        failures = BoltFailures(
            "count",
            self.collectors,
            lambda method, task, exc: self.errors.append((method, task)),
            self.reader._errors_log,
        )
        self.calls: list[tuple[int, Any]] = []

        def call(task: int) -> Any:
            def record(item: Any) -> None:
                values = [t.values[0] for t in item] if isinstance(item, list) else None
                if isinstance(item, Columns):
                    values = list(item.column("word"))
                elif isinstance(item, Tuple):
                    values = item.values[0]
                self.calls.append((task, values))
                if halt_after is not None and values == halt_after:
                    self.halt.on = True  # as a halt from another thread, during this call
                if raise_on is not None and raise_on in (values if isinstance(values, list) else [values]):
                    raise RuntimeError(f"bolt raised on {raise_on}")

            return record

        self.run = bolt_run(
            entry, {1: call(1), 2: call(2)}, limit, self.reader, self.counters, self.halt, failures
        )


def mixed() -> list[tuple[int | None, Any]]:
    """Local tuples, a payload, a rows payload, a columns payload, a local list, local columns
    and a broadcast: 11 tuples in 7 entries (the broadcast once)."""
    local_columns = Columns.from_tuples([tup("h", 8), tup("i", 9)])
    return [
        (1, tup("a", 1)),
        (2, payload("b", 2)),
        (1, rows(["c", 3], ["d", 4])),
        (2, columns_payload(["e", "f"], [5, 6])),
        (1, [tup("g", 7)]),
        (2, local_columns),
        (None, tup("j", 10)),
    ]


def test_execute_is_called_once_per_tuple_in_arrival_order_and_a_broadcast_once_per_task() -> None:
    setup = Setup("execute")
    setup.run.run(mixed())
    assert setup.calls == [
        *[(1, "a"), (2, "b"), (1, "c"), (1, "d"), (2, "e"), (2, "f")],
        *[(1, "g"), (2, "h"), (2, "i"), (1, "j"), (2, "j")],
    ]
    assert (setup.counters.executed, setup.counters.received) == (11, 10)


def test_execute_batch_gets_each_tasks_part_in_arrival_order_cut_at_the_limit() -> None:
    setup = Setup("execute_batch", limit=3)
    setup.run.run(mixed())
    assert setup.calls == [(1, ["a", "c", "d"]), (1, ["g", "j"]), (2, ["b", "e", "f"]), (2, ["h", "i", "j"])]
    assert (setup.counters.executed, setup.counters.received) == (11, 10)


def test_process_gets_one_columns_per_task_and_source_with_the_sources_rows_joined() -> None:
    setup = Setup("process")
    batch = mixed()
    batch.append((1, Tuple(["k", 11], 5, "other", "default", FIELDS)))  # another source
    setup.run.run(batch)
    assert setup.calls == [(1, ["a", "c", "d", "g", "j"]), (1, ["k"]), (2, ["b", "e", "f", "h", "i", "j"])]
    assert (setup.counters.executed, setup.counters.received) == (12, 11)


def test_undecodable_entries_are_counted_and_left_out_and_the_rest_runs() -> None:
    for entry in ("execute", "execute_batch", "process"):
        setup = Setup(entry)
        setup.run.run([(1, b"\xc1 garbled"), (1, tup("a", 1)), (2, frame_rows(3, b"\xc1 garbled"))])
        assert [values for _, values in setup.calls] in (["a"], [["a"]]), entry
        assert (setup.counters.deserialize_errors, setup.counters.failed) == (2, 4), entry
        assert setup.counters.received == 5, entry  # every entry, a rows payload by its rows


def test_a_raising_call_is_counted_and_fails_its_input_and_the_batch_goes_on() -> None:
    setup = Setup("execute", raise_on="b")
    setup.run.run([(1, tup("a", 1)), (1, tup("b", 2)), (1, tup("c", 3))])
    assert [values for _, values in setup.calls] == ["a", "b", "c"]
    assert setup.errors == [("execute", 1)] and [t.values for t in setup.collectors[1].failed] == [["b", 2]]
    batch_setup = Setup("execute_batch", raise_on="b")
    batch_setup.run.run([(1, tup("a", 1)), (1, tup("b", 2)), (2, tup("c", 3))])
    assert batch_setup.errors == [("execute_batch", 1)]
    assert [t.values for t in batch_setup.collectors[1].failed] == [["a", 1], ["b", 2]]  # the whole call
    assert batch_setup.calls[-1] == (2, ["c"])


def test_a_halt_stops_the_run_at_the_next_tuple_and_counts_what_it_left() -> None:
    setup = Setup("execute", halt_after="c")
    setup.run.run(mixed())
    assert [values for _, values in setup.calls] == ["a", "b", "c"]
    # "d" of the rows payload, then the 6 tuples of the last 4 entries (the broadcast once)
    assert (setup.counters.executed, setup.counters.abandoned_on_halt) == (3, 1 + 6)


@pytest.mark.parametrize("entry", ["execute_batch", "process"])
def test_a_halt_stops_a_batch_run_before_its_next_call_and_counts_every_part_it_left(entry: str) -> None:
    setup = Setup(entry, limit=3, halt_after=["a", "c", "d"])
    setup.run.run(mixed())
    assert setup.calls == [(1, ["a", "c", "d"])]
    # task 1's ["g", "j"] and task 2's ["b", "e", "f", "h", "i", "j"]: the broadcast "j" is in
    # both tasks' parts, and counted in each
    assert (setup.counters.executed, setup.counters.abandoned_on_halt) == (3, 2 + 6)


class Counting:
    def __init__(self) -> None:
        self.batches = 0

    def run(self, batch: list[tuple[int | None, Any]]) -> None:
        self.batches += 1


def test_a_sampled_run_wraps_the_first_batch_then_batches_drawn_1_to_2_every_minus_1_apart() -> None:
    state = random.getstate()
    random.seed(20261127)  # the gaps are drawn with the random module: a fixed draw
    try:
        plain, wrapped = Counting(), Counting()
        sampled = SampledRun(plain, wrapped, 3)
        seen = []
        for _ in range(3000):
            before = wrapped.batches
            sampled.run([])
            seen.append(wrapped.batches > before)
    finally:
        random.setstate(state)
    assert plain.batches + wrapped.batches == 3000  # each batch runs once, through one of them
    wrapped_at = [index for index, was in enumerate(seen) if was]
    assert wrapped_at[0] == 0  # the first batch: an executor that takes few batches has one
    gaps = [b - a for a, b in itertools.pairwise(wrapped_at)]
    assert set(gaps) == {1, 2, 3, 4, 5}  # randint(1, 2 * 3 - 1)
    assert 2.8 <= sum(gaps) / len(gaps) <= 3.2  # every 3 batches on average


def test_a_raising_process_fails_its_columns_once_and_empty_entries_count_nothing() -> None:
    setup = Setup("process", raise_on="b")
    empty_columns = Columns.from_tuples([tup("x", 0)]).slice(0, 0)
    setup.run.run([(1, tup("a", 1)), (2, tup("b", 2)), (1, []), (2, empty_columns)])
    assert setup.calls == [(1, ["a"]), (2, ["b"])]
    assert setup.errors == [("process", 2)]
    [failed] = setup.collectors[2].failed  # the call's columns, failed once as a whole
    assert isinstance(failed, Columns) and list(failed.column("word")) == ["b"]
    assert (setup.counters.executed, setup.counters.received) == (2, 2)  # the empty entries: 0
