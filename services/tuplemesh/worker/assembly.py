"""How worker ``index`` of a mesh is put together: the one composition root shared by a worker
process (`tuplemesh.server.process`, which adds its servers around it) and `LocalCluster`
(several workers in one process). Both go through here, so a worker runs with the same conf and
the same prepared transport whichever way it is started."""

from __future__ import annotations

from collections.abc import Mapping

from tuplemesh.config import Config
from tuplemesh.topology import Topology
from tuplemesh.topology.assignment import Epoch
from tuplemesh.transport import make_context
from tuplemesh.transport.base import Context

__all__ = ["prepared_context", "worker_conf"]


def worker_conf(
    conf: Config, topology: Topology, index: int, num_workers: int, epoch: Epoch | None = None
) -> Config:
    """The conf worker ``index`` of ``num_workers`` runs with: the topology's own conf over
    ``conf`` (`Config.with_topology`), then the worker's place in the mesh, and the counter of
    the ``epoch`` it routes by (components read it from their conf; None: the configured one)."""
    place: Mapping[str, object] = {"worker.index": index, "topology.workers": num_workers}
    if epoch is not None:
        place = {**place, "topology.epoch": epoch.counter}
    return conf.with_topology(topology.conf).with_overrides(place)


def prepared_context(conf: Config) -> Context:
    """A context of the transport ``conf`` names (``messaging.transport``), prepared with it."""
    context = make_context(conf["messaging.transport"])
    context.prepare(conf)
    return context
