"""Serializers round-trip tuples and reject garbage with SerializationError."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tuplemesh.errors import PluginError, SerializationError
from tuplemesh.serialization import (
    ROWS_HEADER_BYTES,
    ROWS_MARKER,
    JsonSerializer,
    MsgpackSerializer,
    frame_rows,
    load_serializer,
    rows_count,
)

values = st.lists(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.text(),
        st.binary(),
        st.floats(allow_nan=False),
    ),
    max_size=6,
)


anchors = st.none() | st.dictionaries(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), max_size=4)


@given(st.integers(1, 10_000), st.integers(0, 500), values, anchors)
def test_round_trip_with_and_without_anchors(task, stream, vals, anchor_map):
    for s in (MsgpackSerializer(), JsonSerializer()):
        if isinstance(s, JsonSerializer) and any(isinstance(v, bytes | float) for v in vals):
            continue  # JSON has no bytes, and float text may not round-trip bit-exactly
        assert s.deserialize(s.serialize(task, stream, vals, anchor_map)) == (task, stream, vals, anchor_map)


def test_tuples_outside_a_tree_carry_no_anchor_field():
    s = MsgpackSerializer()
    assert len(s.serialize(1, 2, ["w"])) < len(s.serialize(1, 2, ["w"], {}))


@pytest.mark.parametrize(
    "body, problem",
    [
        ([1, 2, ["v"], [5]], "flat list of \\(root, edge\\) integer pairs"),
        ([1, 2, ["v"], ["a", 1]], "flat list"),
        ([1, 2, ["v"], 7], "flat list"),
        ([1, 2], "sequence"),
        (["1", 2, ["v"]], "triple"),
    ],
)
def test_malformed_anchors_rejected(body, problem):
    import json

    import msgpack

    with pytest.raises(SerializationError, match=problem):
        MsgpackSerializer().deserialize(msgpack.packb(body))
    with pytest.raises(SerializationError, match=problem):
        JsonSerializer().deserialize(json.dumps(body).encode())


@given(st.binary(max_size=64))
def test_garbage_raises_serialization_error(payload):
    for s in (MsgpackSerializer(), JsonSerializer()):
        try:
            result = s.deserialize(payload)
        except SerializationError:
            continue
        # a few byte strings are valid encodings of a triple: then the shape must be right
        assert isinstance(result[2], list)


def test_unserializable_value():
    with pytest.raises(SerializationError, match="cannot serialize"):
        MsgpackSerializer().serialize(1, 0, [object()])


def test_load_by_name_and_path():
    assert isinstance(load_serializer("json"), JsonSerializer)
    assert isinstance(load_serializer("tuplemesh.serialization:MsgpackSerializer"), MsgpackSerializer)
    with pytest.raises(PluginError, match=r"unknown value 'pickle'; known: json, msgpack"):
        load_serializer("pickle")


@given(st.integers(1, 10_000), st.integers(0, 500), st.lists(values, min_size=2, max_size=5))
def test_rows_round_trip_behind_their_header(task, stream, rows):
    for s in (MsgpackSerializer(), JsonSerializer()):
        if isinstance(s, JsonSerializer) and any(isinstance(v, bytes | float) for row in rows for v in row):
            continue
        payload = frame_rows(len(rows), s.serialize_rows(task, stream, rows))
        assert payload[0] == ROWS_MARKER and rows_count(payload) == len(rows)
        assert s.deserialize_rows(payload[ROWS_HEADER_BYTES:]) == (task, stream, rows)


@given(st.integers(1, 10_000), st.integers(0, 500), values, anchors)
def test_no_single_tuple_payload_starts_with_the_rows_marker(task, stream, vals, anchor_map):
    for s in (MsgpackSerializer(), JsonSerializer()):
        if isinstance(s, JsonSerializer) and any(isinstance(v, bytes | float) for v in vals):
            continue
        assert s.serialize(task, stream, vals, anchor_map)[0] != ROWS_MARKER


@pytest.mark.parametrize("body", [[1, 2], [1, 2, "rows"], [1, 2, [["ok"], "not a row"]], ["1", 2, []]])
def test_malformed_rows_rejected(body):
    import json

    import msgpack

    with pytest.raises(SerializationError, match="rows payload"):
        MsgpackSerializer().deserialize_rows(msgpack.packb(body))
    with pytest.raises(SerializationError, match="rows payload"):
        JsonSerializer().deserialize_rows(json.dumps(body).encode())


def test_unserializable_row():
    with pytest.raises(SerializationError, match="cannot serialize"):
        MsgpackSerializer().serialize_rows(1, 0, [["fine"], [object()]])


@pytest.mark.parametrize(
    "payload", [b"\xc1garbage", b"\xc1", b"\xc1\x00\x00\x00\x01x", b"\xc1\x00\x00\x00\x05abc"]
)
def test_an_implausible_rows_header_counts_one_tuple(payload):
    assert rows_count(payload) == 1
