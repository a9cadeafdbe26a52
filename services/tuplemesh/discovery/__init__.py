"""Peer discovery: worker index -> address, from a static list or Kubernetes EndpointSlices."""

from tuplemesh.discovery.base import DiscoveryStats, PeerDirectory, Peers
from tuplemesh.discovery.static import StaticDirectory

__all__ = ["DiscoveryStats", "PeerDirectory", "Peers", "StaticDirectory"]
