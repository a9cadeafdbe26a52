"""A skewed word count for the hot-keys tests: words into ``count`` by a fields grouping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.helpers import ListSpout
from tuplemesh.topology import BasicBolt, OutputFieldsDeclarer, Topology, TopologyBuilder, Tuple

#: "hot" is 60% of the 1000 words; four cold words share the rest evenly.
HOT_TUPLES = 600
COLD = ["ant", "bee", "cat", "dog"]
COLD_TUPLES = 100


def words() -> list[list[Any]]:
    """600 "hot" and 100 of each cold word, interleaved (deterministic)."""
    out: list[list[Any]] = []
    for _ in range(COLD_TUPLES):
        out.extend(["hot"] for _ in range(HOT_TUPLES // COLD_TUPLES))
        out.extend([w] for w in COLD)
    return out


class Count(BasicBolt):
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["word", "count"])

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.counts: dict[str, int] = {}

    def execute(self, tup: Tuple) -> None:
        word = tup.values[0]
        self.counts[word] = self.counts.get(word, 0) + 1

    def report(self) -> Any:
        return self.counts


def skewed_wordcount() -> Topology:
    builder = TopologyBuilder("skewed")
    builder.set_spout("words", ListSpout(words(), ["word"]))
    builder.set_bolt("count", Count(), parallelism=4).fields_grouping("words", ["word"])
    return builder.build()


skewed = skewed_wordcount()
