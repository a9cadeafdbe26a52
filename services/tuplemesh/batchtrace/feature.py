"""OpenTelemetry spans of the batches an executor executes and emits, as a feature.

Written only against the feature interface (tuplemesh.core.feature); the span helpers are
`tuplemesh.tracing`'s, shared with the hops outside executors (transfer, receive, the transport,
the Gateway). Built only while tracing is on (`tuplemesh.tracing.tracer` is not None when the
worker is built): otherwise no executor is touched and none checks anything per batch.

Every executor's outbox gets the tracer, so each emit buffer it flushes is a ``tuplemesh.emit``
span; each inbox batch a bolt executor handles is a ``tuplemesh.execute`` span, a child of the
hop that published the batch, and the parent of what the executor emits meanwhile. The worker's
transfer path makes a ``tuplemesh.transfer`` span around each batch it hands a peer, and its
receive path a ``tuplemesh.receive`` span for each batch it publishes (`hop_tracer`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from tuplemesh import tracing
from tuplemesh.core.feature import (
    BatchRun,
    ExecutorHooks,
    ExecutorView,
    FeatureContext,
    FeatureMetric,
    FeatureServer,
    HopTracer,
)
from tuplemesh.core.feature_spec import FeatureSpec
from tuplemesh.core.markers import Batch

__all__ = ["FEATURE", "BatchTracing", "feature"]


class _Hops:
    """The transfer and receive spans of one worker (`tuplemesh.core.feature.HopTracer`)."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer

    def transfer(self, peer: int, tuples: int, emits: Sequence[Any]) -> AbstractContextManager[Any]:
        attributes = {"tuplemesh.peer": peer, "tuplemesh.tuples": tuples}
        return tracing.current_span(self.tracer, tracing.TRANSFER, emits, attributes)

    def receive(self, tuples: int) -> tuple[Any, Callable[[], None]]:
        span = self.tracer.start_span(tracing.RECEIVE, attributes={"tuplemesh.tuples": tuples})
        return tracing.context_of(span), span.end


class BatchTracing:
    """The execute and emit spans of one worker's executors, and the spans of its hops outside
    them (`hop_tracer`)."""

    name = "tracing"

    def __init__(self, tracer: Any, worker: int) -> None:
        self.tracer = tracer
        self.worker = worker

    def attach(self, executor: ExecutorView) -> ExecutorHooks | None:
        attributes = {"tuplemesh.component": executor.component, "tuplemesh.worker": self.worker}
        outbox = executor.outbox
        outbox.trace_emits(self.tracer, attributes)
        if not executor.is_bolt:
            return None  # a spout executes nothing: its emits are the roots of their traces
        tracer = self.tracer
        execute, context_of = tracing.EXECUTE, tracing.context_of

        def wrap_batch(run: BatchRun) -> BatchRun:
            def traced(batch: list[tuple[int | None, Any]]) -> None:
                # a child of the hop that published the batch; what it emits is the span's child
                span = tracer.start_span(
                    execute, batch.trace if type(batch) is Batch else None, attributes=attributes
                )
                outbox.trace_parent = context_of(span)
                before = executor.executed
                run(batch)
                span.set_attribute("tuplemesh.tuples", executor.executed - before)
                span.end()

            return traced

        return ExecutorHooks(wrap_batch=wrap_batch)

    def hop_tracer(self) -> HopTracer:
        return _Hops(self.tracer)

    def start(self) -> None:
        pass  # no thread: spans are made on the executors' threads

    def stopping(self) -> None:
        pass  # nothing waits on callers from outside

    def stop(self) -> None:
        pass

    def serve(self, where: FeatureServer) -> None:
        pass  # no gRPC service of its own

    def section(self) -> Mapping[str, Any]:
        return {}

    def metrics(self) -> Sequence[FeatureMetric]:
        return ()

    def snapshot_fields(self) -> Mapping[str, Any]:
        return {}


def feature(context: FeatureContext) -> BatchTracing | None:
    """The running part's factory (``FEATURE.build``): None while tracing is off (no OpenTelemetry API,
    or no real tracer provider when the worker is built)."""
    tracer = tracing.tracer()
    return None if tracer is None else BatchTracing(tracer, context.worker)


#: The registry's entry.
FEATURE = FeatureSpec("tracing", build=feature)
