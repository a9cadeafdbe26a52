"""Small topologies whose user code fails in one way each, for ``tuplemesh run`` tests.

Each is ``tests.failing_topologies:<name>``; the targets that are wrong on purpose (a function
with arguments, a non-topology) are here too.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.helpers import ListSpout
from tuplemesh.topology import Bolt, OutputFieldsDeclarer, Spout, Topology, TopologyBuilder, Tuple

TUPLES = 60


class RaisingBolt(Bolt):
    """Raises on every tuple."""

    def execute(self, tup: Tuple) -> None:
        raise ValueError(f"cannot handle {tup.values[0]}")


class RaisingOnSomeBolt(Bolt):
    """Raises on tuples whose number is below ``below``; counts the others."""

    def __init__(self, below: int) -> None:
        self.below = below

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.ok = 0

    def execute(self, tup: Tuple) -> None:
        if tup.values[0] < self.below:
            raise KeyError(tup.values[0])
        self.ok += 1

    def report(self) -> Any:
        return self.ok


class UnpreparedBolt(Bolt):
    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        raise RuntimeError("no database at db.invalid")

    def execute(self, tup: Tuple) -> None:
        pass


class BrokenSpout(Spout):
    """Its ``next_tuple`` raises every time: it never finishes."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["n"])

    def next_tuple(self) -> None:
        raise ConnectionError("source unreachable")


class EndlessSpout(Spout):
    """Emits numbers for ever (an unbounded source)."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["n"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.numbers = itertools.count()
        marker = os.environ.get("OPENED_MARKER")
        if marker:  # tells a test the run is under way
            Path(marker).touch()

    def next_tuple(self) -> None:
        self.collector.emit([next(self.numbers)])


class CountingBolt(Bolt):
    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.seen = 0

    def execute(self, tup: Tuple) -> None:
        self.seen += 1

    def report(self) -> Any:
        return self.seen


def _numbers() -> ListSpout:
    return ListSpout([[i] for i in range(TUPLES)], ["n"])


def _all_counted(reports: dict[str, list[Any]]) -> tuple[bool, str]:
    seen = sum(reports["sink"])
    return seen == TUPLES, f"{seen} of {TUPLES} tuples counted"


def bolt_raises() -> Topology:
    b = TopologyBuilder("bolt-raises")
    b.set_spout("numbers", _numbers())
    b.set_bolt("sink", RaisingBolt(), parallelism=2).shuffle_grouping("numbers")
    return b.build()


def some_raise(tolerated: int | None = None) -> Topology:
    """Three tuples raise; ``tolerated`` in the topology's conf when given."""
    b = TopologyBuilder("some-raise")
    b.set_spout("numbers", _numbers())
    b.set_bolt("sink", RaisingOnSomeBolt(3)).shuffle_grouping("numbers")
    conf = {} if tolerated is None else {"topology.errors.tolerated": tolerated}
    return b.build(conf=conf, check=lambda r: (sum(r["sink"]) == TUPLES - 3, f"{sum(r['sink'])} ok"))


def some_raise_tolerated() -> Topology:
    return some_raise(tolerated=3)


def prepare_raises() -> Topology:
    b = TopologyBuilder("prepare-raises")
    b.set_spout("numbers", _numbers())
    b.set_bolt("sink", UnpreparedBolt()).shuffle_grouping("numbers")
    return b.build()


def spout_raises() -> Topology:
    b = TopologyBuilder("spout-raises")
    b.set_spout("source", BrokenSpout())
    b.set_bolt("sink", CountingBolt()).shuffle_grouping("source")
    return b.build()


def counted() -> Topology:
    b = TopologyBuilder("counted")
    b.set_spout("numbers", _numbers())
    b.set_bolt("sink", CountingBolt(), parallelism=2).shuffle_grouping("numbers")
    return b.build(check=_all_counted)


def endless() -> Topology:
    b = TopologyBuilder("endless")
    b.set_spout("numbers", EndlessSpout())
    b.set_bolt("sink", CountingBolt()).shuffle_grouping("numbers")
    return b.build()


def needs_arguments(size: int, name: str = "x") -> Topology:
    return counted()


not_a_topology = {"spout": "numbers"}
