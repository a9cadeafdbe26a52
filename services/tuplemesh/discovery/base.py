"""`PeerDirectory`: where the other workers are (worker index -> host, port); `ReplicaSource`:
how many workers the mesh should have (a StatefulSet's replicas)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["DiscoveryStats", "PeerDirectory", "Peers", "ReplicaSource"]

#: worker index -> (host, port)
Peers = dict[int, tuple[str, int]]


@dataclass(frozen=True, slots=True)
class DiscoveryStats:
    """What a directory has counted since it started (all 0 for a static list)."""

    #: Full lists after the watch's resourceVersion expired (410 Gone).
    relists: int = 0
    #: Watches the API server ended (a timeout) and that resumed where they stopped.
    watch_restarts: int = 0
    #: Failed API calls, each followed by a backoff.
    api_errors: int = 0
    #: Endpoints that could not be mapped to a worker (no ordinal, no port, out of range).
    endpoint_problems: int = 0


class PeerDirectory(Protocol):
    """A snapshot of peer addresses, and notifications when it changes. Thread-safe."""

    def start(self) -> None: ...

    def snapshot(self) -> Peers:
        """The addresses known now (possibly fewer than the workers while pods start)."""
        ...

    def subscribe(self, callback: Callable[[Peers], None]) -> None:
        """Call ``callback(snapshot)`` on every change (from the directory's own thread)."""
        ...

    def stats(self) -> DiscoveryStats:
        """The counts so far. Any thread."""
        ...

    def stop(self) -> None: ...


class ReplicaSource(Protocol):
    """The worker count the mesh is asked to run, and notifications when it changes. Thread-safe."""

    def start(self) -> None: ...

    def replicas(self) -> int | None:
        """The count known now; None while it is unknown."""
        ...

    def subscribe(self, callback: Callable[[int], None]) -> None:
        """Call ``callback(replicas)`` on every change (from the source's own thread)."""
        ...

    def stop(self) -> None: ...
