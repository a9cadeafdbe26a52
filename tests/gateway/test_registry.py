"""GatewayRegistry: one per worker, owned by its Gateway feature, handed to its tasks before they
open or prepare, cleared and closed when the worker stops."""

from __future__ import annotations

import pytest

from tests.worker.wiring import wire
from tuplemesh.config import Config
from tuplemesh.gateway.components import ExportBolt, IngestSpout
from tuplemesh.gateway.export_log import ExportLog
from tuplemesh.gateway.ingest import IngestQueue
from tuplemesh.gateway.registry import GatewayRegistry
from tuplemesh.gateway.ticket import PublishTicket
from tuplemesh.gateway.worker_feature import GatewayFeature
from tuplemesh.state import KeyValueState, StatefulBolt
from tuplemesh.state.spout import CheckpointedSpout
from tuplemesh.topology import OutputFieldsDeclarer, TopologyBuilder, Tuple
from tuplemesh.worker.executor import BoltExecutor, SpoutExecutor


class Seen(StatefulBolt):
    """Makes the topology checkpointed (an ExportBolt alone does not)."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["line"])

    def init_state(self, state: KeyValueState) -> None:
        pass

    def execute(self, tup: Tuple) -> None:
        pass


class Run:
    """One run of worker 0 of a one-worker IngestSpout -> ExportBolt topology (checkpointed: with
    a StatefulBolt beside the ExportBolt), its executors built as the worker builds them, with
    the Gateway feature or without any feature."""

    def __init__(self, with_gateway: bool = True, checkpointed: bool = False) -> None:
        builder = TopologyBuilder("registry-test")
        builder.set_spout("rows", IngestSpout("rows", ["line"]))
        builder.set_bolt("out", ExportBolt("out", retention=10), tasks=2).shuffle_grouping("rows")
        if checkpointed:
            builder.set_bolt("seen", Seen()).shuffle_grouping("rows")
        self.conf = Config({"topology.acker.executors": 0})
        self.wired = wire(
            builder.build(), self.conf, lambda context: [GatewayFeature(context)] if with_gateway else []
        )
        self.spouts = SpoutExecutor(self.wired.spec("rows"), self.wired.wiring)
        self.bolts = BoltExecutor(self.wired.spec("out"), self.wired.wiring)

    def open(self) -> None:
        """What the executor threads do first: the spout opens, the bolts prepare."""
        for task, spout in self.spouts.tasks.items():
            spout.open(self.conf, self.spouts.contexts[task], self.spouts.collectors[task])
        self.bolts.on_start()

    @property
    def gateway(self) -> GatewayFeature:
        (gateway,) = self.wired.features
        assert isinstance(gateway, GatewayFeature)
        return gateway

    @property
    def spout(self) -> IngestSpout:
        (spout,) = self.spouts.tasks.values()
        if isinstance(spout, CheckpointedSpout):
            spout = spout.spout
        assert isinstance(spout, IngestSpout)
        return spout


def test_tasks_register_with_their_own_workers_registry_and_a_new_run_has_its_own():
    first, second = Run(), Run()  # the same topology and worker index, twice in one process
    for run in (first, second):
        run.open()
        assert run.gateway.registry.ingest_queues("rows") == [run.spout.queue]
        info = run.gateway.registry.export("out")
        assert info is not None
        logs = {i: bolt.log for i, bolt in enumerate(run.bolts.bolts.values())}  # type: ignore[attr-defined]
        assert (info.total_partitions, info.fields, info.schema, info.logs) == (
            2,
            ["line"],
            "line STRING",
            logs,
        )
    assert first.gateway.registry is not second.gateway.registry
    first.gateway.stop()  # the older run stopping must not take the newer run's queues away
    assert first.spout.queue.closed and first.gateway.registry.ingest_queues("rows") == []
    assert second.gateway.registry.ingest_queues("rows") == [second.spout.queue]
    assert not second.spout.queue.closed
    second.gateway.stop()


def test_a_checkpointed_topologys_ingest_spout_gets_the_registry_through_its_wrapper():
    run = Run(checkpointed=True)
    (wrapper,) = run.spouts.tasks.values()
    assert isinstance(wrapper, CheckpointedSpout)  # what the executor runs, and the feature sees
    assert run.spout.gateway_registry is run.gateway.registry
    run.open()
    assert run.gateway.registry.ingest_queues("rows") == [run.spout.queue]
    info = run.gateway.registry.export("out")
    assert info is not None and sorted(info.logs) == [0, 1]
    assert run.bolts.first_error is None
    run.gateway.stop()


def test_a_component_run_without_the_gateway_feature_fails_naming_what_is_missing():
    run = Run(with_gateway=False)
    (task,) = run.spouts.tasks
    with pytest.raises(
        RuntimeError,
        match=r"^IngestSpout 'rows' has no Gateway registry: it runs only in a tuplemesh worker "
        r"with the gateway feature \(registered in tuplemesh.registry\)",
    ):
        run.spout.open(run.conf, run.spouts.contexts[task], run.spouts.collectors[task])
    run.bolts.on_start()  # the executor counts a failed prepare as the task's error
    error = run.bolts.first_error
    assert error is not None
    assert (error.component, error.method, error.type) == ("out", "prepare", "RuntimeError")
    assert error.message.startswith("ExportBolt 'out' has no Gateway registry: it runs only in")
    assert run.bolts.counters.errors == 2  # both tasks


def test_registrations_by_name_and_partition():
    registry = GatewayRegistry()
    queues = [IngestQueue(10, ["line"]), IngestQueue(10, ["line"])]
    for queue in queues:
        registry.register_ingest("rows", queue)
    logs = {0: ExportLog(5), 2: ExportLog(5)}
    for partition, log in logs.items():
        registry.register_export("out", partition, log, 4, ["a", "b"], "a STRING, b BIGINT")
    assert registry.ingest_queues("rows") == queues and registry.ingest_queues("other") == []
    info = registry.export("out")
    assert info is not None and registry.export("other") is None
    assert (info.total_partitions, info.fields, info.schema, info.logs) == (
        4,
        ["a", "b"],
        "a STRING, b BIGINT",
        logs,
    )


def test_close_refuses_rows_releases_full_logs_and_forgets_everything():
    registry = GatewayRegistry()
    queue = IngestQueue(10, ["line"])
    registry.register_ingest("rows", queue)
    ticket = PublishTicket(2)
    assert queue.put(ticket, [[1, 2]], timeout=1.0)
    log = ExportLog(1)
    registry.register_export("out", 0, log, 1, ["n"], "n STRING")
    assert log.append([1])
    registry.close()
    assert registry.ingest_queues("rows") == [] and registry.export("out") is None
    assert queue.closed and not queue.put(PublishTicket(1), [[3]], timeout=1.0)
    # what was accepted before the stop is still there to count
    assert [chunk.entries() for chunk in queue.take(10)] == [[(ticket, 0, [1]), (ticket, 1, [2])]]
    assert not log.append([2])  # full and closed: refused at once instead of waiting
    late = IngestQueue(10, ["line"])
    registry.register_ingest("rows", late)  # a task opening while its worker stops
    assert late.closed and registry.ingest_queues("rows") == []
