"""Topologies the worker-process tests start with ``tuplemesh worker``."""

from __future__ import annotations

import threading
from typing import Any

from examples import wordcount
from tuplemesh.topology import Bolt, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple

#: Word count small enough to finish at once; the workers stay up for Admin calls.
small_wordcount = wordcount.build(repeat=10)


class Ticker(Spout):
    """Emits forever, a little at a time."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["n"])

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        self.n += 1
        self.collector.emit([self.n])


class Sink(Bolt):
    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.count = 0

    def execute(self, tup: Tuple) -> None:
        self.count += 1

    def report(self) -> Any:
        return self.count


class Stuck(Bolt):
    """Never returns from its first execute: a worker that cannot drain."""

    def execute(self, tup: Tuple) -> None:
        threading.Event().wait()


def _build(bolt: Bolt) -> Any:
    b = TopologyBuilder("ticker")
    b.set_spout("ticks", Ticker())
    b.set_bolt("sink", bolt, parallelism=2).shuffle_grouping("ticks")
    return b.build()


ticker = _build(Sink())
stuck = _build(Stuck())
