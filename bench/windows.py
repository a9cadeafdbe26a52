"""Windowing overhead: the e2e const spout into a tumbling 1 s event-time windowed bolt, against
the plain const spout -> null bolt e2e in the same run (2 worker processes over grpc each).

The windowed bolt stamps nothing itself: the spout's ``sent_at`` (``time.monotonic()``, one clock
for every process on a Linux machine) is the event time, so windows close as the watermark, the
minimum over both spout tasks, passes each second.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.records import Record
from bench.topologies import ConstSpout, build
from tuplemesh.launcher import ProcessCluster
from tuplemesh.topology import TopologyBuilder
from tuplemesh.windowing import Duration, Window, WindowedBolt


class CountPerWindow(WindowedBolt):
    """Counts each window's tuples: the least a windowed bolt can do."""

    def __init__(self) -> None:
        super().__init__(Duration(1.0), timestamp_field="sent_at", lag=0.05)

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.windows = 0
        self.tuples = 0

    def execute_window(self, window: Window) -> None:
        self.windows += 1
        self.tuples += len(window)

    def report(self) -> Any:
        return {"windows": self.windows, "tuples": self.tuples}


def build_windowed() -> Any:
    b = TopologyBuilder("constwindow")
    b.set_spout("const", ConstSpout(0.0), parallelism=2)
    b.set_bolt("null", CountPerWindow(), parallelism=2).shuffle_grouping("const")
    return b.build()


def _rate(target: str, topology: Any, seconds: float) -> float:
    """Tuples executed by the ``null`` component per second, after a second of warm-up."""
    cluster = ProcessCluster(target, topology, 2, transport="grpc")

    def executed() -> int:
        return sum(e.executed for s in cluster.statuses() for e in s.executors if e.component == "null")

    try:
        cluster.start()
        cluster.wait_serving(60)
        time.sleep(1.0)  # warm up
        start_count, start = executed(), time.monotonic()
        time.sleep(seconds)
        end_count, end = executed(), time.monotonic()
        cluster.check_alive()
    finally:
        cluster.stop()
    return (end_count - start_count) / (end - start)


def run(quick: bool = False) -> list[Record]:
    seconds = 2.0 if quick else 5.0
    runs = 1 if quick else 3
    plain: list[float] = []
    windowed: list[float] = []
    for _ in range(runs):  # alternated, so both see the same machine
        plain.append(_rate("bench.topologies:build", build(), seconds))
        windowed.append(_rate("bench.windows:build_windowed", build_windowed(), seconds))
    plain_rate, windowed_rate = statistics.median(plain), statistics.median(windowed)
    print(f"windows: tumbling 1 s event-time window / plain e2e = {windowed_rate / plain_rate:.2f}x")
    return [
        Record(
            "windows",
            "const spout -> tumbling 1 s event-time windowed bolt, 2 worker processes over grpc: max",
            "tuples",
            windowed_rate,
            {"const spout -> null bolt, same run": plain_rate},
            ">= 0.7x the plain e2e (ratio >= 0.7)",
        )
    ]
