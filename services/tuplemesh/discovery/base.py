"""`PeerDirectory`: where the other workers are (worker index -> host, port)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["PeerDirectory", "Peers"]

#: worker index -> (host, port)
Peers = dict[int, tuple[str, int]]


class PeerDirectory(Protocol):
    """A snapshot of peer addresses, and notifications when it changes. Thread-safe."""

    def start(self) -> None: ...

    def snapshot(self) -> Peers:
        """The addresses known now (possibly fewer than the workers while pods start)."""
        ...

    def subscribe(self, callback: Callable[[Peers], None]) -> None:
        """Call ``callback(snapshot)`` on every change (from the directory's own thread)."""
        ...

    def stop(self) -> None: ...
