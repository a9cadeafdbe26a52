"""Every Prometheus metric of a worker, in one place, computed at scrape time.

The data path only increments plain integers (per batch) and per-batch ``Buckets``; this
collector reads them when Prometheus scrapes, so metrics cost nothing per tuple. Names use the
``tuplemesh_`` prefix, base units and ``_total`` on counters; capacity and depth are separate
gauges. Labels are bounded: worker, component, queue, peer.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from tuplemesh.rpcerrors import RpcErrors
    from tuplemesh.security import TlsConnections
    from tuplemesh.worker.worker import Worker

__all__ = ["WorkerCollector"]

_COMPONENT_COUNTERS = {
    "emitted": ("tuplemesh_tuples_emitted_total", "Tuples emitted (emit calls) by component."),
    "executed": (
        "tuplemesh_tuples_executed_total",
        "Tuples executed by component (a broadcast counts per task).",
    ),
    "acked": ("tuplemesh_tuples_acked_total", "Tuples acked by component."),
    "failed": ("tuplemesh_tuples_failed_total", "Tuples failed by component (including bolt errors)."),
    "errors": ("tuplemesh_bolt_errors_total", "Exceptions raised by user code, by component."),
    "timed_out": (
        "tuplemesh_spout_timed_out_total",
        "Tuple trees failed by topology.message.timeout.secs (acking on), by spout component.",
    ),
    "deserialize_errors": (
        "tuplemesh_deserialize_errors_total",
        "Payloads that could not be decoded, by component.",
    ),
}


class WorkerCollector(Collector):
    """Reads one Worker's counters, queues and connections at scrape time."""

    def __init__(
        self, worker: Worker, rpc_errors: RpcErrors | None = None, tls: TlsConnections | None = None
    ) -> None:
        self.worker = worker
        self.rpc_errors = rpc_errors
        self.tls = tls

    def collect(self) -> Iterator[Metric]:
        w = self.worker
        worker = str(w.index)
        counters = w.component_counters()
        for key, (name, doc) in _COMPONENT_COUNTERS.items():
            family = CounterMetricFamily(name, doc, labels=["worker", "component"])
            for component, values in sorted(counters.items()):
                family.add_metric([worker, component], values.get(key, 0))
            yield family

        depth = GaugeMetricFamily(
            "tuplemesh_queue_depth_slots", "Slots in use (each holds a batch).", labels=["worker", "queue"]
        )
        capacity = GaugeMetricFamily(
            "tuplemesh_queue_capacity_slots", "Slots in all.", labels=["worker", "queue"]
        )
        for queue, (used, size) in sorted(w.queue_depths().items()):
            depth.add_metric([worker, queue], used)
            capacity.add_metric([worker, queue], size)
        yield depth
        yield capacity

        transfer = w.transfer
        sent = CounterMetricFamily(
            "tuplemesh_transfer_tuples_sent_total",
            "Tuples handed to the transport, per peer.",
            labels=["worker", "peer"],
        )
        batches = CounterMetricFamily(
            "tuplemesh_transfer_batches_sent_total",
            "Batches handed to the transport, per peer.",
            labels=["worker", "peer"],
        )
        sent_bytes = CounterMetricFamily(
            "tuplemesh_transfer_bytes_sent_total",
            "Packed bytes queued to the transport, per peer.",
            labels=["worker", "peer"],
        )
        connected = GaugeMetricFamily(
            "tuplemesh_peer_connected", "1 while the connection to the peer is up.", labels=["worker", "peer"]
        )
        reconnects = CounterMetricFamily(
            "tuplemesh_peer_reconnects_total", "Reconnections to the peer.", labels=["worker", "peer"]
        )
        resent = CounterMetricFamily(
            "tuplemesh_peer_resent_batches_total",
            "Batches resent after a reconnect.",
            labels=["worker", "peer"],
        )
        unacked = GaugeMetricFamily(
            "tuplemesh_peer_unacked_batches",
            "Batches sent and not yet acknowledged.",
            labels=["worker", "peer"],
        )
        for peer, conn in sorted(transfer.connections.items()):
            labels = [worker, str(peer)]
            sent.add_metric(labels, transfer.sent_to.get(peer, 0))
            batches.add_metric(labels, transfer.batches_to.get(peer, 0))
            stats = conn.stats()
            sent_bytes.add_metric(labels, stats.sent_bytes)
            connected.add_metric(labels, 1 if stats.channel_state == "READY" else 0)
            reconnects.add_metric(labels, stats.reconnects)
            resent.add_metric(labels, stats.resent_batches)
            unacked.add_metric(labels, stats.unacked_batches)
        yield from (sent, batches, sent_bytes, connected, reconnects, resent, unacked)

        lost = CounterMetricFamily(
            "tuplemesh_transfer_tuples_lost_total",
            "Tuples a transport refused (counted, logged).",
            labels=["worker"],
        )
        lost.add_metric([worker], transfer.lost_messages)
        yield lost
        received = CounterMetricFamily(
            "tuplemesh_transfer_tuples_received_total",
            "Tuples received, per sending peer.",
            labels=["worker", "peer"],
        )
        received_bytes = CounterMetricFamily(
            "tuplemesh_transfer_bytes_received_total",
            "Packed bytes received, per sending peer.",
            labels=["worker", "peer"],
        )
        tuples_from, bytes_from = w.received_from()
        for peer in sorted(tuples_from):
            received.add_metric([worker, str(peer)], tuples_from[peer])
            received_bytes.add_metric([worker, str(peer)], bytes_from.get(peer, 0))
        yield received
        yield received_bytes
        unknown = CounterMetricFamily(
            "tuplemesh_unknown_task_messages_total",
            "Messages for tasks this worker does not own.",
            labels=["worker"],
        )
        unknown.add_metric([worker], w.receive.unknown)
        yield unknown
        duplicates = CounterMetricFamily(
            "tuplemesh_duplicate_batches_total", "Resent batches discarded as duplicates.", labels=["worker"]
        )
        duplicates.add_metric([worker], w.duplicate_batches)
        yield duplicates

        sizes = HistogramMetricFamily(
            "tuplemesh_transfer_batch_size_tuples",
            "Tuples per batch handed to the transport.",
            labels=["worker"],
        )
        sizes.add_metric([worker], transfer.batch_sizes.cumulative(), transfer.batch_sizes.total)
        yield sizes
        execute = HistogramMetricFamily(
            "tuplemesh_execute_seconds",
            "Execute time per tuple (the mean of each batch, observed once per batch).",
            labels=["worker", "component"],
        )
        wait = HistogramMetricFamily(
            "tuplemesh_inbox_wait_seconds",
            "Time a batch waited in an executor inbox before its first tuple ran.",
            labels=["worker", "component"],
        )
        for executor in w.executors:
            labels = [worker, executor.spec.component]
            execute.add_metric(labels, executor.execute_seconds.cumulative(), executor.execute_seconds.total)
            wait.add_metric(labels, executor.inbox_wait.cumulative(), executor.inbox_wait.total)
        yield execute
        yield wait
        if self.rpc_errors is not None:
            errors = CounterMetricFamily(
                "tuplemesh_rpc_errors_total",
                "gRPC calls answered with an error status, by method and code.",
                labels=["worker", "method", "code"],
            )
            for (method, code), count in sorted(self.rpc_errors.snapshot().items()):
                errors.add_metric([worker, method, code], count)
            yield errors
        if self.tls is not None:
            handshakes = CounterMetricFamily(
                "tuplemesh_tls_handshakes_total",
                "TLS connections to the worker port, counted before their handshake.",
                labels=["worker"],
            )
            handshakes.add_metric([worker], self.tls.handshakes)
            authenticated = CounterMetricFamily(
                "tuplemesh_tls_authenticated_connections_total",
                "TLS connections that made a call with a verified mesh certificate; handshakes "
                "minus this counts the refused ones (and any that never made a call).",
                labels=["worker"],
            )
            authenticated.add_metric([worker], self.tls.authenticated)
            yield handshakes
            yield authenticated
