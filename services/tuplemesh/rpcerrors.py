"""`RpcErrors`: a server interceptor that counts every call answered with an error, by method and code.

Bad input must be counted, not just answered: the worker's ``/metrics`` exports these counts as
``tuplemesh_rpc_errors_total{method, code}``. Both label sets are bounded: methods are the
registered ones (anything else is ``<unknown>``), codes are gRPC's. A request that does not
parse as its protobuf message is counted under ``INTERNAL``, which is what gRPC answers for it;
``UNKNOWN`` means a handler raised something other than an abort (a tuplemesh bug).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import grpc

__all__ = ["RpcErrors"]

UNKNOWN_METHOD = "<unknown>"


class RpcErrors(grpc.ServerInterceptor):
    def __init__(self, on_call: Callable[[grpc.ServicerContext], None] | None = None) -> None:
        """``on_call`` sees the context of every call that reaches a handler (TLS accounting)."""
        self._counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        self._on_call = on_call

    def snapshot(self) -> dict[tuple[str, str], int]:
        """(method, code name) -> calls answered with that error so far."""
        with self._lock:
            return dict(self._counts)

    def record(self, method: str, code: grpc.StatusCode | None) -> None:
        name = (code or grpc.StatusCode.UNKNOWN).name
        with self._lock:
            self._counts[(method, name)] += 1

    def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Any], details: grpc.HandlerCallDetails
    ) -> Any:
        handler = continuation(details)
        if handler is None:
            self.record(UNKNOWN_METHOD, grpc.StatusCode.UNIMPLEMENTED)
            return None
        method = details.method
        deserializer = handler.request_deserializer
        if deserializer is not None:
            deserializer = self._counting_deserializer(method, deserializer)
        if handler.response_streaming:
            behavior = handler.stream_stream if handler.request_streaming else handler.unary_stream
            wrapped = self._counting_stream(method, behavior)
            factory = (
                grpc.stream_stream_rpc_method_handler
                if handler.request_streaming
                else grpc.unary_stream_rpc_method_handler
            )
        else:
            behavior = handler.stream_unary if handler.request_streaming else handler.unary_unary
            wrapped = self._counting_unary(method, behavior)
            factory = (
                grpc.stream_unary_rpc_method_handler
                if handler.request_streaming
                else grpc.unary_unary_rpc_method_handler
            )
        return factory(
            wrapped, request_deserializer=deserializer, response_serializer=handler.response_serializer
        )

    def _counting_deserializer(
        self, method: str, deserializer: Callable[[bytes], Any]
    ) -> Callable[[bytes], Any]:
        def deserialize(data: bytes) -> Any:
            try:
                return deserializer(data)
            except Exception:
                self.record(method, grpc.StatusCode.INTERNAL)
                raise

        return deserialize

    def _counting_unary(self, method: str, behavior: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        on_call = self._on_call

        def call(request: Any, context: grpc.ServicerContext) -> Any:
            if on_call is not None:
                on_call(context)
            try:
                return behavior(request, context)
            except Exception:
                self.record(method, context.code())
                raise

        return call

    def _counting_stream(
        self, method: str, behavior: Callable[[Any, Any], Iterator[Any]]
    ) -> Callable[[Any, Any], Iterator[Any]]:
        on_call = self._on_call

        def call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            if on_call is not None:
                on_call(context)
            try:
                yield from behavior(request, context)
            except Exception:
                self.record(method, context.code())
                raise

        return call
