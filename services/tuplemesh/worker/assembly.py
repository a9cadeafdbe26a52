"""How worker ``index`` of a mesh is put together: the one composition root shared by a worker
process (`tuplemesh.server.process`, which adds its servers around it) and `LocalCluster`
(several workers in one process). Both go through here, so a worker runs with the same conf,
the same prepared transport and the same features whichever way it is started; nothing else
builds a `Worker` or names the registry's features."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tuplemesh.config import Config
from tuplemesh.core.feature_spec import FeatureSet, registered_features
from tuplemesh.topology import Topology
from tuplemesh.topology.assignment import Epoch
from tuplemesh.transport import make_context
from tuplemesh.transport.base import Context
from tuplemesh.worker.worker import Worker

if TYPE_CHECKING:
    from tuplemesh.discovery.base import PeerDirectory

__all__ = ["assemble_worker", "prepared_context", "worker_conf"]


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


def assemble_worker(
    topology: Topology,
    index: int,
    num_workers: int,
    conf: Mapping[str, Any],
    context: Context,
    *,
    port: int,
    peers: Mapping[int, tuple[str, int]],
    epoch: Epoch | None = None,
    directory: PeerDirectory | None = None,
    features: FeatureSet | None = None,
) -> Worker:
    """Worker ``index`` of ``num_workers``, built (not started) with ``conf`` (`worker_conf`'s)
    on ``context`` (`prepared_context`'s), listening on ``port``, its peers at ``peers``.

    ``features``: the features it runs (None: every feature of the registry, in its order);
    ``epoch``: the assignment epoch the process chose (None: the configured one);
    ``directory``: where a worker process finds its peers (None: fixed ``peers``; its counts go
    into the worker's snapshot)."""
    return Worker(
        topology,
        index,
        num_workers,
        conf,
        context,
        port=port,
        peers=peers,
        features=registered_features() if features is None else features,
        epoch=epoch,
        directory=directory,
    )
