"""Clients of a worker's gRPC services; ``open_channel`` is how every one of them dials."""

from tuplemesh.client.channel import TlsSettings, open_channel, open_channel_from_config, peer_channel

__all__ = ["TlsSettings", "open_channel", "open_channel_from_config", "peer_channel"]
