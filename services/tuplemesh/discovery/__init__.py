"""Peer discovery: worker index -> address, from a static list or Kubernetes EndpointSlices;
the worker count a StatefulSet asks for."""

from tuplemesh.discovery.base import DiscoveryStats, PeerDirectory, Peers, ReplicaSource
from tuplemesh.discovery.static import StaticDirectory

__all__ = ["DiscoveryStats", "PeerDirectory", "Peers", "ReplicaSource", "StaticDirectory"]
