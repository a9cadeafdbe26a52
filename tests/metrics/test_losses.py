"""Losses and refusals reach /metrics and Admin with their exact counts."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from tests.helpers import ListSpout, RecordingBolt
from tuplemesh.config import Config
from tuplemesh.discovery import DiscoveryStats, StaticDirectory
from tuplemesh.errors import ReceiverStoppedError
from tuplemesh.metrics import WorkerCollector
from tuplemesh.server.status_proto import snapshot_to_proto
from tuplemesh.topology import TopologyBuilder
from tuplemesh.transport import make_context
from tuplemesh.worker.assembly import assemble_worker
from tuplemesh.worker.local_cluster import BASE_PORT, LocalCluster


def test_a_halted_inbox_refusal_is_undeliverable_on_metrics_and_in_admin():
    b = TopologyBuilder("halt")
    b.set_spout("s", ListSpout([], ["n"]))
    b.set_bolt("sink", RecordingBolt()).shuffle_grouping("s")
    cluster = LocalCluster(b.build(), 1, Config({"messaging.transport": "local"}))
    cluster.start()
    worker = cluster.workers[0]
    try:
        sink_task = worker.assignment.tasks_of("sink")[0]
        worker.bolt_executors[0].halt()
        assert worker.bolt_executors[0].join(5)
        with pytest.raises(ReceiverStoppedError):
            worker.receive.on_batch([(sink_task, b"a"), (sink_task, b"b"), (777, b"x")])
        registry = CollectorRegistry()
        registry.register(WorkerCollector(worker))
        labels = {"worker": "0"}
        assert registry.get_sample_value("tuplemesh_undeliverable_messages_total", labels) == 2
        assert registry.get_sample_value("tuplemesh_unknown_task_messages_total", labels) == 1
        status = snapshot_to_proto(worker.snapshot())
        assert (status.undeliverable_messages, status.unknown_task_messages) == (2, 1)
        assert status.received_messages == 3
    finally:
        cluster.stop()


class CountingDirectory(StaticDirectory):
    """Static peers that report discovery trouble, as a Kubernetes directory would."""

    def stats(self) -> DiscoveryStats:
        return DiscoveryStats(relists=2, watch_restarts=5, api_errors=3, endpoint_problems=1)


def test_the_peer_directory_counts_reach_metrics_and_admin():
    b = TopologyBuilder("found")
    b.set_spout("s", ListSpout([], ["n"]))
    b.set_bolt("sink", RecordingBolt()).shuffle_grouping("s")
    conf = Config({"messaging.transport": "local", "topology.workers": 1})
    context = make_context("local")
    context.prepare(conf)
    peers = {0: ("127.0.0.1", BASE_PORT)}
    # as a worker process builds its worker: with the directory it found its peers in
    worker = assemble_worker(
        b.build(), 0, 1, conf, context, port=BASE_PORT, peers=peers, directory=CountingDirectory({})
    )
    worker.start()
    try:
        registry = CollectorRegistry()
        registry.register(WorkerCollector(worker))
        labels = {"worker": "0"}
        assert registry.get_sample_value("tuplemesh_discovery_relists_total", labels) == 2
        assert registry.get_sample_value("tuplemesh_discovery_watch_restarts_total", labels) == 5
        assert registry.get_sample_value("tuplemesh_discovery_api_errors_total", labels) == 3
        assert registry.get_sample_value("tuplemesh_discovery_endpoint_problems_total", labels) == 1
        assert snapshot_to_proto(worker.snapshot()).discovery.api_errors == 3
    finally:
        worker.deactivate_spouts()
        assert worker.stop()
        context.term()
