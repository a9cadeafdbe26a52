"""GatewayRegistry: one per worker, found by its tasks, cleared and closed when the worker stops."""

from __future__ import annotations

import pytest

from tuplemesh.gateway.export_log import ExportLog
from tuplemesh.gateway.ingest import IngestQueue
from tuplemesh.gateway.registry import GatewayRegistry
from tuplemesh.gateway.ticket import PublishTicket


def test_tasks_find_the_registry_their_worker_attached_and_a_new_run_replaces_it():
    first = GatewayRegistry.attach("registry-test", 0)
    assert GatewayRegistry.of("registry-test", 0) is first
    second = GatewayRegistry.attach("registry-test", 0)
    assert GatewayRegistry.of("registry-test", 0) is second
    first.close()  # the older run stopping must not take the newer run's registry away
    assert GatewayRegistry.of("registry-test", 0) is second
    second.close()
    with pytest.raises(LookupError, match="no worker 0 of topology 'registry-test' runs in this process"):
        GatewayRegistry.of("registry-test", 0)


def test_registrations_by_name_and_partition():
    registry = GatewayRegistry("t", 1)
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
    registry = GatewayRegistry("t", 0)
    queue = IngestQueue(10, ["line"])
    registry.register_ingest("rows", queue)
    ticket = PublishTicket(2)
    assert queue.put(ticket, [[1], [2]], timeout=1.0)
    log = ExportLog(1)
    registry.register_export("out", 0, log, 1, ["n"], "n STRING")
    assert log.append([1])
    registry.close()
    assert registry.ingest_queues("rows") == [] and registry.export("out") is None
    assert queue.closed and not queue.put(PublishTicket(1), [[3]], timeout=1.0)
    # what was accepted before the stop is still there to count
    assert queue.take(10) == [(ticket, 0, [1]), (ticket, 1, [2])]
    assert not log.append([2])  # full and closed: refused at once instead of waiting
    late = IngestQueue(10, ["line"])
    registry.register_ingest("rows", late)  # a task opening while its worker stops
    assert late.closed and registry.ingest_queues("rows") == []
