"""What every layer above shares: the emit path (``outbox``, ``collectors`` and the ``markers``,
``budget``, ``congestion`` and spout ``tracker`` they work with), the stream plan, the snapshot
types (``stats``, ``summary``) that metrics, Admin and the CLI read, and how things plug into a
worker: the feature interface (``feature``), the acking port (``acking``), what a one-off run
holds (``run_resources``) and what each feature declares (``feature_spec``; the list of
features is ``tuplemesh.registry``).

The package exports nothing itself: import from its modules. It imports no feature and nothing of
``tuplemesh.worker``, so acking, state and metrics can use it without depending on the runtime.
"""
