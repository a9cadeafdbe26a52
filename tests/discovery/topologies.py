"""Topologies for the discovery tests: a paced numbered source feeding a sink on another worker."""

from __future__ import annotations

import os
import time
from typing import Any

from tuplemesh.topology import Bolt, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple

TOTAL = 3000
RATE = 1000.0  # tuples/s: the flow lasts about 3 s, long enough to restart a worker under it


class NumberSource(Spout):
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["n"])

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.emit = collector.emit
        self.sent = 0
        self.started = time.monotonic()

    def next_tuple(self) -> None:
        due = min(TOTAL, int((time.monotonic() - self.started) * RATE))
        while self.sent < due:
            self.emit([self.sent])
            self.sent += 1

    def is_finished(self) -> bool:
        return self.sent >= TOTAL


class FileSink(Bolt):
    """Appends every number it executes to $SINK_FILE (both lives of a restarted worker)."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.out = open(os.environ["SINK_FILE"], "a", buffering=1)  # noqa: SIM115 - lives with the worker

    def execute(self, tup: Tuple) -> None:
        self.out.write(f"{tup.values[0]}\n")

    def cleanup(self) -> None:
        self.out.close()


def build() -> Any:
    # executors by name: a_source -> worker 0, b_sink -> worker 1: every tuple crosses workers
    b = TopologyBuilder("moving")
    b.set_spout("a_source", NumberSource())
    b.set_bolt("b_sink", FileSink()).shuffle_grouping("a_source")
    return b.build()


moving = build()
