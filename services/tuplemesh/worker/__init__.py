"""The worker runtime: receive path, executors, transfer path, worker lifecycle, local cluster.

The package exports nothing itself: import from its modules (``tuplemesh.worker.local_cluster``
for ``LocalCluster``, ``tuplemesh.worker.worker`` for ``Worker``). Importing one of them then
loads only what it needs. The emit path and the snapshot types it shares with the features live
below it, in ``tuplemesh.core``; only the composition roots (``tuplemesh.server``, the CLI, the
launcher) import this package.
"""
