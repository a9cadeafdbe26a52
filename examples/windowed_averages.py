"""Per-sensor sliding averages over an event-time stream whose readings arrive out of order.

    tuplemesh run examples.windowed_averages:topology --workers 3
    tuplemesh run examples.windowed_averages:stateful --workers 3    (windows checkpointed)

A spout replays a fixed log of sensor readings: every step each sensor reports a value stamped
with the step's event time (a tenth of a second per step). The log is out of order: readings
are shuffled a few steps back and forth, within the bolt's lag, and a few are held back far
longer than the lag, so they arrive after the watermark passed them. The bolt averages each
sensor over 2-second windows sliding by 1 second, in event time; the late readings come out on
its late stream, where a second bolt collects them. At the end of the log the spout sends every
averaging task an end marker far in the future, which moves the watermark past the last
windows. The run checks itself against averages computed here in plain Python.

``windows.steps`` (default 600) sets the log's length and ``windows.rate`` (readings per
second, 0: as fast as possible) paces the spout, so a worker can be killed mid-window.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from tuplemesh.state import KeyValueState, ReplayableSpout, StatefulBolt
from tuplemesh.topology import Bolt, OutputFieldsDeclarer, TopologyBuilder, Tuple
from tuplemesh.windowing import Duration, StatefulWindowedBolt, Window, WindowedBolt

SENSORS = 6
DEFAULT_STEPS = 600
STEP_SECONDS = 0.1  # event time between two steps
LAG = 1.0  # how far out of order a reading may arrive without being late
WINDOW = 2.0
SLIDE = 1.0
SHUFFLE = 3  # readings move up to this many steps from their place: always within the lag
HOLD_BACK = 40  # steps a held-back reading is delayed: far past the lag, so it is late
HELD_EVERY = 53  # every 53rd reading of the log is held back
END_OF_LOG = 1e9  # the end marker's timestamp


def value_of(sensor: int, step: int) -> int:
    return (sensor * 37 + step * 11 + (step * step) % 17) % 100


def log_order(steps: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(sensor, step) of every reading in the order the spout emits them, and the readings held
    back (they arrive after the watermark passed them)."""
    readings = [(sensor, step) for step in range(steps) for sensor in range(SENSORS)]
    # shuffled locally: reading r is sorted by a key up to SHUFFLE steps away from its own step
    keyed = sorted(
        range(len(readings)),
        key=lambda r: (readings[r][1] + ((r * 7919) % (2 * SHUFFLE + 1)) - SHUFFLE, r),
    )
    order = [readings[r] for r in keyed]
    held = [
        r
        for r in range(len(order))
        if r % HELD_EVERY == HELD_EVERY - 1 and order[r][1] < steps - 2 * HOLD_BACK
    ]
    skipped = set(held)
    out = [reading for r, reading in enumerate(order) if r not in skipped]
    for r in reversed(held):  # put each one back HOLD_BACK steps later
        out.insert(r + HOLD_BACK * SENSORS, order[r])
    return out, [order[r] for r in held]


def expected(steps: int) -> tuple[dict[str, list[float]], list[list[int]]]:
    """The averages (``"sensor@window end"`` -> [average, readings]) and the late readings
    ([sensor, step]) of a run over ``steps`` steps, worked out without windows or watermarks."""
    order, held = log_order(steps)
    # a reading that is not held back arrives at most 2 * SHUFFLE steps after a newer one: within
    # the lag, so never late; a held-back one arrives HOLD_BACK steps late, long after the
    # watermark of any task that holds its sensor (every sensor reports every step) passed it
    late = sorted([sensor, step] for sensor, step in held)
    held_back = set(held)
    on_time = [reading for reading in order if reading not in held_back]
    per_window: dict[tuple[int, int], list[int]] = defaultdict(list)
    steps_per_slide = round(SLIDE / STEP_SECONDS)
    span = round(WINDOW / SLIDE)
    for sensor, step in on_time:
        slot = step // steps_per_slide
        for end in range(slot + 1, slot + span + 1):
            per_window[(sensor, end)].append(value_of(sensor, step))
    averages = {
        f"{sensor}@{end * SLIDE:g}": [sum(values) / len(values), len(values)]
        for (sensor, end), values in per_window.items()
    }
    return averages, late


