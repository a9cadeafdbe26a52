"""The worker runtime: receive path, executors, transfer path, worker lifecycle, local cluster."""

from tuplemesh.worker.local_cluster import LocalCluster, RunSummary
from tuplemesh.worker.worker import Worker

__all__ = ["LocalCluster", "RunSummary", "Worker"]
