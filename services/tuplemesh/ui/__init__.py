"""The web UI: a live view of a mesh (topology graph, rates, backpressure, workers, checkpoints).

Served by every worker under ``/ui/`` on its metrics port, and by ``tuplemesh ui`` from a laptop
that follows the workers' Admin streams. Both feed the same view (``view.mesh_view``).
"""
