"""Topologies the fault suite runs in real worker processes (``tests.fault.topologies:NAME``).

``blobs``: an IngestSpout straight into an ExportBolt (Gateway Fetch of large records).

``relay``: ids -> relay (shuffle, one task per worker) -> count (global: one task). The spout
emits ``fault.ids`` ids at about ``fault.rate`` per second, with message ids when acking is on,
and re-emits an id whose tree failed. The sink counts every id it sees, so after a fault the
counts show exactly what was lost (acking off) or counted twice (acking on, replays).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from tuplemesh.topology import BasicBolt, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple


class PacedIdSpout(Spout):
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["id"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.total = int(conf.get("fault.ids", 10_000))
        self.rate = float(conf.get("fault.rate", 2000.0))
        self.reliable = conf["topology.acker.executors"] > 0
        self.next_id = 0
        self.replay: list[int] = []
        self.started = time.monotonic()
        self.acked: Counter[int] = Counter()
        self.failed = 0

    def next_tuple(self) -> None:
        if self.replay:
            i = self.replay.pop()
            self.collector.emit([i], msg_id=i)
            return
        # at most 100 per call: a spout throttled by backpressure must still return to its executor
        due = min(self.total, int((time.monotonic() - self.started) * self.rate), self.next_id + 100)
        while self.next_id < due:
            self.collector.emit([self.next_id], msg_id=self.next_id if self.reliable else None)
            self.next_id += 1

    def ack(self, msg_id: Any) -> None:
        self.acked[msg_id] += 1

    def fail(self, msg_id: Any) -> None:
        self.failed += 1
        self.replay.append(msg_id)

    def is_finished(self) -> bool:
        return self.next_id >= self.total and not self.replay

    def report(self) -> Any:
        twice = sum(1 for n in self.acked.values() if n > 1)
        return {
            "emitted": self.next_id,
            "acked": len(self.acked),
            "acked_twice": twice,
            "replayed": self.failed,
        }


class RelayBolt(BasicBolt):
    """Forwards each id after ``fault.relay.delay.ms`` of work, so queues hold a backlog."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["id"])

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.delay = float(conf.get("fault.relay.delay.ms", 0.0)) / 1000.0

    def execute(self, tup: Tuple) -> None:
        if self.delay:
            time.sleep(self.delay)  # deliberate: the relay's simulated work
        self.collector.emit([tup.values[0]])


class CountingSink(BasicBolt):
    """Counts every id it sees, after ``fault.sink.delay.ms`` of work per tuple."""

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.seen: Counter[int] = Counter()
        self.delay = float(conf.get("fault.sink.delay.ms", 0.0)) / 1000.0

    def execute(self, tup: Tuple) -> None:
        if self.delay:
            time.sleep(self.delay)  # deliberate: the sink's simulated work
        self.seen[tup.values[0]] += 1

    def report(self) -> Any:
        return {"seen": {str(k): v for k, v in self.seen.items()}}


def build_relay() -> Any:
    builder = TopologyBuilder("relay")
    builder.set_spout("ids", PacedIdSpout())
    builder.set_bolt("relay", RelayBolt(), parallelism=3).shuffle_grouping("ids")
    builder.set_bolt("count", CountingSink()).global_grouping("relay")
    return builder.build()


relay = build_relay()


def build_pipe() -> Any:
    """ids -> count over two workers: the spout on worker 1, the sink on worker 0."""
    builder = TopologyBuilder("pipe")
    builder.set_spout("ids", PacedIdSpout())
    builder.set_bolt("count", CountingSink()).global_grouping("ids")
    return builder.build()


pipe = build_pipe()


def build_blobs() -> Any:
    """blobs (an IngestSpout) -> out (an ExportBolt), one task each: records as large as published."""
    from tuplemesh.gateway import ExportBolt, IngestSpout

    builder = TopologyBuilder("blobs")
    builder.set_spout("blobs", IngestSpout("blobs", ["blob"]))
    builder.set_bolt("out", ExportBolt("out", 100)).shuffle_grouping("blobs")
    return builder.build()


blobs = build_blobs()
