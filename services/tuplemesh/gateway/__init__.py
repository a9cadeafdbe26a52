"""The Gateway: external producers publish into IngestSpouts, consumers fetch from ExportBolts."""

from tuplemesh.gateway.components import ExportBolt, IngestSpout

# The worker's feature factory (named in tuplemesh.core.registry): the runtime's, not public API.
from tuplemesh.gateway.feature import feature as feature

__all__ = ["ExportBolt", "IngestSpout"]
