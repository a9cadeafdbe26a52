"""KeySketch: exact while the keys fit, bounded memory and a known error bound beyond."""

from __future__ import annotations

import pytest

from tuplemesh.hotkeys.sketch import KeySketch


def test_a_skewed_stream_with_few_keys_is_counted_exactly():
    sketch = KeySketch(capacity=16)
    for i in range(1000):
        sketch.add("hot" if i % 10 < 6 else f"cold-{i % 10}", 0.001)
    assert sketch.entries()[0][:2] == ("hot", 600)
    assert sorted((key, tuples) for key, tuples, _ in sketch.entries()[1:]) == [
        ("cold-6", 100),
        ("cold-7", 100),
        ("cold-8", 100),
        ("cold-9", 100),
    ]
    assert sketch.tuples == 1000 and sketch.offset == 0 and sketch.purges == 0
    assert sketch.entries()[0][2] == pytest.approx(0.6)


def test_many_distinct_keys_stay_within_capacity_and_the_heavy_key_within_its_error_bound():
    sketch = KeySketch(capacity=20)
    hot = 0
    for i in range(100_000):
        if i % 4 == 0:
            sketch.add("hot", 0.0)
            hot += 1
        else:
            sketch.add(i, 0.0)  # every other key appears once
        assert len(sketch.counts) <= 20
    assert sketch.purges > 0
    key, tuples, _ = sketch.entries()[0]
    assert key == "hot"
    assert tuples <= hot <= tuples + sketch.offset  # the Misra-Gries bound
    assert sketch.offset < hot  # the hot key is a quarter of the stream, far above the error
    assert sketch.tuples == 100_000


def test_execute_seconds_follow_their_key_and_shrink_with_its_count_in_a_purge():
    sketch = KeySketch(capacity=4)
    for _ in range(10):
        sketch.add("slow", 0.5)
    for key in ("a", "b", "c"):
        sketch.add(key, 0.1)
    assert sketch.entries()[0] == ("slow", 10, pytest.approx(5.0))
    sketch.add("d", 0.1)  # full: the median count (1) is subtracted from every key
    assert sketch.offset == 1
    assert sketch.entries() == [("slow", 9, pytest.approx(4.5)), ("d", 1, pytest.approx(0.1))]
    assert sketch.seconds == pytest.approx(5.4)  # the totals stay exact


def test_an_unhashable_key_is_counted_by_its_repr():
    sketch = KeySketch(capacity=4)
    sketch.add(["a", 1], 0.0)
    sketch.add(["a", 1], 0.0)
    assert sketch.entries() == [("['a', 1]", 2, 0.0)]


def test_a_capacity_below_two_is_refused_naming_it():
    with pytest.raises(ValueError, match="capacity of at least 2, got 1"):
        KeySketch(capacity=1)
