"""The composition root: wires a Worker to its gRPC services, health, reflection, /metrics and signals.

Nothing below this package (``worker/``, ``transport/``, ``metrics/``) imports it.
"""

from tuplemesh.server.process import WorkerProcess

__all__ = ["WorkerProcess"]
