"""The queue-time limit of every ring is reported as it stands: in the worker's snapshot, in
Admin (GetStatus, ListQueues), on /metrics and in `tuplemesh top`."""

from __future__ import annotations

import re
import urllib.request

import pytest
from rich.console import Console

from tests.helpers import ListSpout, RecordingBolt
from tuplemesh.config import Config
from tuplemesh.server.admin import QueueRates
from tuplemesh.server.metrics_http import MetricsEndpoint
from tuplemesh.server.status_proto import snapshot_from_proto, snapshot_to_proto
from tuplemesh.top import render
from tuplemesh.topology import TopologyBuilder
from tuplemesh.v1 import admin_pb2
from tuplemesh.worker.executor import BoltExecutor
from tuplemesh.worker.local_cluster import LocalCluster
from tuplemesh.worker.worker import Worker

INBOX_SLOTS, TRANSFER_SLOTS = 64, 32


def _worker(target_ms: int) -> tuple[Worker, BoltExecutor]:
    """A worker that is built and not started: nothing but the test feeds its queue-time limits."""
    b = TopologyBuilder("limits")
    b.set_spout("s", ListSpout([], ["n"]))
    b.set_bolt("sink", RecordingBolt()).shuffle_grouping("s")
    conf = Config(
        {
            "messaging.transport": "local",
            "topology.executor.receive.buffer.size": INBOX_SLOTS,
            "topology.transfer.buffer.size": TRANSFER_SLOTS,
            "topology.backpressure.target.ms": target_ms,
        }
    )
    worker = LocalCluster(b.build(), 1, conf).workers[0]
    (sink,) = [e for e in worker.bolt_executors if e.spec.component == "sink"]
    return worker, sink


def _scrape(worker: Worker) -> str:
    endpoint = MetricsEndpoint(worker, "127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{endpoint.port}/metrics"
        return str(urllib.request.urlopen(url, timeout=10).read().decode())
    finally:
        endpoint.stop()


def test_a_measured_limit_is_in_the_snapshot_in_admin_and_on_metrics():
    worker, sink = _worker(10)
    assert sink.queue_limit is not None
    sink.queue_limit.observe(0.001)  # 1 ms per batch: 10 batches in 10 ms
    sink.queue_limit.observe(0.003)  # moving average 0.001 + 0.3 * 0.002 = 1.6 ms: 6 batches
    inbox = f"inbox:{sink.name}"
    queues = {q.name: q for q in worker.snapshot().queues}
    assert (queues[inbox].limit, queues[inbox].capacity) == (6, INBOX_SLOTS)
    # the transfer thread measured nothing yet: every slot
    assert (queues["transfer"].limit, queues["transfer"].capacity) == (TRANSFER_SLOTS, TRANSFER_SLOTS)

    status = snapshot_to_proto(worker.snapshot())
    assert {q.name: q.limit for q in status.queues}[inbox] == 6
    assert {q.name: q.limit for q in snapshot_from_proto(status).queues}[inbox] == 6
    listed = QueueRates(worker.snapshot()).queues(worker.snapshot())  # what ListQueues answers
    spout = f"inbox:{worker.spout_executors[0].name}"  # a spout's inbox (acks) is not time-bound
    assert {q.name: q.limit for q in listed} == {inbox: 6, spout: INBOX_SLOTS, "transfer": TRANSFER_SLOTS}

    page = _scrape(worker)
    assert f'tuplemesh_queue_limit_slots{{queue="{inbox}",worker="0"}} 6.0\n' in page
    assert f'tuplemesh_queue_limit_slots{{queue="transfer",worker="0"}} {TRANSFER_SLOTS}.0\n' in page
    assert f'tuplemesh_queue_capacity_slots{{queue="{inbox}",worker="0"}} {INBOX_SLOTS}.0\n' in page


def test_with_the_bound_off_the_limit_is_the_ring_size():
    worker, sink = _worker(0)
    assert sink.queue_limit is None
    inbox = f"inbox:{sink.name}"
    limits = {q.name: q.limit for q in worker.snapshot().queues}
    assert (limits[inbox], limits["transfer"]) == (INBOX_SLOTS, TRANSFER_SLOTS)
    page = _scrape(worker)
    assert f'tuplemesh_queue_limit_slots{{queue="{inbox}",worker="0"}} {INBOX_SLOTS}.0\n' in page


@pytest.mark.parametrize("limit", [9, 64])
def test_top_shows_the_limit_between_depth_and_capacity(limit: int):
    stats = admin_pb2.WorkerStats(
        worker=0, queues=[admin_pb2.QueueInfo(name="inbox:sink-0", depth=3, capacity=64, limit=limit)]
    )
    console = Console(width=200, record=True, color_system=None)
    console.print(render({"host:6700": stats}, {}))
    text = console.export_text()
    assert re.search(r"depth\s*┃\s*limit\s*┃\s*capacity", text), text
    assert re.search(rf"inbox:sink-0\s*│\s*3\s*│\s*{limit}\s*│\s*64\s*│", text), text


def test_waits_and_holds_are_in_the_snapshot_in_admin_and_on_metrics():
    """Each path that reports a queue or an executor carries its producer waits and backpressure
    holds: the snapshot, GetStatus (both ways), ListQueues and /metrics. The counts are set here
    (the worker is not started); tests/worker/test_backpressure.py makes real ones."""
    worker, sink = _worker(10)
    inbox = f"inbox:{sink.name}"
    sequencer = sink.inbox.sequencer
    sequencer.producer_waits, sequencer.producer_wait_seconds = 3, 0.25
    spout = worker.spout_executors[0]
    spout.outbox.backpressure_holds, spout.outbox.backpressure_hold_seconds = 2, 0.5

    snapshot = worker.snapshot()
    queue = {q.name: q for q in snapshot.queues}[inbox]
    assert (queue.producer_waits, queue.producer_wait_seconds) == (3, 0.25)
    (executor,) = [e for e in snapshot.executors if e.component == "s"]
    assert (executor.backpressure_holds, executor.backpressure_hold_seconds) == (2, 0.5)

    status = snapshot_to_proto(snapshot)
    (message,) = [q for q in status.queues if q.name == inbox]
    assert (message.producer_waits, message.producer_wait_seconds) == (3, 0.25)
    (sent,) = [e for e in status.executors if e.component == "s"]
    assert (sent.backpressure_holds, sent.backpressure_hold_seconds) == (2, 0.5)
    assert snapshot_from_proto(status).queues == snapshot.queues
    assert snapshot_from_proto(status).executors == snapshot.executors

    (listed,) = [q for q in QueueRates(snapshot).queues(worker.snapshot()) if q.name == inbox]
    assert (listed.producer_waits, listed.producer_wait_seconds, listed.limit) == (3, 0.25, INBOX_SLOTS)

    page = _scrape(worker)
    assert f'tuplemesh_queue_producer_waits_total{{queue="{inbox}",worker="0"}} 3.0\n' in page
    assert f'tuplemesh_queue_producer_wait_seconds_total{{queue="{inbox}",worker="0"}} 0.25\n' in page
    assert 'tuplemesh_backpressure_holds_total{component="s",worker="0"} 2.0\n' in page
    assert 'tuplemesh_backpressure_hold_seconds_total{component="s",worker="0"} 0.5\n' in page
