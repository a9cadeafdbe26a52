"""The topology of the Spark pipeline: lines in through an IngestSpout, running word counts out
through an ExportBolt (each record is (word, count so far); a word's final count is its max)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from tuplemesh.gateway import ExportBolt, IngestSpout
from tuplemesh.topology import Bolt, OutputFieldsDeclarer, TopologyBuilder, Tuple


class SplitLines(Bolt):
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["word"])

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.emit = collector.emit

    def execute(self, tup: Tuple) -> None:
        for word in str(tup.values[0]).lower().split():
            self.emit([word])


class RunningCount(Bolt):
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["word", "count"])

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.emit = collector.emit
        self.counts: dict[str, int] = {}

    def execute(self, tup: Tuple) -> None:
        word = tup.values[0]
        count = self.counts.get(word, 0) + 1
        self.counts[word] = count
        self.emit([word, count])


def build() -> Any:
    retention = int(os.environ.get("PIPELINE_RETENTION", "1000000"))
    b = TopologyBuilder("pipeline")
    b.set_spout("lines", IngestSpout("lines", ["line"]), parallelism=2)
    b.set_bolt("split", SplitLines(), parallelism=2).shuffle_grouping("lines")
    b.set_bolt("count", RunningCount(), parallelism=2).fields_grouping("split", ["word"])
    b.set_bolt(
        "counts", ExportBolt("counts", retention, "word STRING, count BIGINT"), parallelism=2
    ).shuffle_grouping("count")
    return b.build()


topology = build()
