"""Window results against precomputed answers: count/duration x sliding/tumbling x processing/event
time, with out-of-order and late tuples, acking on eviction, and the watermark over input tasks.

Each case drives one windowed bolt task directly (a real TopologyContext, a recording collector,
a controllable clock), so every window, late tuple and ack can be compared exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from tuplemesh.errors import TopologyError
from tuplemesh.state.kv import DictState
from tuplemesh.topology import (
    Assignment,
    OutputFieldsDeclarer,
    Spout,
    TopologyBuilder,
    TopologyContext,
    Tuple,
)
from tuplemesh.topology.tuple import WATERMARK_STREAM, Fields, tick_tuple
from tuplemesh.windowing import (
    Count,
    Duration,
    StatefulWindowedBolt,
    StatefulWindowedBoltRunner,
    Window,
    WindowedBolt,
    WindowedBoltRunner,
)

FIELDS = Fields(["n", "ts"])


class Source(Spout):
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["n", "ts"])


class Recorder(WindowedBolt):
    """Records each window as (start, end, [n of each tuple])."""

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.windows: list[tuple[float | None, float | None, list[int]]] = []
        self.new: list[list[int]] = []
        self.expired: list[list[int]] = []

    def execute_window(self, window: Window) -> None:
        self.windows.append((window.start, window.end, [t.values[0] for t in window.tuples]))
        self.new.append([t.values[0] for t in window.new])
        self.expired.append([t.values[0] for t in window.expired])


class Collector:
    """Records what a bolt task emits, acks and fails."""

    def __init__(self) -> None:
        self.emitted: list[tuple[str, list[Any]]] = []
        self.acked: list[int] = []
        self.failed: list[int] = []

    def emit(self, values: Sequence[Any], anchors: Any = None, stream: str = "default") -> None:
        self.emitted.append((stream, list(values)))

    def ack(self, tup: Tuple) -> None:
        self.acked.append(tup.values[0])

    def fail(self, tup: Tuple) -> None:
        self.failed.append(tup.values[0])


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def task(bolt: WindowedBolt, sources: int = 1) -> tuple[WindowedBoltRunner, Collector, Clock, list[int]]:
    """A prepared task of ``bolt`` fed by ``sources`` spout tasks; (runner, collector, clock, spout tasks)."""
    builder = TopologyBuilder("windows")
    builder.set_spout("src", Source(), parallelism=sources)
    builder.set_bolt("win", bolt).shuffle_grouping("src")
    topology = builder.build()
    assignment = Assignment.compute(topology, 1)
    runner = topology.components["win"].new_instance()
    assert isinstance(runner, WindowedBoltRunner)
    clock = Clock()
    runner.clock = clock
    collector = Collector()
    context = TopologyContext(topology, assignment, assignment.tasks_of("win")[0], "win", 0, {})
    runner.prepare({}, context, collector)
    return runner, collector, clock, list(assignment.tasks_of("src"))


def data(n: int, ts: float, source: int) -> Tuple:
    return Tuple([n, ts], source, "src", "default", FIELDS)


def user(runner: WindowedBoltRunner) -> Recorder:
    assert isinstance(runner.user, Recorder)
    return runner.user


# n and event time of each tuple, in arrival order: 4 arrives after 3, 6 and 8 after the watermark
# passed them (lag 2: watermark = newest timestamp - 2)
EVENTS = [(1, 1), (2, 4), (3, 11), (4, 9), (5, 13), (6, 8), (7, 25), (8, 19), (9, 40)]


def run_events(bolt: WindowedBolt) -> tuple[Recorder, Collector]:
    runner, collector, _, (source,) = task(bolt)
    for n, ts in EVENTS:
        runner.execute(data(n, ts, source))
    return user(runner), collector


def late_of(collector: Collector) -> list[int]:
    return [values[0][0] for stream, values in collector.emitted if stream == "late"]


def test_event_time_tumbling_duration_windows():
    recorder, collector = run_events(Recorder(Duration(10), timestamp_field="ts", lag=2))
    assert recorder.windows == [(0, 10, [1, 2, 4]), (10, 20, [3, 5]), (20, 30, [7])]
    assert late_of(collector) == [6, 8]
    assert sorted(collector.acked) == [1, 2, 3, 4, 5, 6, 7, 8]  # 9 is still in a window
    assert collector.failed == []


def test_event_time_sliding_duration_windows():
    recorder, collector = run_events(Recorder(Duration(10), Duration(5), timestamp_field="ts", lag=2))
    assert recorder.windows == [
        (-5, 5, [1, 2]),
        (0, 10, [1, 2, 4]),
        (5, 15, [4, 3, 5]),
        (10, 20, [3, 5]),
        (20, 30, [7]),
        (25, 35, [7]),
    ]
    assert recorder.new[2] == [3, 5] and recorder.expired[2] == [1, 2]
    assert late_of(collector) == [6, 8]
    # each tuple acked once the last window holding it was evaluated, in that order
    assert collector.acked == [1, 2, 6, 4, 3, 5, 8, 7]


def test_event_time_tumbling_count_windows_count_in_timestamp_order():
    recorder, collector = run_events(Recorder(Count(2), timestamp_field="ts", lag=2))
    assert [w for _, _, w in recorder.windows] == [[1, 2], [4, 3], [5, 7]]
    assert recorder.windows[0][:2] == (None, None)
    assert late_of(collector) == [6, 8]
    assert sorted(collector.acked) == [1, 2, 3, 4, 5, 6, 7, 8]


def test_event_time_sliding_count_windows():
    recorder, collector = run_events(Recorder(Count(3), Count(2), timestamp_field="ts", lag=2))
    assert [w for _, _, w in recorder.windows] == [[1, 2], [2, 4, 3], [3, 5, 7]]
    assert collector.acked == [1, 6, 2, 4, 8, 3, 5]


def test_late_tuples_carry_their_values_origin_and_timestamp():
    _, collector = run_events(Recorder(Duration(10), timestamp_field="ts", lag=2))
    assert next(e for e in collector.emitted if e[0] == "late") == ("late", [[6, 8], "src", "default", 8])


def test_processing_time_tumbling_count_windows():
    runner, collector, _, (source,) = task(Recorder(Count(3)))
    for n in range(1, 8):
        runner.execute(data(n, 0, source))
    assert user(runner).windows == [(None, None, [1, 2, 3]), (None, None, [4, 5, 6])]
    assert collector.acked == [1, 2, 3, 4, 5, 6]


def test_processing_time_sliding_count_windows():
    runner, collector, _, (source,) = task(Recorder(Count(3), Count(2)))
    for n in range(1, 8):
        runner.execute(data(n, 0, source))
    assert [w for _, _, w in user(runner).windows] == [[1, 2], [2, 3, 4], [4, 5, 6]]
    assert collector.acked == [1, 2, 3, 4, 5]


def test_processing_time_tumbling_duration_windows_follow_the_clock_and_ticks():
    runner, collector, clock, (source,) = task(Recorder(Duration(10)))
    for n, now in [(1, 1), (2, 4), (3, 12)]:
        clock.now = now
        runner.execute(data(n, -1, source))
    clock.now = 19
    runner.execute(tick_tuple())
    assert user(runner).windows == [(0, 10, [1, 2])]
    clock.now = 21
    runner.execute(data(4, -1, source))
    clock.now = 35
    runner.execute(tick_tuple())  # no tuple comes: the tick evaluates the window
    assert user(runner).windows == [(0, 10, [1, 2]), (10, 20, [3]), (20, 30, [4])]
    assert collector.acked == [1, 2, 3, 4]


def test_processing_time_sliding_duration_windows():
    runner, collector, clock, (source,) = task(Recorder(Duration(10), Duration(5)))
    for n, now in [(1, 1), (2, 4), (3, 6), (4, 12)]:
        clock.now = now
        runner.execute(data(n, -1, source))
    clock.now = 30
    runner.execute(tick_tuple())
    assert user(runner).windows == [(-5, 5, [1, 2]), (0, 10, [1, 2, 3]), (5, 15, [3, 4]), (10, 20, [4])]
    assert collector.acked == [1, 2, 3, 4]


def test_window_edges_fall_on_multiples_of_the_slide_with_fractional_seconds():
    runner, _, _, (source,) = task(Recorder(Duration(0.1), timestamp_field="ts"))
    for n, ts in enumerate([0.1, 0.2, 0.3, 0.39999, 0.4, 0.7]):
        runner.execute(data(n, ts, source))
    # 0.3 starts [0.3, 0.4) although 0.3 / 0.1 < 3 and 3 * 0.1 > 0.3 in floats
    assert [(round(a, 9), round(b, 9), w) for a, b, w in user(runner).windows] == [
        (0.1, 0.2, [0]),
        (0.2, 0.3, [1]),
        (0.3, 0.4, [2, 3]),
        (0.4, 0.5, [4]),
    ]


def test_the_watermark_is_the_minimum_over_input_tasks():
    runner, collector, _, sources = task(Recorder(Duration(10), timestamp_field="ts"), sources=3)
    a, b, c = sources
    runner.execute(data(1, 5, a))
    runner.execute(data(2, 30, a))
    runner.execute(data(3, 31, b))
    assert runner.watermark is None  # c has not sent: it holds the watermark back
    assert user(runner).windows == []
    runner.execute(data(4, 12, c))
    assert runner.watermark == 12
    assert user(runner).windows == [(0, 10, [1])]
    runner.execute(Tuple([40], c, "src", WATERMARK_STREAM, Fields(["timestamp"])))  # c's own watermark
    assert runner.watermark == 30
    assert user(runner).windows == [(0, 10, [1]), (10, 20, [4])]
    runner.execute(tick_tuple())
    assert (WATERMARK_STREAM, [30]) in collector.emitted  # sent downstream on the tick
    runner.execute(tick_tuple())
    assert collector.emitted.count((WATERMARK_STREAM, [30])) == 1  # only when it moved


def test_an_idle_input_stops_holding_the_watermark_back():
    bolt = Recorder(Duration(10), timestamp_field="ts", watermark_interval=1.0, idle_timeout=2.0)
    runner, _, _, (a, _b) = task(bolt, sources=2)
    runner.execute(data(1, 5, a))
    runner.execute(data(2, 25, a))
    runner.execute(tick_tuple())
    assert runner.watermark is None
    runner.execute(data(3, 26, a))
    runner.execute(tick_tuple())  # b silent for two ticks: idle
    assert runner.watermark == 26
    assert user(runner).windows == [(0, 10, [1])]


class Exploding(Recorder):
    def execute_window(self, window: Window) -> None:
        raise RuntimeError("boom")


def test_a_window_that_raises_fails_its_tuples_instead_of_acking_them():
    runner, collector, _, (source,) = task(Exploding(Count(2)))
    for n in range(1, 5):
        runner.execute(data(n, 0, source))
    assert collector.failed == [1, 2, 3, 4] and collector.acked == []
    assert runner.window_errors == 2


def test_windows_are_validated():
    with pytest.raises(ValueError, match="must both be Count or both Duration"):
        Recorder(Count(2), Duration(1))
    with pytest.raises(ValueError, match="longer than its length"):
        Recorder(Duration(1), Duration(2))
    with pytest.raises(ValueError, match="whole number of slides"):
        Recorder(Duration(10), Duration(3))
    with pytest.raises(ValueError, match="Count needs"):
        Count(0)
    with pytest.raises(ValueError, match="lag"):
        Recorder(Duration(1), timestamp_field="ts", lag=-1)


def test_an_input_without_the_timestamp_field_is_named():
    with pytest.raises(TopologyError, match="no timestamp field 'when'"):
        task(Recorder(Duration(1), timestamp_field="when"))


def test_event_time_bolts_declare_late_and_watermark_streams_and_hear_upstream_watermarks():
    builder = TopologyBuilder("chain")
    builder.set_spout("src", Source())
    builder.set_bolt("first", Recorder(Duration(1), timestamp_field="ts")).shuffle_grouping("src")
    builder.set_bolt("second", Recorder(Duration(1), timestamp_field="ts")).shuffle_grouping("first", "late")
    builder.set_bolt("plain", Recorder(Count(1))).shuffle_grouping("first", "late")
    topology = builder.build()
    assert {"late", WATERMARK_STREAM} <= set(topology.components["first"].streams)
    assert [(s.source, s.stream) for s in topology.components["second"].inputs] == [
        ("first", "late"),
        ("first", WATERMARK_STREAM),
    ]
    assert [(s.source, s.stream) for s in topology.components["plain"].inputs] == [("first", "late")]
    assert topology.components["first"].conf == {"topology.tick.tuple.freq.secs": 1.0}
    assert topology.components["plain"].conf == {}  # processing-time count windows need no clock


class StatefulRecorder(StatefulWindowedBolt, Recorder):
    def init_state(self, state: Any) -> None:
        self.restored_keys = sorted(k for k in state if not str(k).startswith("__window."))


@pytest.mark.parametrize(
    "length, slide",
    [(Duration(10), Duration(5)), (Duration(10), None), (Count(3), Count(2)), (Count(2), None)],
)
def test_a_restored_checkpoint_evaluates_the_same_windows(length: Any, slide: Any):
    """Windows in flight and the watermark survive a snapshot: a task restored from the state at
    a cut evaluates exactly the windows the original evaluates after that cut."""
    bolt = StatefulRecorder(length, slide, timestamp_field="ts", lag=2)
    original, _, _, (source,) = task(bolt)
    assert isinstance(original, StatefulWindowedBoltRunner)
    original.init_state(DictState())
    cut = 5
    for n, ts in EVENTS[:cut]:
        original.execute(data(n, ts, source))
    blob = original.state.snapshot()  # type: ignore[union-attr]
    before = len(user(original).windows)
    for n, ts in EVENTS[cut:]:
        original.execute(data(n, ts, source))

    restored, collector, _, _ = task(bolt)
    assert isinstance(restored, StatefulWindowedBoltRunner)
    restored.init_state(DictState.restore(blob))
    assert restored.watermark == original_watermark_at(cut)
    for n, ts in EVENTS[cut:]:
        restored.execute(data(n, ts, source))
    windows = lambda r: [w for _, _, w in user(r).windows]  # noqa: E731
    assert windows(restored) == windows(original)[before:]
    assert late_of(collector) == [6, 8]


def original_watermark_at(cut: int) -> float:
    return max(ts for _, ts in EVENTS[:cut]) - 2


def test_a_rollback_to_the_beginning_forgets_the_windows_and_the_watermark():
    bolt = StatefulRecorder(Duration(10), timestamp_field="ts", lag=2)
    runner, collector, _, (source,) = task(bolt)
    assert isinstance(runner, StatefulWindowedBoltRunner)
    runner.init_state(DictState())
    for n, ts in EVENTS:
        runner.execute(data(n, ts, source))
    runner.init_state(DictState())  # rolled back to no checkpoint: the replay starts over
    assert runner.watermark is None
    for n, ts in EVENTS:
        runner.execute(data(n, ts, source))
    windows = user(runner).windows
    assert windows[3:] == windows[:3] == [(0, 10, [1, 2, 4]), (10, 20, [3, 5]), (20, 30, [7])]
    assert late_of(collector) == [6, 8, 6, 8]


def test_batches_of_any_size_give_the_windows_and_late_tuples_of_one_by_one():
    """The watermark moves with every tuple of a batch, so lateness (and with it every window)
    does not depend on how the inbox happened to batch the tuples (a replay batches differently)."""
    for size in (1, 2, 4, len(EVENTS)):
        runner, collector, _, (source,) = task(
            Recorder(Duration(10), Duration(5), timestamp_field="ts", lag=2)
        )
        tuples = [data(n, ts, source) for n, ts in EVENTS]
        for start in range(0, len(tuples), size):
            runner.execute_batch(tuples[start : start + size])
        assert [w for _, _, w in user(runner).windows] == [[1, 2], [1, 2, 4], [4, 3, 5], [3, 5], [7], [7]]
        assert late_of(collector) == [6, 8]
        assert runner.watermark == 38


def test_a_tuple_without_a_usable_timestamp_fails_alone():
    runner, collector, _, (source,) = task(Recorder(Count(2), timestamp_field="ts"))
    runner.execute_batch([data(1, 5, source), data(2, "soon", source), data(3, 7, source)])  # type: ignore[arg-type]
    assert collector.failed == [2]
    assert runner.bad_timestamps == 1
    runner.execute_batch([data(4, 9, source)])
    assert [w for _, _, w in user(runner).windows] == [[1, 3]]


class Emitting(Recorder):
    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.collector = collector

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["start", "count", "ts"])

    def execute_window(self, window: Window) -> None:
        self.collector.emit([window.start, len(window), window.start])


def test_a_watermark_goes_downstream_only_after_the_windows_it_closed():
    runner, collector, _, (source,) = task(Emitting(Duration(10), timestamp_field="ts"))
    runner.execute_batch([data(1, 3, source), data(2, 12, source), tick_tuple(), data(3, 25, source)])
    runner.execute(tick_tuple())
    assert collector.emitted == [
        ("default", [0, 1, 0]),
        (WATERMARK_STREAM, [12]),
        ("default", [10, 1, 10]),
        (WATERMARK_STREAM, [25]),
    ]


def test_a_windows_column_gives_one_fields_values_in_window_order_across_streams():
    other = Fields(["ts", "sensor", "n"])  # another stream: the field sits elsewhere
    tuples = [
        Tuple([1, 10.0], 1, "src", "default", FIELDS),
        Tuple([11.0, "a", 2], 2, "other", "default", other),
        Tuple([3, 12.0], 1, "src", "default", FIELDS),
    ]
    window = Window(tuples, 10.0, 20.0, [])
    assert window.column("n") == [1, 2, 3] and window.column("ts") == [10.0, 11.0, 12.0]
    assert sum(window.column("n")) == 6 and Window([], None, None, []).column("n") == []
    with pytest.raises(KeyError, match=r"no field 'sensor'; declared fields are \['n', 'ts'\]"):
        window.column("sensor")
