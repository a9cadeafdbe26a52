"""Windowed topologies the windowing tests run in-process and in worker processes.

``chain``: three spout tasks emit events stamped a hundredth of a second apart (task j emits
events j, j+3, j+6 ...), each in its own order; three ``partial`` tasks count them per one-second
event-time window and a ``total`` task adds the partial counts of each window up, in event time
too, driven by the partial tasks' watermarks. Every second of event time holds exactly 100
events, so every total is known. ``chain.events`` (per spout task) and ``chain.rate`` (events per
second per task) size and pace it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from tuplemesh.topology import OutputFieldsDeclarer, Spout, TopologyBuilder
from tuplemesh.windowing import Duration, Window, WindowedBolt

END_OF_STREAM = 1e9  # an end marker's timestamp: moves every watermark past the last window
EVENT_SECONDS = 0.01


class Events(Spout):
    def __init__(self, events: int) -> None:
        self.events = events

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["event", "ts"])
        declarer.declare_stream("end", ["event", "ts"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.step = len(context.component_tasks)
        self.next_event = context.task_index
        self.total = int(conf.get("chain.events", self.events)) * self.step
        self.rate = float(conf.get("chain.rate", 0.0))
        self.started = time.monotonic()
        self.emitted = 0
        self.ended = False

    def next_tuple(self) -> None:
        budget = 50
        if self.rate:
            budget = min(budget, int((time.monotonic() - self.started) * self.rate) - self.emitted)
        while budget > 0 and self.next_event < self.total:
            self.collector.emit([self.next_event, self.next_event * EVENT_SECONDS])
            self.next_event += self.step
            self.emitted += 1
            budget -= 1
        if self.next_event >= self.total and not self.ended:
            self.collector.emit([-1, END_OF_STREAM], stream="end")
            self.ended = True

    def is_finished(self) -> bool:
        return self.ended

    def report(self) -> Any:
        return {"emitted": self.emitted}


class PartialCounts(WindowedBolt):
    """Counts the events of each one-second window: emits ``[window start, count, ts]``."""

    def __init__(self) -> None:
        super().__init__(Duration(1.0), timestamp_field="ts", lag=0.05, watermark_interval=0.05)
        self.windows = 0

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["start", "count", "ts"])

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute_window(self, window: Window) -> None:
        events = sum(1 for t in window.tuples if t.values[0] >= 0)
        self.windows += 1
        self.collector.emit([window.start, events, window.start], anchors=window.tuples)

    def report(self) -> Any:
        return {"watermark": self.watermark, "windows": self.windows}


class Totals(WindowedBolt):
    """Adds up the partial counts of each window, in event time over the partial tasks' watermarks."""

    def __init__(self) -> None:
        super().__init__(Duration(1.0), timestamp_field="ts", watermark_interval=0.05)

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.totals: dict[str, int] = {}
        self.partials: dict[str, int] = {}

    def execute_window(self, window: Window) -> None:
        for tup in window.tuples:
            key = f"{tup.values[0]:g}"
            self.totals[key] = self.totals.get(key, 0) + tup.values[1]
            self.partials[key] = self.partials.get(key, 0) + 1

    def report(self) -> Any:
        return {"watermark": self.watermark, "totals": dict(self.totals), "partials": dict(self.partials)}


def build_chain(events: int = 3000) -> Any:
    builder = TopologyBuilder("watermark-chain")
    builder.set_spout("events", Events(events), parallelism=3)
    (
        builder.set_bolt("partial", PartialCounts(), parallelism=3)
        .shuffle_grouping("events")
        .all_grouping("events", "end")
    )
    builder.set_bolt("total", Totals()).global_grouping("partial")
    return builder.build()


chain = build_chain()


class StampedSpout(Spout):
    """Emits ``[n, wall-clock time]`` at ``rate`` per second, ``count`` of them, tracked by ``n``."""

    def __init__(self, count: int, rate: float) -> None:
        self.count = count
        self.rate = rate

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["n", "sent_at"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.started = time.monotonic()
        self.sent = 0
        self.acked = 0
        self.failed = 0

    def next_tuple(self) -> None:
        due = min(self.count, int((time.monotonic() - self.started) * self.rate))
        while self.sent < due:
            self.collector.emit([self.sent, time.time()], msg_id=self.sent)
            self.sent += 1

    def ack(self, msg_id: Any) -> None:
        self.acked += 1

    def fail(self, msg_id: Any) -> None:
        self.failed += 1

    def is_finished(self) -> bool:
        return self.sent >= self.count

    def report(self) -> Any:
        return {"sent": self.sent, "acked": self.acked, "failed": self.failed}


class ClockWindows(WindowedBolt):
    """Processing-time windows; records (start, end, [(n, sent_at)]) of each."""

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.windows: list[tuple[float, float, list[tuple[int, float]]]] = []

    def execute_window(self, window: Window) -> None:
        assert window.start is not None and window.end is not None
        self.windows.append((window.start, window.end, [(t.values[0], t.values[1]) for t in window.tuples]))

    def report(self) -> Any:
        return {"windows": self.windows}
