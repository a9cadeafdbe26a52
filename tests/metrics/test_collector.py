"""The worker's metrics collector on its own: a Worker in local mode, a fresh registry, a known run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tests.helpers import ListSpout, RecordingBolt
from tuplemesh.config import Config
from tuplemesh.metrics import WorkerCollector
from tuplemesh.topology import Topology, TopologyBuilder, Tuple
from tuplemesh.worker.local_cluster import LocalCluster

TRANSFER_SLOTS = 64


class FlakySpout(ListSpout):
    """A ListSpout whose first three ``next_tuple`` calls raise."""

    def next_tuple(self) -> None:
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls <= 3:
            raise RuntimeError(f"flaky call {self.calls}")
        super().next_tuple()


class OddRaisingBolt(RecordingBolt):
    """Records every tuple, then raises on odd numbers."""

    def execute(self, tup: Tuple) -> None:
        super().execute(tup)
        if tup.values[0] % 2:
            raise ValueError(f"odd {tup.values[0]}")


def topology() -> Topology:
    b = TopologyBuilder("collected")
    b.set_spout("source", FlakySpout([[n] for n in range(10)], ["n"]))
    b.set_bolt("sink", OddRaisingBolt()).shuffle_grouping("source")
    return b.build()


@pytest.fixture(scope="module")
def finished() -> Iterator[tuple[LocalCluster, CollectorRegistry]]:
    """One worker that ran ``topology()`` to the end, two stray messages received, then stopped."""
    conf = Config(
        {"messaging.transport": "local", "topology.transfer.buffer.size": TRANSFER_SLOTS,
         "tuplemesh.log.rate.limit.secs": 0}
    )  # fmt: skip
    cluster = LocalCluster(topology(), 1, conf)
    cluster.start()
    worker = cluster.workers[0]
    assert cluster.run_until_done(30.0)
    # after the run: these were delivered by nobody, so the run could not look finished with them
    assert worker.receive.on_batch([(998, b"x"), (999, b"y")]) == [998, 999]
    assert cluster.stop()
    registry = CollectorRegistry()
    registry.register(WorkerCollector(worker))
    yield cluster, registry


def value(registry: CollectorRegistry, name: str, **labels: str) -> Any:
    return registry.get_sample_value(name, {"worker": "0", **labels})


def test_component_counters_have_exact_values(finished: tuple[LocalCluster, CollectorRegistry]):
    _, registry = finished
    assert value(registry, "tuplemesh_tuples_emitted_total", component="source") == 10
    assert value(registry, "tuplemesh_tuples_delivered_total", component="source") == 10
    assert value(registry, "tuplemesh_tuples_received_total", component="sink") == 10
    assert value(registry, "tuplemesh_tuples_executed_total", component="sink") == 10
    assert value(registry, "tuplemesh_tuples_emitted_total", component="sink") == 0


def test_spout_and_bolt_errors_are_counted_apart(finished: tuple[LocalCluster, CollectorRegistry]):
    _, registry = finished
    assert value(registry, "tuplemesh_spout_errors_total", component="source") == 3
    assert value(registry, "tuplemesh_bolt_errors_total", component="source") == 0
    assert value(registry, "tuplemesh_bolt_errors_total", component="sink") == 5
    assert value(registry, "tuplemesh_spout_errors_total", component="sink") == 0
    assert value(registry, "tuplemesh_tuples_failed_total", component="sink") == 5  # each error fails


def test_receive_path_refusals_and_losses(finished: tuple[LocalCluster, CollectorRegistry]):
    _, registry = finished
    assert value(registry, "tuplemesh_unknown_task_messages_total") == 2
    assert value(registry, "tuplemesh_received_messages_total") == 2  # the only batch not sent locally
    for lost in (
        "tuplemesh_undeliverable_messages_total",
        "tuplemesh_transfer_tuples_lost_total",
        "tuplemesh_transfer_tuples_stranded_total",
        "tuplemesh_duplicate_batches_total",
        "tuplemesh_discovery_api_errors_total",
    ):
        assert value(registry, lost) == 0, lost
    assert value(registry, "tuplemesh_tuples_dropped_on_stop_total", component="source") == 0


def test_queues_are_empty_gauges_with_their_capacity(finished: tuple[LocalCluster, CollectorRegistry]):
    cluster, registry = finished
    assert value(registry, "tuplemesh_queue_capacity_slots", queue="transfer") == TRANSFER_SLOTS
    assert value(registry, "tuplemesh_queue_depth_slots", queue="transfer") == 0
    # one worker sends nothing: its transfer queue only ever saw the stop marker
    assert value(registry, "tuplemesh_queue_published_batches_total", queue="transfer") == 1
    (sink,) = [e for e in cluster.workers[0].executors if e.spec.component == "sink"]
    published = value(registry, "tuplemesh_queue_published_batches_total", queue=f"inbox:{sink.name}")
    assert published >= 2  # at least one batch of the spout's emits, then the stop marker


def test_execute_time_is_observed_once_per_executed_tuple(
    finished: tuple[LocalCluster, CollectorRegistry],
):
    _, registry = finished
    # batches of any size: the histogram still counts the 10 tuples, each at its batch's mean
    assert value(registry, "tuplemesh_execute_seconds_count", component="sink") == 10
    assert value(registry, "tuplemesh_execute_seconds_bucket", component="sink", le="+Inf") == 10
    assert value(registry, "tuplemesh_execute_seconds_sum", component="sink") > 0
    # a spout executes nothing
    assert value(registry, "tuplemesh_execute_seconds_count", component="source") == 0


def test_a_scrape_reads_the_worker_once_per_scrape(finished: tuple[LocalCluster, CollectorRegistry]):
    cluster, registry = finished
    worker = cluster.workers[0]
    calls = []
    real = worker.snapshot

    def counting(feature_sections: bool = True) -> Any:
        calls.append(feature_sections)
        return real(feature_sections)

    worker.snapshot = counting  # type: ignore[method-assign]
    try:
        generate_latest(registry)
    finally:
        del worker.snapshot
    assert calls == [False]  # and without the features' sections: their metrics are their own
