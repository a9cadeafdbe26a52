"""Clients of a worker's gRPC services: ``open_channel`` is how every one of them dials, and
``GatewayClient`` publishes into and reads from a running topology."""

from tuplemesh.client.channel import TlsSettings, open_channel, open_channel_from_config, peer_channel
from tuplemesh.client.gateway import (
    ExportOffsets,
    Fetched,
    FetchedBatch,
    FetchedColumns,
    GatewayClient,
    PartitionOffsets,
    PublishResult,
    Record,
)
from tuplemesh.errors import EpochMismatchError, GatewayError

__all__ = [
    "EpochMismatchError",
    "ExportOffsets",
    "Fetched",
    "FetchedBatch",
    "FetchedColumns",
    "GatewayClient",
    "GatewayError",
    "PartitionOffsets",
    "PublishResult",
    "Record",
    "TlsSettings",
    "open_channel",
    "open_channel_from_config",
    "peer_channel",
]
