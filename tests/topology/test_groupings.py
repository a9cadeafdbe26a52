"""Groupings choose tasks exactly as Storm's do, and fields hashing agrees across processes."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from tuplemesh.topology import Fields, stable_hash
from tuplemesh.topology.groupings import (
    AllGrouping,
    FieldsGrouping,
    GlobalGrouping,
    LocalOrShuffleGrouping,
    ShuffleGrouping,
)

TASKS = (3, 4, 5, 6)
FIELDS = Fields(["word", "n"])


def test_shuffle_is_even_over_whole_rounds():
    chooser = ShuffleGrouping().chooser(TASKS, frozenset(), FIELDS)
    counts = Counter(chooser.choose(["x", 1])[0] for _ in range(400))
    assert counts == {3: 100, 4: 100, 5: 100, 6: 100}


def test_local_or_shuffle_prefers_local_tasks():
    chooser = LocalOrShuffleGrouping().chooser(TASKS, frozenset({4, 6, 99}), FIELDS)
    assert Counter(chooser.choose(["x", 1])[0] for _ in range(100)) == {4: 50, 6: 50}
    remote_only = LocalOrShuffleGrouping().chooser(TASKS, frozenset({99}), FIELDS)
    assert {remote_only.choose(["x", 1])[0] for _ in range(100)} == set(TASKS)


def test_all_and_global():
    assert tuple(AllGrouping().chooser(TASKS, frozenset(), FIELDS).choose(["x", 1])) == TASKS
    assert tuple(GlobalGrouping().chooser(TASKS, frozenset(), FIELDS).choose(["x", 1])) == (3,)


@given(st.lists(st.tuples(st.text(max_size=8), st.integers()), min_size=1, max_size=50))
def test_fields_grouping_is_a_function_of_the_key(rows):
    by_word = FieldsGrouping(("word",)).chooser(TASKS, frozenset(), FIELDS)
    by_both = FieldsGrouping(("word", "n")).chooser(TASKS, frozenset(), FIELDS)
    seen: dict[object, object] = {}
    for word, n in rows:
        t1 = tuple(by_word.choose([word, n]))
        assert len(t1) == 1 and t1[0] in TASKS
        assert seen.setdefault(("w", word), t1) == t1
        t2 = tuple(by_both.choose([word, n]))
        assert seen.setdefault(("wn", word, n), t2) == t2


def test_fields_grouping_spreads_keys():
    chooser = FieldsGrouping(("word",)).chooser(TASKS, frozenset(), FIELDS)
    counts = Counter(chooser.choose([f"w{i}", 0])[0] for i in range(4000))
    # stable_hash is crc32, so the spread is fixed: w0..w3999 fall exactly evenly on four tasks
    assert counts == {3: 1000, 4: 1000, 5: 1000, 6: 1000}


def test_stable_hash_is_identical_in_a_new_process_with_another_hash_seed():
    keys = [["apple"], [42], [b"raw"], ["apple", 1], [None, 2.5]]
    here = [stable_hash(k) for k in keys]
    code = f"from tuplemesh.topology import stable_hash; print([stable_hash(k) for k in {keys!r}])"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": "7"}
    )
    assert out.stdout.strip() == str(here)
    assert stable_hash(["apple"]) == __import__("zlib").crc32(b"apple")
