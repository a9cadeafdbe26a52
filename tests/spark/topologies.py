"""Spark test topology: lines in, the same lines out (the export runs on worker 0 only)."""

from __future__ import annotations

from typing import Any

from tuplemesh.gateway import ExportBolt, IngestSpout
from tuplemesh.topology import TopologyBuilder


def build() -> Any:
    # executors by name: echo -> worker 0, lines -> workers 1 and 0
    b = TopologyBuilder("echo")
    b.set_spout("lines", IngestSpout("lines", ["line"]), parallelism=2)
    b.set_bolt("echo", ExportBolt("echo", schema="line STRING")).shuffle_grouping("lines")
    return b.build()


echo = build()
