"""Small network helpers shared by the launcher, the local cluster and tests."""

from __future__ import annotations

import random
import socket

__all__ = ["free_ports"]

_LOWEST = 10_000


def _ephemeral_low() -> int:
    """First port of the kernel's ephemeral range (outgoing connections take their ports there)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports that were free a moment ago, below the ephemeral range.

    Not ephemeral ports: between choosing a port and binding it, a worker's own outgoing
    connections (to its peers) take ephemeral local ports and could take exactly that one.
    """
    high = max(_LOWEST + 1000, _ephemeral_low())
    chosen: list[int] = []
    sockets = []
    try:
        while len(chosen) < count:
            port = random.randrange(_LOWEST, high)
            if port in chosen:
                continue
            s = socket.socket()
            try:
                s.bind((host, port))
            except OSError:
                s.close()
                continue
            sockets.append(s)
            chosen.append(port)
        return chosen
    finally:
        for s in sockets:
            s.close()
