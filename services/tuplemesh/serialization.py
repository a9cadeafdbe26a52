"""Tuple serialization for deliveries that cross workers (local deliveries are never serialized).

A payload carries (source task, stream id, values) and, for a tuple in a tracked tuple tree
(guaranteed processing), its anchors as a flat ``[root, edge, root, edge, ...]`` list: a fourth
element that tuples outside any tree never carry. A rows payload carries many untracked tuples
of one source task and stream to one task, encoded in one call (``serialize_rows``) and framed
by ``frame_rows``: the byte ``ROWS_MARKER`` (0xc1, which msgpack never writes and JSON never
starts with) and the row count, so a receiver tells it from a single tuple's payload and knows
how many tuples it carries without decoding it. A columns payload (``emit_columns``) is framed the
same way behind ``COLUMNS_MARKER`` (0xc2, msgpack's ``false``, which never starts a tuple's
payload, and JSON never starts with): its body is the same call's encoding of the columns (one
list of values per field) instead of the rows. A batch tracked as a whole (acking) travels behind
``ANCHORED_COLUMNS_MARKER`` (0xc3, msgpack's ``true``) with its anchors as a flat
``[root, edge, ...]`` list after the columns. The serializer is chosen by
``topology.tuple.serializer``: ``msgpack`` (default), ``json``, or ``"module:attr"`` naming a
class with a no-argument constructor that implements `Serializer`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

import msgpack

from tuplemesh.errors import SerializationError
from tuplemesh.plugin_api import Decoded, DecodedRows, RowsSerializer, Serializer
from tuplemesh.plugins import resolve_plugin

__all__ = [
    "ANCHORED_COLUMNS_MARKER",
    "COLUMNS_MARKER",
    "ROWS_HEADER_BYTES",
    "ROWS_MARKER",
    "SERIALIZERS",
    "Decoded",
    "DecodedRows",
    "JsonSerializer",
    "MsgpackSerializer",
    "RowsSerializer",
    "Serializer",
    "anchors_of",
    "flat_anchors",
    "frame_rows",
    "is_batch",
    "load_serializer",
    "rows_count",
    "tuples_in",
]

SERIALIZERS = {
    "msgpack": "tuplemesh.serialization:MsgpackSerializer",
    "json": "tuplemesh.serialization:JsonSerializer",
}


#: First byte of a rows payload; a single tuple's payload never starts with it.
ROWS_MARKER = 0xC1
#: First byte of a columns payload: the body holds one list per field instead of one per row.
COLUMNS_MARKER = 0xC2
#: First byte of a columns payload tracked as a whole: its anchors follow the columns.
ANCHORED_COLUMNS_MARKER = 0xC3
#: Marker byte plus the row count as 4 big-endian bytes.
ROWS_HEADER_BYTES = 5


def frame_rows(count: int, body: bytes, marker: int = ROWS_MARKER) -> bytes:
    """A rows payload (a columns payload with ``COLUMNS_MARKER``): the header, then ``body`` from
    ``serialize_rows``."""
    return bytes((marker,)) + count.to_bytes(4, "big") + body


def is_batch(payload: bytes) -> bool:
    """Whether ``payload`` is a rows or columns payload (many tuples), not a single tuple's."""
    return len(payload) > ROWS_HEADER_BYTES and ROWS_MARKER <= payload[0] <= ANCHORED_COLUMNS_MARKER


def rows_count(payload: bytes) -> int:
    """How many tuples a rows payload carries, read from its header (the body is not decoded).

    A header that cannot be right (fewer than 2 rows, or more rows than body bytes: every row
    takes at least one) belongs to a garbled payload, which counts as one tuple."""
    count = int.from_bytes(payload[1:ROWS_HEADER_BYTES], "big")
    if count < 2 or count > len(payload) - ROWS_HEADER_BYTES:
        return 1
    return count


def tuples_in(messages: Sequence[tuple[int | None, bytes]]) -> int:
    """How many tuples (task, payload) messages carry: one per payload, and a rows or columns
    payload's count for each of those, so every count of tuples sent, received or lost stays in
    tuples."""
    count = 0
    for _, payload in messages:
        if is_batch(payload):
            count += rows_count(payload)
        else:
            count += 1
    return count


def _checked_rows(decoded: Any) -> DecodedRows:
    if type(decoded) is not list or len(decoded) != 3:
        raise SerializationError("rows payload is not a (task, stream, rows) triple")
    source_task, stream_id, rows = decoded
    if type(source_task) is not int or type(stream_id) is not int or type(rows) is not list:
        raise SerializationError("rows payload is not a (task, stream, rows) triple")
    for row in rows:
        if type(row) is not list:
            raise SerializationError("rows payload has a row that is not a list of values")
    return source_task, stream_id, rows


def flat_anchors(anchors: dict[int, int]) -> list[int]:
    if len(anchors) == 1:  # the common case: a tuple in one tree
        return list(next(iter(anchors.items())))
    return [n for pair in anchors.items() for n in pair]


