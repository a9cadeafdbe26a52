"""A numbered pipeline whose counts outlive its worker processes (``tests.fault.numbered:NAME``).

``numbered``: numbers (3 tasks, flat out) -> relay (shuffle, 3 tasks) -> sink (fields on the
source, 3 tasks). Each spout task numbers its tuples 0, 1, 2, ... under a source name of its own
(``<task>:<pid>:<epoch>``: a restarted worker's spout, or one a rescale started again in the same
process, is a new source) and, when it closes, writes how many it emitted to
``<numbered.dir>/spout-<task>-<pid>-<epoch>.json``; each sink task writes every (source, number) it
saw, with how often, to ``<numbered.dir>/sink-<task>-<pid>-<epoch>.json``. A stopped mesh can then
be checked exactly: every number emitted reached a sink once.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from tuplemesh.topology import BasicBolt, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple

#: Numbers a spout task emits per ``next_tuple`` call (flat out: backpressure is the only brake).
BURST = 100


def life(conf: Any, context: Any) -> str:
    """One life of a task: ``<task>-<pid>-<epoch>``."""
    return f"{context.task_id}-{os.getpid()}-{conf['topology.epoch']}"


class NumberSpout(Spout):
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["source", "n"])

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.out = Path(conf["numbered.dir"]) / f"spout-{life(conf, context)}.json"
        self.source = life(conf, context).replace("-", ":")
        self.next = 0

    def next_tuple(self) -> None:
        for n in range(self.next, self.next + BURST):
            self.collector.emit([self.source, n])
            self.next = n + 1  # counted as it goes: an emit may raise (a halted destination)

    def close(self) -> None:
        self.out.write_text(json.dumps({"source": self.source, "emitted": self.next}))

    def report(self) -> Any:
        return {"emitted": self.next}


class Relay(BasicBolt):
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["source", "n"])

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Tuple) -> None:
        self.collector.emit(list(tup.values))


class NumberedSink(BasicBolt):
    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.out = Path(conf["numbered.dir"]) / f"sink-{life(conf, context)}.json"
        self.seen: Counter[tuple[str, int]] = Counter()

    def execute(self, tup: Tuple) -> None:
        source, n = tup.values
        self.seen[(source, n)] += 1

    def cleanup(self) -> None:
        self.out.write_text(json.dumps([[s, n, times] for (s, n), times in self.seen.items()]))

    def report(self) -> Any:
        return {"seen": sum(self.seen.values())}


def build_numbered() -> Any:
    builder = TopologyBuilder("numbered")
    builder.set_spout("numbers", NumberSpout(), parallelism=3)
    builder.set_bolt("relay", Relay(), parallelism=3).shuffle_grouping("numbers")
    builder.set_bolt("sink", NumberedSink(), parallelism=3).fields_grouping("relay", ["source"])
    return builder.build()


numbered = build_numbered()


def read_outcome(directory: Path) -> tuple[dict[str, int], Counter[tuple[str, int]]]:
    """(numbers emitted per source, how often each (source, number) reached a sink)."""
    emitted = {}
    for path in directory.glob("spout-*.json"):
        record = json.loads(path.read_text())
        emitted[record["source"]] = record["emitted"]
    seen: Counter[tuple[str, int]] = Counter()
    for path in directory.glob("sink-*.json"):
        for source, n, times in json.loads(path.read_text()):
            seen[(source, n)] += times
    return emitted, seen


def assert_each_once(directory: Path) -> dict[str, int]:
    """Every number each spout life emitted reached a sink exactly once, and nothing else did;
    returns the numbers emitted per source."""
    emitted, seen = read_outcome(directory)
    expected = {(source, n) for source, count in emitted.items() for n in range(count)}
    missing = expected - seen.keys()
    assert not missing, f"{len(missing)} tuple(s) lost, e.g. {sorted(missing)[:5]}"
    assert seen.keys() == expected, "a sink saw numbers no spout emitted"
    twice = [key for key, times in seen.items() if times != 1]
    assert not twice, f"{len(twice)} tuple(s) delivered more than once, e.g. {twice[:5]}"
    return emitted
