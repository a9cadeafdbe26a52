"""Small helpers shared by the gRPC servicers (validation that answers with a status code)."""

from __future__ import annotations

import json
from typing import Any, NoReturn

import grpc

__all__ = ["json_array", "reject"]


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
