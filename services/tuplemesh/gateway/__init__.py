"""The Gateway: external producers publish into IngestSpouts, consumers fetch from ExportBolts."""

from __future__ import annotations

from tuplemesh.gateway.components import ExportBolt, IngestSpout

__all__ = ["ExportBolt", "IngestSpout"]
