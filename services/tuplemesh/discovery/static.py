"""`StaticDirectory`: a fixed list of peers (loopback runs, tests, or stable DNS names)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tuplemesh.discovery.base import DiscoveryStats, Peers

__all__ = ["StaticDirectory"]


class StaticDirectory:
    def __init__(self, peers: Mapping[int, tuple[str, int]]) -> None:
        self._peers: Peers = dict(peers)

    def start(self) -> None:
        return None

    def snapshot(self) -> Peers:
        return dict(self._peers)

    def subscribe(self, callback: Callable[[Peers], None]) -> None:
        return None  # never changes

    def stats(self) -> DiscoveryStats:
        return DiscoveryStats()  # nothing to watch, nothing to count

    def stop(self) -> None:
        return None
