"""Serializers round-trip tuples and reject garbage with SerializationError."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tuplemesh.errors import PluginError, SerializationError
from tuplemesh.serialization import JsonSerializer, MsgpackSerializer, load_serializer

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


@given(st.integers(1, 10_000), st.integers(0, 500), values)
def test_msgpack_round_trip(task, stream, vals):
    s = MsgpackSerializer()
    assert s.deserialize(s.serialize(task, stream, vals)) == (task, stream, vals)


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
