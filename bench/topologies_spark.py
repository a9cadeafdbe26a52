"""Benchmark topology for the Spark part: rows in, the same rows out, kept until read."""

from __future__ import annotations

from typing import Any

from tuplemesh.gateway import ExportBolt, IngestSpout
from tuplemesh.topology import TopologyBuilder


def build() -> Any:
    b = TopologyBuilder("sparkbench")
    b.set_spout("lines", IngestSpout("lines", ["line"], capacity=50_000), parallelism=2)
    b.set_bolt("echo", ExportBolt("echo", retention=3_000_000, schema="line STRING"), parallelism=2) \
        .local_or_shuffle_grouping("lines")  # fmt: skip
    return b.build()
