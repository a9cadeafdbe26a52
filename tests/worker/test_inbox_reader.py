"""InboxReader: one executor's payloads from other workers, decoded or counted, never raised."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from tuplemesh.logutil import RateLimitedLog
from tuplemesh.serialization import (
    ANCHORED_COLUMNS_MARKER,
    COLUMNS_MARKER,
    flat_anchors,
    frame_rows,
    load_serializer,
)
from tuplemesh.topology import AnchoredTuple, Columns, Fields, Tuple
from tuplemesh.worker.inbox_reader import InboxReader

STREAM = 7
FIELDS = Fields(["word", "n"])


def reader(serializer: str = "msgpack") -> tuple[InboxReader, SimpleNamespace, list[Columns]]:
    counters = SimpleNamespace(deserialize_errors=0, failed=0)
    failed: list[Columns] = []
    read = InboxReader(
        "count[1]",
        load_serializer(serializer),
        {STREAM: ("split", "default", FIELDS)},
        counters,
        RateLimitedLog(logging.getLogger("test"), 0.0),
        SimpleNamespace(rows_of=Columns.tuples, fail=failed.append),
    )
    return read, counters, failed


def test_a_tuple_payload_decodes_with_its_stream_and_anchors() -> None:
    read, counters, _ = reader()
    codec = load_serializer("msgpack")
    plain = read.decode(codec.serialize(3, STREAM, ["a", 1]))
    anchored = read.decode(codec.serialize(3, STREAM, ["b", 2], {11: 5}))
    assert isinstance(plain, Tuple) and not isinstance(plain, AnchoredTuple)
    assert (plain.values, plain.source_task, plain.source_component, plain.source_stream) == (
        ["a", 1],
        3,
        "split",
        "default",
    )
    assert isinstance(anchored, AnchoredTuple) and anchored.anchors == {11: 5}
    assert read.tuples_in(codec.serialize(3, STREAM, ["a", 1])) == 1
    assert (counters.deserialize_errors, counters.failed) == (0, 0)


def test_an_undecodable_payload_or_an_unknown_stream_is_counted_as_failed_and_left_out() -> None:
    read, counters, _ = reader()
    assert read.decode(b"\xc1 not msgpack") is None
    assert read.decode(load_serializer("msgpack").serialize(3, 99, ["a", 1])) is None  # no stream 99
    assert (counters.deserialize_errors, counters.failed) == (2, 2)
    assert read.unpack(b"\xc1") == ([], 1)
    assert (counters.deserialize_errors, counters.failed) == (3, 3)


def test_rows_and_columns_payloads_decode_in_one_call_and_count_all_their_rows_when_garbled() -> None:
    read, counters, _ = reader()
    body = load_serializer("msgpack").serialize_rows(2, STREAM, [["a", 1], ["b", 2], ["c", 3]])
    rows = frame_rows(3, body)
    assert read.tuples_in(rows) == 3
    tuples, count = read.unpack(rows)
    assert [t.values for t in tuples] == [["a", 1], ["b", 2], ["c", 3]] and count == 3
    body = load_serializer("msgpack").serialize_rows(2, STREAM, [["a", "b"], [1, 2]])
    columns = frame_rows(2, body, COLUMNS_MARKER)
    decoded = read.decode_batch(columns)
    assert isinstance(decoded, Columns) and decoded.column("word") == ["a", "b"] and len(decoded) == 2
    tuples, count = read.unpack(columns)
    assert [list(t.values) for t in tuples] == [["a", 1], ["b", 2]] and count == 2  # row views
    assert read.decode_batch(frame_rows(4, b"\xc1 garbled")) == []
    assert (counters.deserialize_errors, counters.failed) == (1, 4)


def test_a_tracked_columns_payload_that_does_not_fit_its_stream_has_its_trees_failed_at_once() -> None:
    read, counters, failed = reader()
    # one column where the stream has two: the anchors decode, the columns do not fit
    body = load_serializer("msgpack").serialize_rows(2, STREAM, [["a", "b"], flat_anchors({21: 9})])
    assert read.decode_batch(frame_rows(2, body, ANCHORED_COLUMNS_MARKER)) == []
    assert (counters.deserialize_errors, counters.failed) == (1, 2)
    [empty] = failed
    assert len(empty) == 0 and empty.anchors == {21: 9}


def test_peek_decodes_for_an_observer_without_counting() -> None:
    read, counters, _ = reader()
    codec = load_serializer("msgpack")
    assert [t.values for t in read.peek(codec.serialize(3, STREAM, ["a", 1]))] == [["a", 1]]
    rows = frame_rows(2, codec.serialize_rows(2, STREAM, [["a", 1], ["b", 2]]))
    assert [list(t.values) for t in read.peek(rows)] == [["a", 1], ["b", 2]]
    assert read.peek(b"\xc1") == [] and read.peek(frame_rows(2, b"\xc1")) == []
    assert (counters.deserialize_errors, counters.failed) == (0, 0)


def test_without_a_rows_codec_a_payload_is_only_ever_one_tuple() -> None:
    class OneAtATime:
        """A serializer without deserialize_rows (a plugin with no rows codec)."""

        def __init__(self) -> None:
            self.codec = load_serializer("msgpack")

        def serialize(self, *args: object) -> bytes:
            return self.codec.serialize(*args)  # type: ignore[arg-type]

        def deserialize(self, payload: bytes) -> object:
            return self.codec.deserialize(payload)

    counters = SimpleNamespace(deserialize_errors=0, failed=0)
    read = InboxReader(
        "b[1]",
        OneAtATime(),  # type: ignore[arg-type]
        {STREAM: ("split", "default", FIELDS)},
        counters,
        RateLimitedLog(logging.getLogger("test"), 0.0),
    )
    assert not read.rows_codec
    rows = frame_rows(2, load_serializer("msgpack").serialize_rows(2, STREAM, [["a", 1], ["b", 2]]))
    assert read.tuples_in(rows) == 1
    assert read.unpack(rows) == ([], 1)  # taken as one tuple's payload, which it is not
    assert (counters.deserialize_errors, counters.failed) == (1, 1)