class ReadingSpout(ReplayableSpout):
    """Emits the log in order, then one end marker to every averaging task; replayable by index."""

    def __init__(self, steps: int = DEFAULT_STEPS) -> None:
        self.steps = steps

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["sensor", "value", "ts"])
        declarer.declare_stream("end", ["sensor", "value", "ts"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.steps = int(conf.get("windows.steps", self.steps))
        self.log, _ = log_order(self.steps)
        self.rate = float(conf.get("windows.rate", 0.0))
        self.next_index = 0
        self.emitted = 0
        self.started = time.monotonic()

    def position(self) -> Any:
        return self.next_index

    def rewind(self, position: Any) -> None:
        self.next_index = 0 if position is None else int(position)

    def next_tuple(self) -> None:
        budget = 64
        if self.rate:
            budget = min(budget, int((time.monotonic() - self.started) * self.rate) - self.emitted)
        total = len(self.log)
        while budget > 0 and self.next_index < total:
            sensor, step = self.log[self.next_index]
            self.collector.emit([f"s{sensor}", value_of(sensor, step), step * STEP_SECONDS])
            self.next_index += 1
            self.emitted += 1
            budget -= 1
        if budget > 0 and self.next_index == total:
            self.collector.emit(["", 0, END_OF_LOG], stream="end")
            self.next_index += 1

    def is_finished(self) -> bool:
        return self.next_index > len(self.log)

    def report(self) -> Any:
        return {"emitted": self.emitted, "steps": self.steps}


def averages_of(window: Window) -> dict[str, tuple[float, int]]:
    sums: dict[str, list[int]] = defaultdict(list)
    for tup in window.tuples:
        sensor, value, _ts = tup.values
        if sensor:  # not the end marker
            sums[sensor].append(value)
    return {sensor: (sum(values) / len(values), len(values)) for sensor, values in sums.items()}


class SlidingAverages(WindowedBolt):
    """Each sensor's average over every window; emits ``[sensor, window end, average, readings]``."""

    def __init__(self) -> None:
        super().__init__(
            Duration(WINDOW), Duration(SLIDE), timestamp_field="ts", lag=LAG, watermark_interval=0.2
        )
        self.averages: dict[str, list[float]] = {}

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["sensor", "end", "average", "readings"])

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute_window(self, window: Window) -> None:
        for sensor, (average, count) in averages_of(window).items():
            self.averages[f"{sensor[1:]}@{window.end:g}"] = [average, count]
            self.collector.emit([sensor, window.end, average, count], anchors=window.tuples)

    def report(self) -> Any:
        return {"averages": dict(self.averages)}


class CheckpointedAverages(StatefulWindowedBolt, SlidingAverages):
    """The same averages, kept in checkpointed state with the windows in flight."""

    def init_state(self, state: KeyValueState) -> None:
        self.averages = state  # type: ignore[assignment]

    def report(self) -> Any:
        return {"averages": {k: v for k, v in self.averages.items() if not str(k).startswith("__window.")}}


class LateReadings(Bolt):
    """Collects the readings that came after the watermark passed them ([sensor, step])."""

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.late: Any = {}

    def execute(self, tup: Tuple) -> None:
        (sensor, _value, ts), _component, _stream, _timestamp = tup.values
        self.late[f"{sensor}@{ts:g}"] = [int(sensor[1:]), round(ts / STEP_SECONDS)]

    def report(self) -> Any:
        late = getattr(self, "late", None)
        return {"late": [] if late is None else [v for _, v in late.items()]}


class CheckpointedLateReadings(StatefulBolt, LateReadings):
    """The same, in checkpointed state."""

    def init_state(self, state: KeyValueState) -> None:
        self.late = state


def check(reports: Mapping[str, list[Any]]) -> tuple[bool, str]:
    """Compare a run's averages and late readings with ``expected`` for the spout's log."""
    want_averages, want_late = expected(reports["readings"][0]["steps"])
    averages: dict[str, list[float]] = {}
    for report in reports["averages"]:
        averages.update(report["averages"])
    late = sorted(item for report in reports["late"] for item in report["late"])
    problems = []
    if late != want_late:
        missing = [r for r in want_late if r not in late]
        extra = [r for r in late if r not in want_late]
        problems.append(
            f"late readings: {len(missing)} missing {missing[:5]}, {len(extra)} extra {extra[:5]}"
        )
    wrong = sorted(
        k for k in want_averages.keys() | averages.keys() if averages.get(k) != want_averages.get(k)
    )
    if wrong:
        examples = ", ".join(f"{k}: got {averages.get(k)}, want {want_averages.get(k)}" for k in wrong[:3])
        problems.append(f"{len(wrong)} averages differ ({examples})")
    if problems:
        return False, "; ".join(problems)
    return True, f"{len(averages)} window averages and {len(late)} late readings as expected"


def build(steps: int = DEFAULT_STEPS, checkpointed: bool = False) -> Any:
    builder = TopologyBuilder("windowed-averages-stateful" if checkpointed else "windowed-averages")
    builder.set_spout("readings", ReadingSpout(steps))
    averages = CheckpointedAverages() if checkpointed else SlidingAverages()
    (
        builder.set_bolt("averages", averages, parallelism=3)
        .fields_grouping("readings", ["sensor"])
        .all_grouping("readings", "end")
    )
    late = CheckpointedLateReadings() if checkpointed else LateReadings()
    builder.set_bolt("late", late).shuffle_grouping("averages", "late")
    return builder.build(check=check)


topology = build()
stateful = build(checkpointed=True)
