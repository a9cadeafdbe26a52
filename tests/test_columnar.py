"""rows_to_columns: records as one list per field, in order; ragged records refused.
columns_to_rows: a range of the records back as rows."""

from __future__ import annotations

import pytest

from tuplemesh.columnar import columns_to_rows, rows_to_columns


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


def test_a_range_of_columns_becomes_rows_and_round_trips() -> None:
    rows = [("a", 1), ("b", 2), ("c", 3), ("d", 4)]
    columns = rows_to_columns(rows)
    assert columns_to_rows(columns, 0, 4) == rows
    assert columns_to_rows(columns, 1, 3) == [("b", 2), ("c", 3)]
    assert columns_to_rows(columns, 2, 2) == []


def test_no_columns_become_records_of_no_values() -> None:
    assert columns_to_rows([], 0, 3) == [(), (), ()]
    assert columns_to_rows([], 5, 5) == []
