"""What a worker answers to Admin.Rebalance while it runs, and while a scale-down stops it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tuplemesh.config import Config
from tuplemesh.discovery import StaticDirectory
from tuplemesh.errors import RescaleRefusedError
from tuplemesh.gateway import ExportBolt, IngestSpout
from tuplemesh.netutil import free_ports
from tuplemesh.server import WorkerProcess
from tuplemesh.topology import Topology, TopologyBuilder
from tuplemesh.topology.assignment import Epoch

CONF = {
    "metrics.port": 0,  # no /metrics server in the test process
    "worker.gc.threshold": 0,  # leave the test process's collector alone
    "topology.shutdown.timeout.secs": 4.0,
}


def relay() -> Topology:
    builder = TopologyBuilder("relay")
    builder.set_spout("rows", IngestSpout("rows", ["n"]))
    builder.set_bolt("out", ExportBolt("out", 100)).shuffle_grouping("rows")
    return builder.build()


class Replicas:
    """A ReplicaSource whose count the test sets."""

    def __init__(self, count: int | None) -> None:
        self.count = count

    def start(self) -> None:
        return None

    def replicas(self) -> int | None:
        return self.count

    def subscribe(self, callback: Callable[[int], None]) -> None:
        return None

    def stop(self) -> None:
        return None


@pytest.fixture
def worker1() -> Iterator[WorkerProcess]:
    """Worker 1 of a 2-worker mesh following replicas (its peer never comes up)."""
    [port] = free_ports(1)
    process = WorkerProcess(
        relay(),
        Config(CONF),
        index=1,
        num_workers=2,
        port=port,
        directory=StaticDirectory({1: ("127.0.0.1", port)}),
        replicas=Replicas(2),
    )
    process.start()
    yield process
    process.shutdown()


def test_the_same_epoch_asked_twice_is_accepted_twice(worker1: WorkerProcess):
    target = Epoch(3, worker1.epoch.code, 1)
    assert worker1.rebalance(3, str(target)) == str(target)
    assert worker1.rebalance(3, str(target)) == str(target)  # the initiator retried: on its way
    assert worker1.next_epoch == target
    with pytest.raises(RescaleRefusedError, match="worker 1 is stopping"):
        worker1.rebalance(4, str(Epoch(4, worker1.epoch.code, 1)))


def test_a_worker_stopping_for_a_scale_down_that_removes_it_accepts_the_rescale(worker1: WorkerProcess):
    assert not worker1.removed()
    worker1.replicas.count = 1  # type: ignore[union-attr]
    assert worker1.removed()
    worker1.drain()  # its SIGTERM came first
    with pytest.raises(RescaleRefusedError, match="worker 1 is stopping"):
        worker1.rebalance(3, str(Epoch(3, worker1.epoch.code, 1)))  # it has a place there: refused
    target = Epoch(1, worker1.epoch.code, 1)
    assert worker1.rebalance(1, str(target)) == str(target)  # it leaves either way: accepted
    assert worker1.next_epoch == target


def test_a_running_worker_refuses_an_epoch_of_another_topology_code(worker1: WorkerProcess):
    with pytest.raises(RescaleRefusedError, match="another topology code"):
        worker1.rebalance(3, str(Epoch(3, "fedcba9876543210", 1)))
    assert worker1.next_epoch is None
