"""Test topologies for the Gateway client: numbers in, a bolt that fails some of them the first
time, a numbered sink (an ExportBolt) out. Run them with acking on to see Publish wait for trees."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuplemesh.gateway import ExportBolt, IngestSpout
from tuplemesh.topology import BasicBolt, Bolt, OutputFieldsDeclarer, TopologyBuilder, Tuple

#: numbers divisible by this fail the first time the flaky bolt sees them
FAIL_EVERY = 7


class FailFirstAttempt(BasicBolt):
    """Fails (raises on) the first attempt of every number divisible by FAIL_EVERY, passes the rest."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["n"])

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.emit = collector.emit
        self.seen: set[int] = set()

    def execute(self, tup: Tuple) -> None:
        n = int(tup.values[0])
        if n % FAIL_EVERY == 0 and n not in self.seen:
            self.seen.add(n)
            raise RuntimeError(f"first attempt of {n} fails on purpose")
        self.emit([n])


class NeverAcks(Bolt):
    """Takes every tuple and never acks it: with acking on, no tree completes."""

    def execute(self, tup: Tuple) -> None:
        return None


def flaky() -> Any:
    b = TopologyBuilder("flaky")
    b.set_spout("numbers", IngestSpout("numbers", ["n"]), parallelism=2)
    b.set_bolt("flaky", FailFirstAttempt(), parallelism=2).fields_grouping("numbers", ["n"])
    b.set_bolt("numbered", ExportBolt("numbered", schema="n BIGINT"), parallelism=2).shuffle_grouping("flaky")
    return b.build()


def stuck() -> Any:
    b = TopologyBuilder("stuck")
    b.set_spout("numbers", IngestSpout("numbers", ["n"]))
    b.set_bolt("sink", NeverAcks()).shuffle_grouping("numbers")
    return b.build()


flaky_numbers = flaky()
stuck_numbers = stuck()
