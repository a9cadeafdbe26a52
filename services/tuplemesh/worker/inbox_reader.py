"""`InboxReader`: how an executor reads the inbox entries that crossed workers as bytes.

A payload from another worker stays encoded until the executor thread takes it (the receive
thread stays cheap): one tuple's payload, or a rows or columns payload (``emit_many``,
``emit_columns``) whose tuples are all decoded in one call. What does not decode is counted (as
failed, and in ``deserialize_errors``), logged, and left out, so the rest of the inbox batch
still runs. The runs (`tuplemesh.worker.bolt_input`) own the loops; this owns the format.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast

from tuplemesh.errors import SerializationError
from tuplemesh.logutil import RateLimitedLog
from tuplemesh.plugin_api import RowsSerializer
from tuplemesh.serialization import (
    ANCHORED_COLUMNS_MARKER,
    ROWS_HEADER_BYTES,
    ROWS_MARKER,
    Serializer,
    anchors_of,
    is_batch,
    rows_count,
)
from tuplemesh.topology import AnchoredTuple, Columns, Fields, Tuple

__all__ = ["InboxReader", "InputTrees", "ReadCounts"]


class ReadCounts(Protocol):
    """The executor counts a reader adds to when a payload does not decode."""

    deserialize_errors: int
    failed: int


class InputTrees(Protocol):
    """A bolt executor's tuple trees as far as reading its input goes (its tasks' collectors,
    which share them): the rows of a batch of columns as tuples (a batch tracked as a whole
    becomes rows tracked one by one), and failing a batch's trees."""

    def rows_of(self, batch: Columns) -> list[Tuple]: ...

    def fail(self, tup: Any) -> None: ...


class _UnfitBatch(ValueError):
    """A tracked columns payload that decoded but does not fit its stream; ``empty`` is a batch of
    no rows with its anchors, to fail its trees with."""

    def __init__(self, message: str, empty: Columns) -> None:
        super().__init__(message)
        self.empty = empty


