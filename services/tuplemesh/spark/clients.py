"""How the data source reaches the Gateways: one `GatewayClient` per process and settings.

Spark calls the source and sink many times per query (every micro-batch, every task in a
reused Python worker): sharing a client reuses its channels instead of dialling each time.
"""

from __future__ import annotations

import threading

from tuplemesh.client import GatewayClient
from tuplemesh.spark.options import Options

__all__ = ["client_for"]

_lock = threading.Lock()
_clients: dict[tuple[object, ...], GatewayClient] = {}


def client_for(opts: Options) -> GatewayClient:
    """The process's client for the workers, security and limits ``opts`` name (never closed:
    it lives as long as the Spark Python process that uses it)."""
    key = (opts.targets, opts.tls, opts.token, opts.timeout, opts.retries, opts.batch_size)
    with _lock:
        client = _clients.get(key)
        if client is None or client.closed:
            client = _clients[key] = GatewayClient(
                opts.targets,
                tls=opts.tls,
                token=opts.token,
                timeout=opts.timeout,
                retries=opts.retries,
                batch_size=opts.batch_size,
            )
        return client
