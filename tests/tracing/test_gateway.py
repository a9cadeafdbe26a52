"""Gateway publish calls continue the caller's W3C trace context (gRPC metadata ``traceparent``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent import futures

import grpc
import msgpack
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from examples.pipeline import build
from tuplemesh import tracing
from tuplemesh.config import Config
from tuplemesh.gateway.service import PUBLISH_ONE_SPAN, PUBLISH_SPAN
from tuplemesh.netutil import free_ports
from tuplemesh.v1 import gateway_pb2, gateway_pb2_grpc
from tuplemesh.worker.local_cluster import LocalCluster

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
PARENT_ID = 0x00F067AA0BA902B7
TRACEPARENT = f"00-{TRACE_ID:032x}-{PARENT_ID:016x}-01"


@pytest.fixture
def traced_gateway() -> Iterator[tuple[gateway_pb2_grpc.GatewayStub, InMemorySpanExporter]]:
    """The pipeline topology's worker 0 in this process, its Gateway served on a free port."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_tracer_provider(provider)
    cluster = LocalCluster(build(), 1, Config({"messaging.transport": "local"}))
    cluster.start()
    server = grpc.server(futures.ThreadPoolExecutor(4))
    cluster.workers[0].serve_features(server, accepting=lambda: True)
    (port,) = free_ports(1)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield gateway_pb2_grpc.GatewayStub(channel), exporter
    finally:
        channel.close()
        server.stop(0)
        cluster.stop()
        tracing.use_tracer_provider(None)
        provider.shutdown()


def test_publish_one_is_a_child_of_the_callers_span(traced_gateway):
    stub, exporter = traced_gateway
    request = gateway_pb2.PublishOneRequest(component="lines", values_json=json.dumps(["a cow"]))
    ack = stub.PublishOne(request, metadata=[("traceparent", TRACEPARENT)], timeout=30)
    assert ack.accepted == 1
    (span,) = [s for s in exporter.get_finished_spans() if s.name == PUBLISH_ONE_SPAN]
    assert span.kind is SpanKind.SERVER
    assert span.context.trace_id == TRACE_ID
    assert span.parent is not None and span.parent.span_id == PARENT_ID and span.parent.is_remote
    assert span.attributes is not None
    assert span.attributes["tuplemesh.component"] == "lines"
    assert span.attributes["tuplemesh.accepted"] == 1
    assert span.attributes["rpc.method"] == "PublishOne"


def test_a_refused_call_is_an_error_span(traced_gateway):
    stub, exporter = traced_gateway
    request = gateway_pb2.PublishOneRequest(component="nope", values_json="[1]")
    with pytest.raises(grpc.RpcError) as raised:
        stub.PublishOne(request, metadata=[("traceparent", TRACEPARENT)], timeout=30)
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    (span,) = [s for s in exporter.get_finished_spans() if s.name == PUBLISH_ONE_SPAN]
    assert span.status.status_code is StatusCode.ERROR
    assert span.context.trace_id == TRACE_ID


def test_a_publish_stream_is_one_span_counting_its_rows(traced_gateway):
    stub, exporter = traced_gateway
    requests = [
        gateway_pb2.PublishRequest(component="lines", packed=msgpack.packb([["x y"]] * 5), sequence=n)
        for n in (1, 2, 3)
    ]
    acks = list(stub.Publish(iter(requests), metadata=[("traceparent", TRACEPARENT)], timeout=30))
    assert [a.accepted for a in acks] == [5, 5, 5]
    (span,) = [s for s in exporter.get_finished_spans() if s.name == PUBLISH_SPAN]
    assert span.context.trace_id == TRACE_ID and span.parent is not None
    assert span.parent.span_id == PARENT_ID
    assert span.attributes is not None
    assert (span.attributes["tuplemesh.accepted"], span.attributes["tuplemesh.requests"]) == (15, 3)


def test_without_a_traceparent_the_call_starts_a_trace(traced_gateway):
    stub, exporter = traced_gateway
    stub.PublishOne(gateway_pb2.PublishOneRequest(component="lines", values_json='["b"]'), timeout=30)
    (span,) = [s for s in exporter.get_finished_spans() if s.name == PUBLISH_ONE_SPAN]
    assert span.parent is None and span.context.trace_id != TRACE_ID
