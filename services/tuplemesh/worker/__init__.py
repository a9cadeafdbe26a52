"""The worker runtime: receive path, executors, transfer path, worker lifecycle, local cluster.

The package exports nothing itself: import from its modules (``tuplemesh.worker.local_cluster``
for ``LocalCluster``, ``tuplemesh.worker.worker`` for ``Worker``). Importing one of them then
loads only what it needs, and the acking package can use the emit path (``outbox``,
``collectors``) without depending on the whole runtime.
"""
