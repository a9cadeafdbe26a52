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
    """Worker 1 of a 2-worker mesh following replicas (its peers never come up; discovery knows
    addresses for workers 0 to 3: the most a rescale may reach)."""
    ports = free_ports(4)
    port = ports[1]
    process = WorkerProcess(
        relay(),
        Config(CONF),
        index=1,
        num_workers=2,
        port=port,
        directory=StaticDirectory({i: ("127.0.0.1", p) for i, p in enumerate(ports)}),
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


def test_a_rescale_beyond_the_known_addresses_is_refused(worker1: WorkerProcess):
    with pytest.raises(
        RescaleRefusedError,
        match=r"cannot rescale to 5 worker\(s\): no address known for worker\(s\) 4 \(discovery knows 4",
    ):
        worker1.rebalance(5, str(Epoch(5, worker1.epoch.code, 1)))
    assert worker1.next_epoch is None and worker1.state != "NOT_SERVING"


def test_an_epoch_of_no_workers_or_not_after_the_current_one_is_refused(worker1: WorkerProcess):
    code = worker1.epoch.code
    with pytest.raises(RescaleRefusedError, match=f"epoch 1/0/{code} has 0 workers; a mesh needs >= 1"):
        worker1.rebalance(0, f"1/0/{code}")
    with pytest.raises(RescaleRefusedError, match=f"epoch 0/3/{code} is not after this worker's 0/2/{code}"):
        worker1.rebalance(3, f"0/3/{code}")
    assert worker1.next_epoch is None
