"""Peer discovery: worker index -> address, from a static list or Kubernetes EndpointSlices."""

from tuplemesh.discovery.base import PeerDirectory, Peers
from tuplemesh.discovery.static import StaticDirectory

__all__ = ["PeerDirectory", "Peers", "StaticDirectory"]
