"""DictState (a task's key-value state), its checkpoint blob, and restore errors."""

from __future__ import annotations

import pytest

from tuplemesh.errors import SerializationError
from tuplemesh.state import DictState, MemoryStore, PartKey, StateRestoreError
from tuplemesh.state.codec import decode_value, encode_value
from tuplemesh.state.parts import load_part


def test_the_state_is_a_mutable_mapping_with_get_put_delete():
    state = DictState()
    state.put("a", 1)
    state["b"] = [1, 2]
    assert state.get("a") == 1 and state["b"] == [1, 2] and state.get("zz", 7) == 7
    assert "a" in state and len(state) == 2 and sorted(state) == ["a", "b"]
    state.delete("a")
    state.delete("never there")  # absent: not an error
    del state["b"]
    assert len(state) == 0 and list(state.items()) == []
    with pytest.raises(KeyError):
        state["a"]


def test_a_snapshot_restores_every_key_and_value_and_tuple_keys_stay_hashable():
    state = DictState()
    values = {"word": 3, 7: "seven", ("pair", 2): {"nested": [1, 2.5, None, b"\x00"]}, "": True}
    for key, value in values.items():
        state[key] = value
    restored = DictState.restore(state.snapshot())
    assert dict(restored.items()) == values
    assert restored[("pair", 2)] == {"nested": [1, 2.5, None, b"\x00"]}


def test_a_blob_that_is_not_a_snapshot_is_a_serialization_error():
    with pytest.raises(SerializationError, match="cannot be decoded"):
        DictState.restore(b"\xc1garbage")
    with pytest.raises(SerializationError, match="cannot be encoded"):
        DictState({"k": object()}).snapshot()


def test_100k_keys_round_trip_exactly():
    state = DictState({f"word-{i}": i for i in range(100_000)})
    restored = DictState.restore(state.snapshot())
    assert len(restored) == 100_000 and restored["word-99999"] == 99_999
    assert dict(restored.items()) == {f"word-{i}": i for i in range(100_000)}


def test_positions_round_trip():
    for position in (None, 0, 12345, "offset-9", [3, "x"], {"partition": 1, "offset": 2}):
        assert decode_value(encode_value(position)) == position


def test_a_missing_or_corrupt_part_names_topology_component_task_and_checkpoint():
    store = MemoryStore()
    key = PartKey("orders", "totals", 7)
    with pytest.raises(StateRestoreError) as missing:
        load_part(store, key, 4, DictState.restore)
    assert "topology 'orders', component 'totals', task 7" in str(missing.value)
    assert "checkpoint 4 holds no state" in str(missing.value)
    store.put_part(key, 4, b"not a snapshot")
    with pytest.raises(StateRestoreError) as corrupt:
        load_part(store, key, 4, DictState.restore)
    assert "topology 'orders', component 'totals', task 7" in str(corrupt.value)
    assert "checkpoint 4 is corrupt" in str(corrupt.value)
    store.put_part(key, 4, DictState({"k": 1}).snapshot())
    assert dict(load_part(store, key, 4, DictState.restore).items()) == {"k": 1}
