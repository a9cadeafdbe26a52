"""Every Prometheus metric of a worker, in one place, computed at scrape time.

The data path only increments plain integers (per batch) and per-batch ``Buckets``; this
collector reads them through one ``Worker.snapshot()`` when Prometheus scrapes, so metrics cost
nothing per tuple. Which snapshot field becomes which metric is ``EXPORTS`` (metrics/exports.py).
Names use the ``tuplemesh_`` prefix, base units and ``_total`` on counters; capacity and depth
are separate gauges. Labels are bounded: worker, component, queue, peer.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from tuplemesh.core.feature import FeatureMetric
from tuplemesh.core.stats import HistogramSnapshot, WorkerSnapshot
from tuplemesh.metrics.exports import EXPORTS, Export
from tuplemesh.topology.user_metrics import UserCounter, UserGauge, UserHistogram, UserMetrics

if TYPE_CHECKING:
    from tuplemesh.admission import CallAdmission
    from tuplemesh.rpcerrors import RpcErrors
    from tuplemesh.security import TlsConnections

__all__ = ["EXPORTS", "ObservedWorker", "WorkerCollector"]


class ObservedWorker(Protocol):
    """What the collector reads of a Worker (a Protocol: metrics imports nothing of the worker)."""

    @property
    def user_metrics(self) -> UserMetrics: ...

    def snapshot(self, feature_sections: bool = True) -> WorkerSnapshot: ...

    def feature_metrics(self) -> list[FeatureMetric]: ...


#: Where a snapshot groups items: the field holding them -> (label, the item's field naming it).
_GROUPS = {"executors": ("component", "component"), "queues": ("queue", "name"), "peers": ("peer", "worker")}


class WorkerCollector(Collector):
    """Reads one Worker's snapshot at scrape time and exports it as ``EXPORTS`` says."""

    def __init__(
        self,
        worker: ObservedWorker,
        rpc_errors: RpcErrors | None = None,
        tls: TlsConnections | None = None,
        admission: CallAdmission | None = None,
    ) -> None:
        self.worker = worker
        self.admission = admission
        self.rpc_errors = rpc_errors
        self.tls = tls

    def collect(self) -> Iterator[Metric]:
        snapshot = self.worker.snapshot(feature_sections=False)  # exported by metrics() instead
        worker = str(snapshot.worker)
        for path, export in EXPORTS.items():
            labels, samples = _samples(snapshot, path, export)
            family = _family(export, ["worker", *labels])
            for values, sample in sorted(samples.items()):
                if isinstance(sample, HistogramSnapshot):
                    if sample.counts:  # absent only in a snapshot that never saw a worker
                        family.add_metric([worker, *values], sample.cumulative(), sample.sum)
                else:
                    family.add_metric([worker, *values], sample)
            yield family
        yield from _user_families(self.worker.user_metrics, worker)
        yield from _feature_families(self.worker.feature_metrics(), worker)
        if self.rpc_errors is not None:
            errors = CounterMetricFamily(
                "tuplemesh_rpc_errors_total",
                "gRPC calls answered with an error status, by method and code.",
                labels=["worker", "method", "code"],
            )
            for (method, code), count in sorted(self.rpc_errors.snapshot().items()):
                errors.add_metric([worker, method, code], count)
            yield errors
        if self.admission is not None:
            refused = CounterMetricFamily(
                "tuplemesh_rpc_refused_total",
                "gRPC calls refused (RESOURCE_EXHAUSTED) because their class was at its limit.",
                labels=["worker", "class"],
            )
            for kind, count in self.admission.refused().items():
                refused.add_metric([worker, kind], count)
            in_use = GaugeMetricFamily(
                "tuplemesh_rpc_in_use",
                "gRPC calls and streams running now, by admission class.",
                labels=["worker", "class"],
            )
            for kind, count in self.admission.in_use().items():
                in_use.add_metric([worker, kind], count)
            idle = CounterMetricFamily(
                "tuplemesh_rpc_idle_ended_total",
                "Peer Transfer streams ended because they carried no message for "
                "server.stream.idle.timeout.ms.",
                labels=["worker"],
            )
            idle.add_metric([worker], self.admission.idle_ended)
            yield refused
            yield in_use
            yield idle
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


def _feature_families(metrics: list[FeatureMetric], worker: str) -> Iterator[Metric]:
    """The features' own families (tuplemesh.core.feature), with the worker label first."""
    for metric in metrics:
        labels = ["worker", *metric.labels]
        family: Any = (
            CounterMetricFamily(metric.name, metric.help, labels=labels)
            if metric.kind == "counter"
            else GaugeMetricFamily(metric.name, metric.help, labels=labels)
        )
        for values, value in metric.samples:
            family.add_metric([worker, *values], value)
        yield family


def _user_families(metrics: UserMetrics, worker: str) -> Iterator[Metric]:
    """The components' own metrics, each summed over its tasks in this worker by component."""
    for family in metrics.families():
        out: Any
        if family.kind == "histogram":
            out = HistogramMetricFamily(family.metric, family.help, labels=["worker", "component"])
            histograms: dict[str, HistogramSnapshot] = {}
            for component, handle in family.handles:
                assert isinstance(handle, UserHistogram)
                mine = HistogramSnapshot.of(handle.buckets)
                before = histograms.get(component)
                histograms[component] = mine if before is None else before.merged(mine)
            for component, histogram in sorted(histograms.items()):
                out.add_metric([worker, component], histogram.cumulative(), histogram.sum)
        else:
            kind = CounterMetricFamily if family.kind == "counter" else GaugeMetricFamily
            out = kind(family.metric, family.help, labels=["worker", "component"])
            totals: dict[str, float] = {}
            for component, handle in family.handles:
                assert isinstance(handle, (UserCounter, UserGauge))
                totals[component] = totals.get(component, 0.0) + handle.value
            for component, total in sorted(totals.items()):
                out.add_metric([worker, component], total)
        yield out


def _family(export: Export, labels: list[str]) -> Any:
    if export.kind == "histogram":
        return HistogramMetricFamily(export.metric, export.doc, labels=labels)
    if export.kind == "gauge":
        return GaugeMetricFamily(export.metric, export.doc, labels=labels)
    return CounterMetricFamily(export.metric, export.doc, labels=labels)


def _samples(
    snapshot: WorkerSnapshot, path: str, export: Export
) -> tuple[list[str], dict[tuple[str, ...], Any]]:
    """(labels besides worker, label values -> sample) of one snapshot field."""
    head, _, rest = path.partition(".")
    if head in _GROUPS and rest:
        label, naming = _GROUPS[head]
        samples: dict[tuple[str, ...], Any] = {}
        for item in getattr(snapshot, head):
            value = _leaf(item, rest, export)
            if value is None:
                continue
            key = (str(getattr(item, naming)),)
            before = samples.get(key)
            samples[key] = value if before is None else _add(before, value, export)
        return [label], samples
    value = _leaf(snapshot, path, export)
    if isinstance(value, dict):
        assert export.key is not None, f"{path}: a mapping field needs Export.key"
        return [export.key], {(str(k),): v for k, v in value.items()}
    return [], {} if value is None else {(): value}


def _leaf(item: Any, path: str, export: Export) -> Any:
    """The field at ``path``; None when it, or an optional part on the way, is absent."""
    for name in path.split("."):
        if item is None:
            return None
        item = getattr(item, name)
    return export.value(item) if export.value is not None and item is not None else item


def _add(a: Any, b: Any, export: Export) -> Any:
    if isinstance(a, HistogramSnapshot):
        return a.merged(b)
    return max(a, b) if export.combine == "max" else a + b
