"""Tuple serialization for deliveries that cross workers (local deliveries are never serialized).

A payload carries (source task, stream id, values). The serializer is chosen by
``topology.tuple.serializer``: ``msgpack`` (default), ``json``, or ``"module:attr"`` naming a
class with a no-argument constructor that implements `Serializer`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol, cast

import msgpack

from tuplemesh.errors import SerializationError
from tuplemesh.plugins import resolve_plugin

__all__ = ["SERIALIZERS", "JsonSerializer", "MsgpackSerializer", "Serializer", "load_serializer"]

SERIALIZERS = {
    "msgpack": "tuplemesh.serialization:MsgpackSerializer",
    "json": "tuplemesh.serialization:JsonSerializer",
}


class Serializer(Protocol):
    """Encodes one tuple's (source task, stream id, values). One instance per thread."""

    def serialize(self, source_task: int, stream_id: int, values: Sequence[Any]) -> bytes: ...

    def deserialize(self, payload: bytes) -> tuple[int, int, list[Any]]: ...


class MsgpackSerializer:
    """msgpack: compact and fast; values may be None, bool, int, float, str, bytes, list, dict."""

    def __init__(self) -> None:
        self._pack = msgpack.Packer(use_bin_type=True, autoreset=True).pack

    def serialize(self, source_task: int, stream_id: int, values: Sequence[Any]) -> bytes:
        try:
            return self._pack((source_task, stream_id, values))
        except (TypeError, ValueError, OverflowError) as exc:
            raise SerializationError(f"cannot serialize tuple values {values!r}: {exc}") from exc

    def deserialize(self, payload: bytes) -> tuple[int, int, list[Any]]:
        try:
            source_task, stream_id, values = msgpack.unpackb(payload, raw=False)
        except Exception as exc:  # msgpack raises several unrelated types for bad input
            raise SerializationError(f"cannot deserialize {len(payload)}-byte payload: {exc}") from exc
        if type(source_task) is not int or type(stream_id) is not int or type(values) is not list:
            raise SerializationError("payload is not a (task, stream, values) triple")
        return source_task, stream_id, values


class JsonSerializer:
    """JSON: readable on the wire, slower; for debugging."""

    def serialize(self, source_task: int, stream_id: int, values: Sequence[Any]) -> bytes:
        try:
            return json.dumps([source_task, stream_id, list(values)], separators=(",", ":")).encode()
        except (TypeError, ValueError) as exc:
            raise SerializationError(f"cannot serialize tuple values {values!r}: {exc}") from exc

    def deserialize(self, payload: bytes) -> tuple[int, int, list[Any]]:
        try:
            source_task, stream_id, values = json.loads(payload)
        except (ValueError, TypeError) as exc:
            raise SerializationError(f"cannot deserialize {len(payload)}-byte payload: {exc}") from exc
        if type(source_task) is not int or type(stream_id) is not int or type(values) is not list:
            raise SerializationError("payload is not a (task, stream, values) triple")
        return source_task, stream_id, values


def load_serializer(name: str) -> Serializer:
    """A new serializer instance for ``topology.tuple.serializer``."""
    factory = resolve_plugin("topology.tuple.serializer", name, SERIALIZERS)
    serializer = factory()
    if not callable(getattr(serializer, "serialize", None)) or not callable(
        getattr(serializer, "deserialize", None)
    ):
        raise SerializationError(f"topology.tuple.serializer {name!r} has no serialize/deserialize methods")
    return cast(Serializer, serializer)
