"""OpenTelemetry spans of batch hops, read back from the SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.helpers import ListSpout, RecordingBolt
from tuplemesh import tracing
from tuplemesh.config import Config
from tuplemesh.topology import Topology, TopologyBuilder
from tuplemesh.worker.local_cluster import LocalCluster

TUPLES = 30


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_tracer_provider(provider)
    yield exporter
    tracing.use_tracer_provider(None)
    provider.shutdown()


def topology() -> Topology:
    b = TopologyBuilder("traced")
    b.set_spout("source", ListSpout([[n] for n in range(TUPLES)], ["n"]))
    b.set_bolt("sink", RecordingBolt(), parallelism=2).shuffle_grouping("source")
    return b.build()


def run(transport: str, workers: int) -> LocalCluster:
    cluster = LocalCluster(topology(), workers, Config({"messaging.transport": transport}))
    cluster.start()
    try:
        assert cluster.run_until_done(30.0)
    finally:
        assert cluster.stop()
    return cluster


def by_id(spans: tuple[ReadableSpan, ...]) -> dict[int, ReadableSpan]:
    return {span.context.span_id: span for span in spans}


def chain(span: ReadableSpan, spans: dict[int, ReadableSpan]) -> list[str]:
    """The span's name and its ancestors' names, nearest first."""
    names = [span.name]
    while span.parent is not None:
        span = spans[span.parent.span_id]
        names.append(span.name)
    return names


def attribute(span: ReadableSpan, key: str) -> Any:
    assert span.attributes is not None
    return span.attributes[key]


def test_tracing_is_off_without_a_provider_or_without_the_api(monkeypatch: pytest.MonkeyPatch):
    assert tracing.tracer() is None  # the process has OpenTelemetry's default (proxy) provider
    monkeypatch.setattr(tracing, "trace", None)  # as when the extra is not installed
    tracing.use_tracer_provider(TracerProvider())
    try:
        assert tracing.tracer() is None
    finally:
        tracing.use_tracer_provider(None)


def test_without_a_provider_no_hop_holds_a_tracer():
    cluster = LocalCluster(topology(), 1, Config({"messaging.transport": "local"}))
    executors = cluster.workers[0].executors
    assert "tracing" not in cluster.workers[0].features  # no execute span, no per-batch check
    assert all(e.outbox.tracer is None for e in executors)
    assert cluster.workers[0].receive.tracer is None and cluster.workers[0].transfer.tracer is None


def test_local_hops_emit_then_execute(exporter: InMemorySpanExporter):
    run("local", 1)
    spans = exporter.get_finished_spans()
    index = by_id(spans)
    executes = [s for s in spans if s.name == tracing.EXECUTE]
    assert sum(attribute(s, "tuplemesh.tuples") for s in executes) == TUPLES
    for span in executes:
        assert attribute(span, "tuplemesh.component") == "sink"
        assert chain(span, index) == [tracing.EXECUTE, tracing.EMIT]  # the spout's emit is the root
        assert span.context.trace_id == index[span.parent.span_id].context.trace_id  # type: ignore[union-attr]
    emits = [s for s in spans if s.name == tracing.EMIT]
    assert sum(attribute(s, "tuplemesh.tuples") for s in emits) == TUPLES
    assert all(attribute(s, "tuplemesh.component") == "source" for s in emits)


def test_grpc_hops_carry_the_trace_across_workers(exporter: InMemorySpanExporter):
    cluster = run("grpc", 2)
    (spout_worker,) = [w.index for w in cluster.workers if w.spout_executors]
    spans = exporter.get_finished_spans()
    index = by_id(spans)
    executes = [s for s in spans if s.name == tracing.EXECUTE]
    assert sum(attribute(s, "tuplemesh.tuples") for s in executes) == TUPLES
    remote = [s for s in executes if attribute(s, "tuplemesh.worker") != spout_worker]
    local = [s for s in executes if attribute(s, "tuplemesh.worker") == spout_worker]
    assert remote and local
    for span in remote:  # the batch crossed workers: every hop is in the trace, in order
        assert chain(span, index) == [tracing.EXECUTE, tracing.RECEIVE, tracing.TRANSFER, tracing.EMIT]
        trace_ids = {span.context.trace_id}
        parent = span
        while parent.parent is not None:
            parent = index[parent.parent.span_id]
            trace_ids.add(parent.context.trace_id)
        assert len(trace_ids) == 1
    for span in local:
        assert chain(span, index) == [tracing.EXECUTE, tracing.EMIT]
    transfers = [s for s in spans if s.name == tracing.TRANSFER]
    # every emit batch bound for the other worker is a transfer's parent or one of its links
    remote_emits = {s.parent.span_id for s in transfers if s.parent is not None}
    remote_emits |= {link.context.span_id for s in transfers for link in s.links}
    assert sum(attribute(s, "tuplemesh.tuples") for s in transfers) == sum(
        attribute(index[e], "tuplemesh.tuples") for e in remote_emits
    )
