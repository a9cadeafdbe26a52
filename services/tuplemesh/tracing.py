"""OpenTelemetry tracing of batch hops, optional: ``pip install tuplemesh[otel]``.

A batch's hops are spans of one trace: ``tuplemesh.emit`` (an executor flushes an emit buffer),
``tuplemesh.transfer`` (the transfer thread hands a batch to a peer's connection; it links every
emit batch it merged), ``tuplemesh.receive`` (the peer's receive path publishes it into inboxes)
and ``tuplemesh.execute`` (an executor runs it). W3C trace context crosses workers in the
Transfer batch and comes into Gateway calls in their gRPC metadata (``traceparent``).

Tracing is on when the opentelemetry API is installed and the process has a real tracer
provider (the SDK's, set by the application or ``opentelemetry-instrument``) when the worker is
built, and the worker runs the tracing feature (registered by default), which makes the emit and
execute spans and hands the worker's transfer and receive paths their spans; otherwise
``tracer()`` is None and every hop skips tracing with one ``is None`` check.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the extra is not installed: tracing stays off
    trace = None  # type: ignore[assignment]

__all__ = [
    "EMIT",
    "EXECUTE",
    "RECEIVE",
    "TRANSFER",
    "attach_carrier",
    "carrier_of",
    "context_from_carrier",
    "context_of",
    "current_carrier",
    "current_span",
    "detach",
    "server_span",
    "tracer",
    "use_tracer_provider",
]

EMIT, TRANSFER, RECEIVE, EXECUTE = (
    "tuplemesh.emit",
    "tuplemesh.transfer",
    "tuplemesh.receive",
    "tuplemesh.execute",
)

_PROPAGATOR = None if trace is None else TraceContextTextMapPropagator()


#: The provider ``use_tracer_provider`` chose instead of the process's global one.
_provider: Any = None


def use_tracer_provider(provider: Any) -> None:
    """Trace workers built from now on with ``provider`` instead of OpenTelemetry's global one
    (an application embedding workers, or a test with its own exporter); None: the global."""
    global _provider
    _provider = provider


def tracer() -> Any:
    """The tracer the hops use, or None when tracing is off (no API, or no real provider)."""
    if trace is None:
        return None
    provider = _provider if _provider is not None else trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    return provider.get_tracer("tuplemesh")


def context_of(span: Any) -> Any:
    """An OTel Context whose parent is ``span`` (what a batch carries inside a worker)."""
    return trace.set_span_in_context(span)


def carrier_of(parent: Any) -> dict[str, str]:
    """The W3C headers (``traceparent``, ``tracestate``) of a Context, for the wire."""
    carrier: dict[str, str] = {}
    assert _PROPAGATOR is not None
    _PROPAGATOR.inject(carrier, context=parent)
    return carrier


def context_from_carrier(carrier: Mapping[str, str] | Iterable[tuple[str, str]]) -> Any:
    """The Context in W3C headers (a mapping or gRPC metadata pairs); an empty one without."""
    assert _PROPAGATOR is not None
    items = carrier.items() if isinstance(carrier, Mapping) else carrier
    return _PROPAGATOR.extract({k.lower(): v for k, v in items if isinstance(v, str)})


def current_carrier() -> dict[str, str] | None:
    """The W3C headers of the calling thread's current span; None when tracing is off or none."""
    if trace is None or not trace.get_current_span().get_span_context().is_valid:
        return None
    return carrier_of(otel_context.get_current())


def attach_carrier(carrier: Mapping[str, str]) -> object:
    """Make the context in W3C headers current in this thread (a received batch's, so the
    receive path, called synchronously, parents its span there); returns the token ``detach``
    takes back."""
    return otel_context.attach(context_from_carrier(carrier))


def detach(token: object) -> None:
    """Undo ``attach_carrier``."""
    otel_context.detach(token)  # type: ignore[arg-type]


@contextmanager
def current_span(
    tracer: Any, name: str, parents: Sequence[Any], attributes: Mapping[str, Any]
) -> Iterator[Any]:
    """A span over several batches, current in this thread for the block: the first batch's
    context is its parent, every other one a link (a merged batch has several causes)."""
    links = []
    for parent in parents[1:]:
        span_context = trace.get_current_span(parent).get_span_context()
        if span_context.is_valid:
            links.append(trace.Link(span_context))
    span = tracer.start_span(name, parents[0] if parents else None, attributes=attributes, links=links)
    with trace.use_span(span, end_on_exit=True):
        yield span


@contextmanager
def server_span(
    tracer: Any, name: str, metadata: Iterable[tuple[str, Any]], attributes: Mapping[str, Any]
) -> Iterator[Any]:
    """A server span for one gRPC call, child of the caller's W3C trace context (its metadata);
    an exception leaving the block (an abort) is recorded on it as an error. Not made current:
    a streaming call's handler yields between its parts."""
    parent = context_from_carrier(metadata)
    span = tracer.start_span(name, parent, kind=trace.SpanKind.SERVER, attributes=attributes)
    try:
        yield span
    except BaseException as exc:
        span.record_exception(exc)
        span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)))
        raise
    finally:
        span.end()
