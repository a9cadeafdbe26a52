"""What every layer above shares: the emit path (``outbox``, ``collectors`` and the ``markers``,
``budget``, ``congestion`` and spout ``tracker`` they work with), the stream plan, and the
snapshot types (``stats``, ``summary``) that metrics, Admin and the CLI read.

The package exports nothing itself: import from its modules. It imports no feature and nothing of
``tuplemesh.worker``, so acking, state and metrics can use it without depending on the runtime.
"""
