"""Stateful word count: a replayable sentence spout -> split (shuffle) -> count (fields on "word"),
whose counts are checkpointed state, exact after any worker is killed and restarted.

    tuplemesh run examples.stateful_wordcount:topology --workers 3

The spout's position is the index of the next sentence, stored with every checkpoint; the count
bolt keeps its counts in the state the runtime hands it (``init_state``). When a worker dies,
the whole mesh goes back to the last complete checkpoint and replays from there, so every
sentence is counted exactly once. ``wordcount.rate`` (sentences per second per spout task, 0
for as fast as possible) slows the run down enough to kill a worker in the middle of it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from examples.wordcount import CORPUS, DEFAULT_REPEAT, SplitBolt, make_check
from tuplemesh.state import KeyValueState, ReplayableSpout, StatefulBolt
from tuplemesh.topology import OutputFieldsDeclarer, TopologyBuilder, Tuple


class ReplayableSentenceSpout(ReplayableSpout):
    """Emits sentence ``i`` of the repeated corpus for i = task index, + tasks, ... ; the position
    is the next ``i``, so a rewind emits again exactly what followed the checkpoint."""

    def __init__(self, repeat: int = DEFAULT_REPEAT) -> None:
        self.repeat = repeat

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["sentence"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.emit = collector.emit
        self.step = len(context.component_tasks)
        self.first = context.task_index
        self.total = len(CORPUS) * int(conf.get("wordcount.repeat", self.repeat))
        self.rate = float(conf.get("wordcount.rate", 0.0))
        self.next_index = self.first
        self.emitted = 0  # every emit since open, replays included
        self.rewinds = 0
        self.started = time.monotonic()

    def position(self) -> Any:
        return self.next_index

    def rewind(self, position: Any) -> None:
        self.next_index = self.first if position is None else int(position)
        self.rewinds += 1

    def next_tuple(self) -> None:
        budget = 64
        if self.rate:
            budget = min(budget, int((time.monotonic() - self.started) * self.rate) - self.emitted)
        while budget > 0 and self.next_index < self.total:
            self.emit([CORPUS[self.next_index % len(CORPUS)]])
            self.next_index += self.step
            self.emitted += 1
            budget -= 1

    def is_finished(self) -> bool:
        return self.next_index >= self.total

    def report(self) -> Any:
        return {"emitted": self.emitted, "rewinds": self.rewinds, "position": self.next_index}


class StatefulCountBolt(StatefulBolt):
    """Counts words in checkpointed state: after a rollback it continues from the restored counts."""

    def init_state(self, state: KeyValueState) -> None:
        self.counts = state

    def execute(self, tup: Tuple) -> None:
        word = tup.values[0]
        self.counts[word] = self.counts.get(word, 0) + 1

    def report(self) -> Any:
        counts = getattr(self, "counts", None)
        return {"counts": {} if counts is None else dict(counts.items())}


def build(repeat: int = DEFAULT_REPEAT) -> Any:
    builder = TopologyBuilder("stateful-wordcount")
    builder.set_spout("sentences", ReplayableSentenceSpout(repeat), parallelism=2)
    builder.set_bolt("split", SplitBolt(), parallelism=3).shuffle_grouping("sentences")
    builder.set_bolt("count", StatefulCountBolt(), parallelism=3).fields_grouping("split", ["word"])
    return builder.build(check=make_check(repeat))


topology = build()
