"""Small helpers shared by the gRPC servicers (validation that answers with a status code)."""

from __future__ import annotations

import json
from typing import Any, NoReturn

import grpc

__all__ = ["handler_factory", "json_array", "reject", "wake_blocked_grpc_threads_less"]

#: How often a thread blocked in a synchronous gRPC call wakes (gRPC's own default is 0.1 s).
BLOCKED_THREAD_WAKE_SECONDS = 1.0


def wake_blocked_grpc_threads_less() -> None:
    """Threads blocked in synchronous gRPC (a stream's reader waiting for its next message, a
    server handler waiting for the next request) wake every 0.1 s to look again, so that a
    KeyboardInterrupt reaches the main thread; a worker holds two such threads for every peer,
    so an idle worker of a mesh of N woke 20 (N - 1) times a second (on one host of 16 workers,
    a third of each idle worker's CPU). Waits on Linux are interrupted by signals anyway, and
    every blocked call still returns as soon as its message, status or deadline comes: only the
    idle looking is made rarer. A worker process calls this once, before its threads start.
    gRPC reads the period, a module constant, on every wait; left alone if a release drops it."""
    from grpc import _common

    if isinstance(getattr(_common, "MAXIMUM_WAIT_TIMEOUT", None), float):
        _common.MAXIMUM_WAIT_TIMEOUT = BLOCKED_THREAD_WAKE_SECONDS


_HANDLER_FACTORIES: dict[tuple[bool, bool], Any] = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


def handler_factory(request_streaming: bool, response_streaming: bool) -> Any:
    """gRPC's ``*_rpc_method_handler`` for a method of this kind (streaming on either side)."""
    return _HANDLER_FACTORIES[(bool(request_streaming), bool(response_streaming))]


def reject(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    context.abort(code, message)
    raise AssertionError("unreachable: abort raises")  # for type checkers


def json_array(text: str, field: str, context: grpc.ServicerContext) -> list[Any]:
    """``text`` parsed as a JSON array, or INVALID_ARGUMENT naming ``field``."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        reject(context, grpc.StatusCode.INVALID_ARGUMENT, f"{field} is not JSON: {exc}")
    except RecursionError:
        reject(context, grpc.StatusCode.INVALID_ARGUMENT, f"{field} is nested too deeply")
    if not isinstance(value, list):
        reject(context, grpc.StatusCode.INVALID_ARGUMENT, f"{field} must be a JSON array, got {text!r}")
    return value
