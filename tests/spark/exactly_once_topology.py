"""The topology of the Spark exactly-once test: lines in through the Gateway, a stateful bolt
that counts how often it saw each line, and ``[line, times seen]`` out through an export.

Checkpointed (the counts are state), so the ingest rows are acknowledged when a checkpoint with
their effect commits and the export log is part of the checkpoints. A line whose effect came
twice would come out a second time, with ``seen`` 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuplemesh.gateway import ExportBolt, IngestSpout
from tuplemesh.state import KeyValueState, StatefulBolt
from tuplemesh.topology import OutputFieldsDeclarer, TopologyBuilder, Tuple


class TimesSeenBolt(StatefulBolt):
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["line", "seen"])

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.emit = collector.emit

    def init_state(self, state: KeyValueState) -> None:
        self.seen = state

    def execute(self, tup: Tuple) -> None:
        line = tup.values[0]
        seen = self.seen.get(line, 0) + 1
        self.seen[line] = seen
        self.emit([line, seen])

    def report(self) -> Any:
        seen = getattr(self, "seen", None)
        return {"lines": 0 if seen is None else len(seen)}


def build() -> Any:
    # three of each: every worker runs an ingest, a counting and an export task
    b = TopologyBuilder("exactly-once")
    b.set_spout("lines", IngestSpout("lines", ["line"]), parallelism=3)
    b.set_bolt("seen", TimesSeenBolt(), parallelism=3).fields_grouping("lines", ["line"])
    b.set_bolt("out", ExportBolt("out", schema="line STRING, seen BIGINT"), parallelism=3).shuffle_grouping(
        "seen"
    )
    return b.build()


topology = build()