class InboxReader:
    """Decodes one executor's payloads (executor thread only, apart from ``tuples_in``)."""

    def __init__(
        self,
        executor: str,
        serializer: Serializer,
        stream_info: Mapping[int, tuple[str, str, Fields]],
        counters: ReadCounts,
        errors_log: RateLimitedLog,
        trees: InputTrees | None = None,
    ) -> None:
        """``trees``: a bolt executor's (only bolts receive tracked batches); None: a batch of
        columns is read as plain rows."""
        self._executor = executor
        self._deserialize = serializer.deserialize
        #: None when the serializer has no rows codec: then no payload is taken for a rows payload
        self._deserialize_rows: Callable[[bytes], tuple[int, int, list[list[Any]]]] | None = (
            serializer.deserialize_rows if isinstance(serializer, RowsSerializer) else None
        )
        #: whether a payload may be a rows or columns payload (the serializer has a rows codec)
        self.rows_codec = self._deserialize_rows is not None
        self._stream_info = stream_info
        self._counters = counters
        self._errors_log = errors_log
        #: the rows of a batch of columns as tuples
        self.rows_of: Callable[[Columns], list[Tuple]] = Columns.tuples if trees is None else trees.rows_of
        #: fails the trees of a tracked batch that does not fit its stream (no rows, its anchors)
        self._fail_trees: Callable[[Columns], None] | None = None if trees is None else trees.fail

    def tuples_in(self, payload: bytes) -> int:
        """How many tuples a payload carries, without decoding it. Any thread."""
        return rows_count(payload) if self.rows_codec and is_batch(payload) else 1

    def peek(self, payload: bytes) -> list[Tuple]:
        """The tuples of a payload, for an observer: none when it does not decode (uncounted
        here: its execution counts it)."""
        try:
            if self.rows_codec and is_batch(payload):
                decoded = self.read_batch(payload)
                return decoded.tuples() if decoded.__class__ is Columns else cast(list[Tuple], decoded)
            source_task, stream_id, values, _ = self._deserialize(payload)
            component, stream, fields = self._stream_info[stream_id]
        except (SerializationError, KeyError, ValueError, TypeError):
            return []
        return [Tuple(values, source_task, component, stream, fields)]

    def decode(self, payload: bytes) -> Tuple | None:
        """The payload's tuple; None (counted, logged, failed) for one that cannot be decoded.

        Its tree cannot be failed early (its anchors are in the bytes that did not decode): with
        acking on, the spout fails it at ``topology.message.timeout.secs`` and replays it."""
        try:
            source_task, stream_id, values, anchors = self._deserialize(payload)
            component, stream, fields = self._stream_info[stream_id]
        except (SerializationError, KeyError, ValueError, TypeError) as exc:
            self._counters.deserialize_errors += 1
            self._counters.failed += 1
            self._errors_log.log(
                "executor %s: undecodable %d-byte payload: %s", self._executor, len(payload), exc
            )
            return None
        if anchors is None:
            return Tuple(values, source_task, component, stream, fields)
        return AnchoredTuple(values, source_task, component, stream, fields, anchors)

    def read_batch(self, payload: bytes) -> Columns | list[Tuple]:
        """A rows payload's tuples, or a columns payload's `Columns`; raises when it does not
        decode, or when its columns do not match its stream's fields and its row count."""
        assert self._deserialize_rows is not None  # only called for a rows or columns payload
        source_task, stream_id, lists = self._deserialize_rows(payload[ROWS_HEADER_BYTES:])
        component, stream, fields = self._stream_info[stream_id]
        marker = payload[0]
        if marker == ROWS_MARKER:
            return [Tuple(values, source_task, component, stream, fields) for values in lists]
        anchors = None
        if marker == ANCHORED_COLUMNS_MARKER:
            if not lists:
                raise ValueError("anchored columns payload without its anchors")
            anchors = anchors_of(lists.pop())
        count = rows_count(payload)
        if len(lists) != len(fields) or any(len(column) != count for column in lists):
            message = f"columns payload of {count} rows does not match the fields {list(fields)}"
            if anchors is None:
                raise ValueError(message)
            empty = Columns([[] for _ in fields], 0, fields, source_task, component, stream, None, anchors)
            raise _UnfitBatch(message, empty)
        return Columns(lists, count, fields, source_task, component, stream, None, anchors)

    def decode_batch(self, payload: bytes) -> Columns | list[Tuple]:
        """A rows or columns payload, decoded (`read_batch`); none (each of its tuples counted as
        failed, logged) when it cannot be. A batch tracked as a whole whose anchors decoded but
        whose columns do not fit its stream has its trees failed now (its spout replays it); one
        that does not decode at all is failed by its trees' timeout (its anchors are in the bytes
        that did not decode). Rows payloads are untracked."""
        try:
            return self.read_batch(payload)
        except (SerializationError, KeyError, ValueError, TypeError) as exc:
            self._counters.deserialize_errors += 1
            self._counters.failed += rows_count(payload)
            self._errors_log.log(
                "executor %s: undecodable %d-byte batch payload: %s", self._executor, len(payload), exc
            )
            if isinstance(exc, _UnfitBatch) and self._fail_trees is not None:
                try:
                    self._fail_trees(exc.empty)
                except Exception as error:  # the rest of the inbox batch still runs
                    self._errors_log.log(
                        "executor %s: failing an unfit batch's trees: %s", self._executor, error
                    )
            return []

    def read(self, entry: Any) -> tuple[Columns | list[Tuple], int]:
        """What an inbox entry other than a Tuple carries (a payload, a rows or columns payload,
        a local emit_many's list or emit_columns' `Columns`), columns kept as columns, and how
        many tuples it stands for; undecodable ones are counted (as failed) and left out."""
        kind = entry.__class__
        if kind is list or kind is Columns:
            return entry, len(entry)
        if self.rows_codec and is_batch(entry):
            return self.decode_batch(entry), rows_count(entry)
        tup = self.decode(entry)
        return ([] if tup is None else [tup]), 1

    def unpack(self, entry: Any) -> tuple[list[Tuple], int]:
        """As `read`, with a batch of columns as its rows (`rows_of`)."""
        run, carried = self.read(entry)
        return (self.rows_of(run) if isinstance(run, Columns) else run), carried

    def carried(self, entry: Any) -> int:
        """How many tuples an inbox entry stands for, without decoding it."""
        kind = entry.__class__
        if kind is list or kind is Columns:
            return len(entry)
        if kind is bytes:
            return self.tuples_in(entry)
        return 1
