"""The Gateway: external producers publish into IngestSpouts, consumers fetch from ExportBolts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuplemesh.gateway.components import ExportBolt, IngestSpout

if TYPE_CHECKING:
    from tuplemesh.core.feature import FeatureContext
    from tuplemesh.gateway.worker_feature import GatewayFeature

__all__ = ["ExportBolt", "IngestSpout"]


def feature(context: FeatureContext) -> GatewayFeature:
    """The worker's Gateway feature, built for every worker (tuplemesh.core.registry names this
    factory; it is the runtime's, not public API). Imported only as a worker builds it: a program
    importing the components loads neither the feature interface nor the gRPC service."""
    from tuplemesh.gateway.worker_feature import GatewayFeature

    return GatewayFeature(context)