def anchors_of(flat: Any) -> dict[int, int]:
    """The anchors ``flat_anchors`` made; SerializationError when ``flat`` is not such a list."""
    if type(flat) is not list or len(flat) % 2 or any(type(n) is not int for n in flat):
        raise SerializationError("payload anchors are not a flat list of (root, edge) integer pairs")
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _checked(decoded: Any) -> Decoded:
    """Validate a decoded payload's shape; SerializationError naming what is wrong otherwise."""
    if type(decoded) is not list or len(decoded) not in (3, 4):
        raise SerializationError("payload is not a (task, stream, values[, anchors]) sequence")
    source_task, stream_id, values = decoded[0], decoded[1], decoded[2]
    if type(source_task) is not int or type(stream_id) is not int or type(values) is not list:
        raise SerializationError("payload is not a (task, stream, values) triple")
    if len(decoded) == 3:
        return source_task, stream_id, values, None
    flat = decoded[3]
    if type(flat) is list and len(flat) == 2 and type(flat[0]) is int and type(flat[1]) is int:
        return source_task, stream_id, values, {flat[0]: flat[1]}  # the common case: one tree
    return source_task, stream_id, values, anchors_of(flat)


class MsgpackSerializer:
    """msgpack: compact and fast; values may be None, bool, int, float, str, bytes, list, dict."""

    def __init__(self) -> None:
        self._pack = msgpack.Packer(use_bin_type=True, autoreset=True).pack

    def serialize(
        self, source_task: int, stream_id: int, values: Sequence[Any], anchors: dict[int, int] | None = None
    ) -> bytes:
        try:
            if anchors is None:
                return self._pack((source_task, stream_id, values))
            return self._pack((source_task, stream_id, values, flat_anchors(anchors)))
        except (TypeError, ValueError, OverflowError) as exc:
            raise SerializationError(f"cannot serialize tuple values {values!r}: {exc}") from exc

    def serialize_rows(self, source_task: int, stream_id: int, rows: Sequence[Sequence[Any]]) -> bytes:
        try:
            return self._pack((source_task, stream_id, rows))
        except (TypeError, ValueError, OverflowError) as exc:
            raise SerializationError(f"cannot serialize tuple values in {rows!r}: {exc}") from exc

    def deserialize_rows(self, body: bytes) -> DecodedRows:
        try:
            decoded = msgpack.unpackb(body, raw=False)
        except Exception as exc:  # msgpack raises several unrelated types for bad input
            raise SerializationError(f"cannot deserialize {len(body)}-byte rows payload: {exc}") from exc
        return _checked_rows(decoded)

    def deserialize(self, payload: bytes) -> Decoded:
        try:
            decoded = msgpack.unpackb(payload, raw=False)
        except Exception as exc:  # msgpack raises several unrelated types for bad input
            raise SerializationError(f"cannot deserialize {len(payload)}-byte payload: {exc}") from exc
        if type(decoded) is list and len(decoded) == 3:  # the common case, inline: once per tuple
            source_task, stream_id, values = decoded
            if type(source_task) is int and type(stream_id) is int and type(values) is list:
                return source_task, stream_id, values, None
        return _checked(decoded)


class JsonSerializer:
    """JSON: readable on the wire, slower; for debugging."""

    def serialize(
        self, source_task: int, stream_id: int, values: Sequence[Any], anchors: dict[int, int] | None = None
    ) -> bytes:
        body: list[Any] = [source_task, stream_id, list(values)]
        if anchors is not None:
            body.append(flat_anchors(anchors))
        try:
            return json.dumps(body, separators=(",", ":")).encode()
        except (TypeError, ValueError) as exc:
            raise SerializationError(f"cannot serialize tuple values {values!r}: {exc}") from exc

    def serialize_rows(self, source_task: int, stream_id: int, rows: Sequence[Sequence[Any]]) -> bytes:
        try:
            text = json.dumps([source_task, stream_id, [list(r) for r in rows]], separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise SerializationError(f"cannot serialize tuple values in {rows!r}: {exc}") from exc
        return text.encode()

    def deserialize_rows(self, body: bytes) -> DecodedRows:
        try:
            decoded = json.loads(body)
        except (ValueError, TypeError) as exc:
            raise SerializationError(f"cannot deserialize {len(body)}-byte rows payload: {exc}") from exc
        return _checked_rows(decoded)

    def deserialize(self, payload: bytes) -> Decoded:
        try:
            decoded = json.loads(payload)
        except (ValueError, TypeError) as exc:
            raise SerializationError(f"cannot deserialize {len(payload)}-byte payload: {exc}") from exc
        return _checked(decoded)


def load_serializer(name: str) -> Serializer:
    """A new serializer instance for ``topology.tuple.serializer``."""
    factory = resolve_plugin("topology.tuple.serializer", name, SERIALIZERS)
    serializer = factory()
    if not callable(getattr(serializer, "serialize", None)) or not callable(
        getattr(serializer, "deserialize", None)
    ):
        raise SerializationError(f"topology.tuple.serializer {name!r} has no serialize/deserialize methods")
    return cast(Serializer, serializer)
