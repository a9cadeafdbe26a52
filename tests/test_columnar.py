"""rows_to_columns: records as one list per field, in order; ragged records refused."""

from __future__ import annotations

import pytest

from tuplemesh.columnar import rows_to_columns


def test_rows_become_one_list_per_field_in_row_order() -> None:
    rows = [("a", 1, None), ["b", 2, 2.5], ("c", 3, b"x")]
    assert rows_to_columns(rows) == [["a", "b", "c"], [1, 2, 3], [None, 2.5, b"x"]]


def test_rows_of_one_value_and_no_rows() -> None:
    assert rows_to_columns([("only",)]) == [["only"]]
    assert rows_to_columns([(1,), (2,)]) == [[1, 2]]
    assert rows_to_columns([]) == []
    assert rows_to_columns([(), ()]) == []  # rows of no values: no columns


def test_rows_of_unequal_lengths_are_refused_naming_the_lengths() -> None:
    with pytest.raises(ValueError, match=r"rows of unequal lengths \(1, 2\) cannot be columns"):
        rows_to_columns([("a",), ("b", "c"), ("d",)])
